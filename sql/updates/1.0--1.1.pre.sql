/* dedup--1.0--1.1.sql: update of dedup from 1.0 to 1.1
 * Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE. */

\echo Use "ALTER EXTENSION dedup UPDATE TO '1.1'" to load this file. \quit

/*
 * The schema and data steps of the update from 1.0 to 1.1, written by hand:
 * the Makefile builds dedup--1.0--1.1.sql from sql/functions/checks.sql,
 * this file, the other function parts and sql/grants.sql (every function,
 * view and privilege written once, as CREATE OR REPLACE, for both the
 * install script and the update), then sql/updates/1.0--1.1.post.sql.
 * Here: the checks that refuse a 1.0 database 1.1 cannot take, new and
 * changed tables and types, the drops of functions whose signature or
 * result changed, and the migration of 1.0's rows.  A fresh install of
 * 1.1 must come out the same as an updated 1.0 database, which
 * test/scripts/upgrade.sh checks on a filled one.
 */

-------------------------------------------------------------------------
-- Intervals (issue 21): one rule for every ttl, lease, retention and
-- delay, checked on the calendar (dedup.interval_is_valid, from
-- sql/functions/checks.sql, built in before this file); stored settings
-- held to it
-------------------------------------------------------------------------
-- 1.0 accepted intervals with negative parts (judged by a sum that counted
-- a month as 30 days): a stored one either lets a key be claimed twice or
-- makes every claim of its scope fail.  Refuse to update over one, naming
-- it, rather than change or drop a setting behind the owner's back.
DO $$
DECLARE
    bad text;
BEGIN
    SELECT string_agg(pg_catalog.format('%L (ttl %s, lease %s, retention %s)',
                                        s.scope, s.ttl, s.lease, s.retention), ', ' ORDER BY s.scope)
      INTO bad
      FROM dedup.scopes AS s
     WHERE NOT (dedup.interval_is_valid(s.ttl) AND dedup.interval_is_valid(s.lease)
                AND dedup.interval_is_valid(s.retention));
    IF bad IS NOT NULL THEN
        RAISE EXCEPTION 'dedup.scopes holds settings dedup 1.1 cannot apply'
            USING ERRCODE = '22023',
                  DETAIL = 'Scopes with an interval that has a negative part or a part over 100 years: ' || bad || '.',
                  HINT = 'Set each with dedup_set_scope() to an interval with no negative part, or forget it with dedup_reset_scope(), then update again.';
    END IF;
END
$$;
ALTER TABLE dedup.scopes
    ADD CONSTRAINT scopes_ttl_check CHECK (dedup.interval_is_valid(ttl)),
    ADD CONSTRAINT scopes_lease_check CHECK (dedup.interval_is_valid(lease)),
    ADD CONSTRAINT scopes_retention_check CHECK (dedup.interval_is_valid(retention));

-------------------------------------------------------------------------
-- Sequence marks (issue 16): dedup.streams, the stream functions, and a
-- scope's sequence_mode
-------------------------------------------------------------------------
ALTER TABLE dedup.scopes
    ADD COLUMN sequence_mode text COLLATE "C" CHECK (sequence_mode IN ('strict', 'monotonic'));

-- Sequence marks (stream.c): one row per (scope, stream), keyed by a
-- fingerprint of both, holding the producer's epoch and the last sequence
-- number applied.  An advance updates the row in place; no indexed column
-- changes, so it is a HOT update, and the columns that change (expires_at,
-- mark) sit together so that its WAL record holds little more than them.
-- A row expires the scope's retention after its last advance, and the
-- cleanup deletes it.  mark is NULL after a new epoch, before its first
-- advance.
CREATE TABLE dedup.streams (
    key        @extschema@.dedup_fingerprint NOT NULL,
    expires_at timestamptz NOT NULL,
    epoch      bigint CHECK (epoch >= 0),
    mark       bigint CHECK (mark >= 0),
    scope      text COLLATE "C" NOT NULL,
    stream     text COLLATE "C" NOT NULL,
    CONSTRAINT streams_pkey PRIMARY KEY (key)
) USING heap WITH (fillfactor = 70);
COMMENT ON TABLE dedup.streams IS 'per (scope, stream): the producer epoch and the last sequence number applied (the mark), and their expiry';
SELECT pg_catalog.pg_extension_config_dump('dedup.streams', '');

-- Roles granted usage before are not given the stream functions here: a
-- GRANT in an extension script becomes the object's initial privilege,
-- which pg_dump leaves out, so a dump of the updated database would lose
-- it.  Run dedup_grant_usage(role) again for roles that advance streams.

-- dedup_set_scope takes and returns the sequence_mode, history and
-- false_positive_rate (it is the owner's: EXECUTE granted on it by hand
-- must be granted again).  dedup_scope keeps its 1.0 columns, so that
-- application roles keep their EXECUTE on it.
DROP FUNCTION @extschema@.dedup_set_scope(text, interval, interval, interval, integer);

-------------------------------------------------------------------------
-- Per-scope privileges (issue 20): scopes and topics are granted to roles
-- in dedup.grants and checked at a call's first use of its scope
-------------------------------------------------------------------------
-- Who may use which scopes: a role with 'usage' of a scope may claim its
-- keys, begin, complete, release and look up its records, put outbox events
-- of it (as a topic) and read its settings; a role with 'relay' of a topic
-- may take, ack and nack its events and read their figures.  scope NULL is
-- every scope, present and future; a scope ending in '*' is a prefix
-- ('payments.*').  Members of a role have its grants (has_privs_of_role);
-- superusers and the extension owner's roles need none.  Changed through
-- dedup_grant_usage(), dedup_grant_relay() and their revoke twins; the
-- statement trigger empties every backend's cache of them.
CREATE TABLE dedup.grants (
    role       regrole NOT NULL,
    privilege  text COLLATE "C" NOT NULL CHECK (privilege IN ('usage', 'relay')),
    scope      text COLLATE "C" CHECK (scope <> '' AND octet_length(scope) <= 200),
    granted_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
    CONSTRAINT grants_role_privilege_scope_key UNIQUE NULLS NOT DISTINCT (role, privilege, scope)
) USING heap;
COMMENT ON TABLE dedup.grants IS 'scopes and topics each role may use (usage) or relay; change them with dedup_grant_usage() and dedup_grant_relay()';
CREATE TRIGGER grants_changed
    AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON dedup.grants
    FOR EACH STATEMENT EXECUTE FUNCTION dedup.scopes_changed();
SELECT pg_catalog.pg_extension_config_dump('dedup.grants', '');

-- Every role 1.0 granted (EXECUTE on dedup_claim or dedup_outbox_take, by
-- dedup_grant_usage/_relay or by hand) keeps its every-scope meaning.
INSERT INTO dedup.grants (role, privilege, scope)
SELECT DISTINCT a.grantee::regrole, x.privilege, NULL::text
FROM (VALUES ('usage', '@extschema@.dedup_claim(text, text, interval, boolean)'::regprocedure),
             ('relay', '@extschema@.dedup_outbox_take(text, integer)'::regprocedure)) AS x(privilege, fn)
JOIN pg_catalog.pg_proc AS p ON p.oid = x.fn
CROSS JOIN LATERAL pg_catalog.aclexplode(p.proacl) AS a
WHERE a.privilege_type = 'EXECUTE' AND a.grantee <> 0 AND a.grantee <> p.proowner;

-- The grant helpers take scopes, and have revoke twins (sql/grants.sql);
-- one list of functions per privilege.
DROP FUNCTION @extschema@.dedup_grant_usage(regrole);
DROP FUNCTION @extschema@.dedup_grant_relay(regrole);
DROP FUNCTION dedup.grant_execute(regrole, regprocedure[]);

-------------------------------------------------------------------------
-- Time buckets (issue 14): dedup.claims becomes bucket 0 of its own time
-- buckets, as it is: no row moves, the cleanup opens the next bucket
-------------------------------------------------------------------------
-- The time buckets of dedup.claims (bucket.c).  Claims and records are
-- written into the current bucket, a table that inherits from dedup.claims,
-- so that new keys land in a small, recent index; older buckets are only
-- read, and a bucket goes whole (DROP TABLE) once every row in it has
-- expired.  Bucket 0 is dedup.claims itself: the only bucket until the
-- cleanup first opens another, and what a database updated from 1.0 keeps
-- its claims in; once its rows have expired it is emptied with TRUNCATE
-- ONLY and leaves the list.  An empty table stands for bucket 0, current
-- (a new database); the cleanup's first pass lists it.
--
-- state: 'n' next (created, read by every call, written by none yet),
-- 'c' current (the one written), 'x' closed (written no more, its
-- latest expiry not yet known), 's' sealed (max_expires_at known),
-- 'r' retired (every row expired: read by no call, dropped next).
CREATE TABLE dedup.buckets (
    bucket         integer PRIMARY KEY CHECK (bucket >= 0),
    relid          regclass NOT NULL UNIQUE,
    state          "char" NOT NULL CHECK (state IN ('n', 'c', 'x', 's', 'r')),
    opened_at      timestamptz NOT NULL,
    closed_at      timestamptz,
    max_expires_at timestamptz,
    claims         bigint,
    records        bigint
);
COMMENT ON TABLE dedup.buckets IS 'the time buckets of dedup.claims: the table of each, its state, and once closed the latest expiry of its rows';
CREATE UNIQUE INDEX buckets_one_current ON dedup.buckets ((true)) WHERE state = 'c';
SELECT pg_catalog.pg_extension_config_dump('dedup.buckets', '');

-------------------------------------------------------------------------
-- Outbox on batches (issue 15): dedup.outbox becomes an append-only log;
-- a relay's position per topic, its batches in reused slots, and a row of
-- its own only for an event that needs one (dedup.outbox_retry)
-------------------------------------------------------------------------
-- Where each topic's relays are in the log: every event of the topic with
-- a seq below next_seq was handed out in a batch, or held back (in
-- dedup.outbox_held).  A topic has a row from the first take that reads
-- its log (one with no event past 0 has none, as at 0).
CREATE TABLE dedup.outbox_topics (
    topic    text COLLATE "C" NOT NULL,
    next_seq bigint NOT NULL DEFAULT 0,
    part     @extschema@.dedup_fingerprint NOT NULL,
    CONSTRAINT outbox_topics_pkey PRIMARY KEY (topic)
) USING heap;
COMMENT ON TABLE dedup.outbox_topics IS 'each topic''s position in the outbox''s log: the events before it were handed out';

-- The batches of a partition's topics, one row a slot, reused (updated in
-- place, a HOT update while its topic stays: nothing else indexed
-- changes): a busy slot holds a batch of its topic handed out and not yet
-- settled; a free one goes to the next batch of any topic of the
-- partition that needs one (its own topic's first), so that a partition
-- has no more slots than batches handed out at once.  A slot's number is
-- one of its partition's (below 2^16); a batch's id is the partition's
-- number times 2^47, plus the slot's times 2^31, plus the slot's
-- generation, which each new batch in it advances, whatever its topic
-- (dedup.outbox_batch_id()): no id handed out before names a batch handed
-- out after.  Its events are those of the topic's log from first_seq to
-- last_seq, and those of the seqs in extra (handed out from
-- dedup.outbox_held), but for the seqs in settled (held back, or acked or
-- nacked one by one), and the events of dedup.outbox_retry that name the batch
-- (retried of them); events counts them all, aggregates holds hashtext()
-- of their aggregate ids.  attempt is that of its events from the log; a
-- busy slot whose lease passed is handed out again whole.
CREATE TABLE dedup.outbox_batches (
    slot        integer NOT NULL,
    topic       text COLLATE "C" NOT NULL,
    generation  integer NOT NULL DEFAULT 0,
    busy        boolean NOT NULL DEFAULT false,
    attempt     integer NOT NULL DEFAULT 0,
    lease_until timestamptz,
    first_seq   bigint,
    last_seq    bigint,
    settled     bigint[] NOT NULL DEFAULT '{}',
    extra       bigint[] NOT NULL DEFAULT '{}',
    retried     integer NOT NULL DEFAULT 0,
    events      integer NOT NULL DEFAULT 0,
    aggregates  integer[] NOT NULL DEFAULT '{}',
    part        @extschema@.dedup_fingerprint NOT NULL,
    CONSTRAINT outbox_batches_pkey PRIMARY KEY (slot)
) USING heap WITH (fillfactor = 20);
CREATE INDEX outbox_batches_topic ON dedup.outbox_batches (topic, slot);
COMMENT ON TABLE dedup.outbox_batches IS 'the slots of the outbox''s batches, reused by any topic: a busy one holds a batch of its topic handed out and not yet acked, with its events, attempt and lease';

-- Events with a state of their own (PgQ's retry queue): nacked ones,
-- waiting for their retry_delay (and the later events of their aggregate
-- in their batch, sent back with them); redriven dead ones.  A copy
-- of the event's row, with its attempts, the time it may go out again, its
-- last error, and the batch it is in while handed out.
CREATE TABLE dedup.outbox_retry (
    seq           bigint NOT NULL,
    id            uuid NOT NULL,
    topic         text COLLATE "C" NOT NULL,
    aggregatetype text NOT NULL,
    aggregateid   text NOT NULL,
    type          text NOT NULL,
    payload       jsonb,
    headers       jsonb NOT NULL,
    created_at    timestamptz NOT NULL,
    attempts      integer NOT NULL DEFAULT 0,
    visible_at    timestamptz NOT NULL DEFAULT pg_catalog.now(),
    last_error    text,
    batch         bigint,
    part          @extschema@.dedup_fingerprint NOT NULL,
    CONSTRAINT outbox_retry_pkey PRIMARY KEY (id)
) USING heap WITH (fillfactor = 50);
CREATE INDEX outbox_retry_topic_seq ON dedup.outbox_retry (topic, seq);
CREATE INDEX outbox_retry_aggregate_seq ON dedup.outbox_retry (topic, aggregateid, seq);
CREATE INDEX outbox_retry_batch ON dedup.outbox_retry (batch) WHERE batch IS NOT NULL;
COMMENT ON TABLE dedup.outbox_retry IS 'outbox events nacked (with the later events of their aggregate in their batch), or redriven: each with its own attempts and time';

-- Events held back behind an earlier unpublished event of their aggregate
-- (in a busy batch, or in dedup.outbox_retry), without a row each: one row
-- per held aggregate of a topic says that its events in the log from
-- from_seq to upto_seq (all below the topic's position, none in a batch)
-- wait; upto_seq is the seq of one of them.  A take hands them out, in seq
-- order, once the aggregate is free, reading them from the log by seq
-- (sql/functions/outbox.sql says why no index of the log's aggregates).
CREATE TABLE dedup.outbox_held (
    topic       text COLLATE "C" NOT NULL,
    aggregateid text NOT NULL,
    from_seq    bigint NOT NULL,
    upto_seq    bigint NOT NULL,
    part        @extschema@.dedup_fingerprint NOT NULL,
    CONSTRAINT outbox_held_pkey PRIMARY KEY (topic, aggregateid)
) USING heap WITH (fillfactor = 50);
COMMENT ON TABLE dedup.outbox_held IS 'aggregates of the outbox held back behind an earlier unpublished event: the range of the log their waiting events are in, one row per aggregate';

SELECT pg_catalog.pg_extension_config_dump('dedup.outbox_topics', '');
SELECT pg_catalog.pg_extension_config_dump('dedup.outbox_batches', '');
SELECT pg_catalog.pg_extension_config_dump('dedup.outbox_retry', '');
SELECT pg_catalog.pg_extension_config_dump('dedup.outbox_held', '');

-- 1.0's log and dead letters become those of the outbox's partition 0,
-- the one partition of one server (sql/tables/outbox.sql).
ALTER TABLE dedup.outbox
    ADD COLUMN part @extschema@.dedup_fingerprint NOT NULL DEFAULT '00000000000000000000000000000000';
ALTER TABLE dedup.outbox ALTER COLUMN part DROP DEFAULT;
ALTER TABLE dedup.outbox_dead
    ADD COLUMN part @extschema@.dedup_fingerprint NOT NULL DEFAULT '00000000000000000000000000000000';
ALTER TABLE dedup.outbox_dead ALTER COLUMN part DROP DEFAULT;

-- 1.0's events with a state of their own move to dedup.outbox_retry: those
-- handed out before (nacked, leased, or whose lease passed), each with its
-- attempts, time and last error.  Those in flight keep their lease, as a
-- batch of those one 1.0 take handed out (the events of a topic with one
-- lease end: at most one of an aggregate), so that their relay's ack (by
-- id, with its attempt) still counts.  Events never handed out stay in the
-- log, in their place; every topic's relays start at its beginning.
INSERT INTO dedup.outbox_retry (part, seq, id, topic, aggregatetype, aggregateid, type, payload,
                                headers, created_at, attempts, visible_at, last_error)
SELECT o.part, o.seq, o.id, o.topic, o.aggregatetype, o.aggregateid, o.type, o.payload,
       o.headers, o.created_at, o.attempts, o.visible_at, o.last_error
FROM dedup.outbox AS o
WHERE o.attempts > 0;
DO $$
DECLARE
    t record;
    s integer := 0;
BEGIN
    FOR t IN SELECT o.topic, o.visible_at, max(o.attempts) AS attempt, count(*) AS events,
                    array_agg(o.id) AS ids,
                    array_agg(pg_catalog.hashtext(o.aggregateid)) AS aggregates
             FROM dedup.outbox AS o WHERE o.attempts > 0 AND o.status = 't'
             GROUP BY o.topic, o.visible_at ORDER BY min(o.seq)
    LOOP
        s := s + 1;
        IF s > 65535 THEN
            RAISE EXCEPTION 'more than 65535 takes of dedup 1.0 have events in flight'
                USING ERRCODE = '54000',
                      HINT = 'Let their relays ack them, or their leases pass, and update again.';
        END IF;
        INSERT INTO dedup.outbox_batches (part, slot, topic, generation, busy, attempt,
                                          lease_until, retried, events, aggregates)
        VALUES ('00000000000000000000000000000000', s, t.topic, 1, true, t.attempt, t.visible_at, t.events, t.events,
                t.aggregates);
        UPDATE dedup.outbox_retry SET batch = s::bigint * 2147483648 + 1 WHERE id = ANY (t.ids);
    END LOOP;
END
$$;
DELETE FROM dedup.outbox WHERE attempts > 0;
ALTER TABLE dedup.outbox
    DROP COLUMN status, DROP COLUMN attempts, DROP COLUMN visible_at, DROP COLUMN last_error,
    RESET (fillfactor);
DROP INDEX dedup.outbox_aggregate_seq;
DROP INDEX dedup.outbox_topic_seq;
CREATE UNIQUE INDEX outbox_topic_seq ON dedup.outbox (topic, seq);
COMMENT ON TABLE dedup.outbox IS 'the outbox''s log of events, appended by dedup_outbox_put() (Debezium Outbox Event Router columns); published events leave it with the cleanup once their topic''s retention passed';
-- 1.0's keys stay where they are until their retention passes: a 1.1 put
-- keeps its key as the event's id in the log.
COMMENT ON TABLE dedup.outbox_keys IS 'keys of outbox events put by dedup 1.0, kept until their topic''s retention passes';

-- (1.0's took no partition.)
DROP FUNCTION dedup.outbox_check_ids(uuid[], uuid[]);

-------------------------------------------------------------------------
-- The history tier (issue 17): a scope's approximate memory of its expired
-- claims.  Claims carry their scope's history_id; the cleanup folds them
-- into the history's generations as their bucket retires.
-------------------------------------------------------------------------
ALTER TABLE dedup.scopes
    ADD COLUMN history interval CHECK (dedup.interval_is_valid(history)),
    ADD COLUMN false_positive_rate double precision
               CHECK (false_positive_rate BETWEEN 0.0001 AND 0.1),
    ADD COLUMN history_id integer UNIQUE;
ALTER TABLE dedup.claims ADD COLUMN history integer;

-- The history tier of a scope (history.c): what its expired claims leave
-- behind.  A scope with a history (dedup.scopes.history, the window, and
-- false_positive_rate) has a history_id, written into each of its claims
-- (dedup.claims.history); when the cleanup retires a time bucket, it folds
-- the fingerprints of the bucket's claims of such scopes into the scope's
-- open generation, a blocked Bloom filter, in the same transaction.
--
-- A generation takes the folds of one slice of time (as long as the
-- window), and goes whole once its slice ended a window ago: a fold at
-- time t is remembered until at least t + window.  Its bits are kept in
-- chunks of 63 blocks of 128 bytes (one row a chunk, about one page); a
-- chunk no fold has touched has no row.  A generation's rate of false
-- positives is half the scope's (less after a slice that grew), so that
-- the two slices a look-up reads add up to the scope's rate; a generation
-- that fills before its slice ends is followed by another of twice its keys
-- and a lower rate (a scalable Bloom filter).
CREATE SEQUENCE dedup.history_ids AS integer;
COMMENT ON SEQUENCE dedup.history_ids IS 'the history_id of a scope that is given a history';
SELECT pg_catalog.pg_extension_config_dump('dedup.history_ids', '');

CREATE TABLE dedup.history_generations (
    generation bigint PRIMARY KEY,
    history_id integer NOT NULL,
    opened_at  timestamptz NOT NULL,
    slice_end  timestamptz NOT NULL,
    rate       double precision NOT NULL CHECK (rate > 0 AND rate < 1),
    k          integer NOT NULL CHECK (k BETWEEN 1 AND 13),
    nblocks    integer NOT NULL CHECK (nblocks > 0),
    capacity   bigint NOT NULL CHECK (capacity > 0),
    keys       bigint NOT NULL DEFAULT 0 CHECK (keys >= 0)
) USING heap;
COMMENT ON TABLE dedup.history_generations IS 'the generations of the scopes'' histories: each a blocked Bloom filter of the claims folded during its slice';
CREATE SEQUENCE dedup.history_generations_seq OWNED BY dedup.history_generations.generation;
ALTER TABLE dedup.history_generations
    ALTER COLUMN generation SET DEFAULT pg_catalog.nextval('dedup.history_generations_seq');
SELECT pg_catalog.pg_extension_config_dump('dedup.history_generations', '');
SELECT pg_catalog.pg_extension_config_dump('dedup.history_generations_seq', '');

CREATE TABLE dedup.history_blocks (
    generation bigint NOT NULL,
    chunk      integer NOT NULL CHECK (chunk >= 0),
    bits       bytea NOT NULL,
    CONSTRAINT history_blocks_pkey PRIMARY KEY (generation, chunk)
) USING heap;
ALTER TABLE dedup.history_blocks ALTER COLUMN bits SET STORAGE PLAIN;
COMMENT ON TABLE dedup.history_blocks IS 'the bits of the history generations, a chunk of 8064 bytes a row';
SELECT pg_catalog.pg_extension_config_dump('dedup.history_blocks', '');

-------------------------------------------------------------------------
-- Records (issue 32): whether a key was taken over from a holder whose
-- lease had passed, so that a caller without an attempt is refused only
-- then (1.0's records, with no such field, count as taken over once past
-- attempt 1, as 1.0 refused them)
-------------------------------------------------------------------------
ALTER TYPE dedup.record_state ADD ATTRIBUTE taken_over boolean;
