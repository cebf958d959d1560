/* dedup--1.0--1.1.sql: update of dedup from 1.0 to 1.1
 * Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE. */

\echo Use "ALTER EXTENSION dedup UPDATE TO '1.1'" to load this file. \quit

/*
 * Grown by each change of 1.1, in the order they were made; a fresh install
 * of 1.1 (built from the parts in sql/) must come out the same, which
 * test/scripts/upgrade.sh checks on a filled 1.0 database.
 */

-------------------------------------------------------------------------
-- Intervals (issue 21): one rule for every ttl, lease, retention and
-- delay, checked on the calendar; stored settings held to it
-------------------------------------------------------------------------
-- The rule for every interval taken as a ttl, lease, retention or delay
-- (22023 otherwise): no part negative, one part positive unless allow_zero,
-- and an end on the calendar, from the statement's start, at most 100
-- years later.  what names the argument in the error.
CREATE FUNCTION dedup.check_interval(value interval, what text, allow_zero boolean)
RETURNS void
AS 'MODULE_PATHNAME', 'dedup_check_interval_sql' LANGUAGE C VOLATILE;
REVOKE ALL ON FUNCTION dedup.check_interval(interval, text, boolean) FROM PUBLIC;

-- The part of that rule that does not depend on the time (no negative
-- part, one part positive, none over 100 years): the CHECK constraints of
-- dedup.scopes.
CREATE FUNCTION dedup.interval_is_valid(value interval) RETURNS boolean
AS 'MODULE_PATHNAME', 'dedup_interval_is_valid' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
REVOKE ALL ON FUNCTION dedup.interval_is_valid(interval) FROM PUBLIC;

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

-------------------------------------------------------------------------
-- Sequence marks: per-stream high-water marks with producer epochs
-------------------------------------------------------------------------
CREATE FUNCTION @extschema@.dedup_advance(scope text, stream text, seq bigint,
    epoch bigint DEFAULT NULL, nowait boolean DEFAULT false)
RETURNS boolean
AS 'MODULE_PATHNAME' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.dedup_advance(text, text, bigint, bigint, boolean) IS
    'advance a stream''s mark to seq in the current transaction: true when seq is beyond the mark, false for a duplicate; an older epoch is fenced';

CREATE FUNCTION @extschema@.dedup_advance_batch(scope text, streams text[], seqs bigint[],
    epochs bigint[] DEFAULT NULL, nowait boolean DEFAULT false)
RETURNS SETOF text
AS 'MODULE_PATHNAME' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.dedup_advance_batch(text, text[], bigint[], bigint[], boolean) IS
    'advance many streams of a scope in the current transaction; returns the streams that moved';

CREATE FUNCTION @extschema@.dedup_new_epoch(scope text, stream text)
RETURNS bigint
AS 'MODULE_PATHNAME' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.dedup_new_epoch(text, text) IS
    'take a new producer epoch for a stream (the old one is fenced once this commits); returns it';

CREATE FUNCTION @extschema@.dedup_position(scope text, stream text,
    OUT mark bigint, OUT epoch bigint, OUT expires_at timestamptz)
RETURNS SETOF record
AS 'MODULE_PATHNAME' LANGUAGE C STABLE;
COMMENT ON FUNCTION @extschema@.dedup_position(text, text) IS
    'a stream''s mark and epoch, without changing them; no row for a stream never advanced or expired';

CREATE FUNCTION @extschema@.dedup_streams(scope text,
    OUT stream text, OUT mark bigint, OUT epoch bigint, OUT expires_at timestamptz)
RETURNS SETOF record
AS 'MODULE_PATHNAME' LANGUAGE C STABLE;
COMMENT ON FUNCTION @extschema@.dedup_streams(text) IS
    'every live stream of a scope with its mark and epoch';
REVOKE ALL ON FUNCTION
    @extschema@.dedup_advance(text, text, bigint, bigint, boolean),
    @extschema@.dedup_advance_batch(text, text[], bigint[], bigint[], boolean),
    @extschema@.dedup_new_epoch(text, text),
    @extschema@.dedup_position(text, text),
    @extschema@.dedup_streams(text)
FROM PUBLIC;
-- Roles granted usage before are not given the stream functions here: a
-- GRANT in an extension script becomes the object's initial privilege,
-- which pg_dump leaves out, so a dump of the updated database would lose
-- it.  Run dedup_grant_usage(role) again for roles that advance streams.

-- dedup_set_scope takes and returns the sequence_mode (it is the owner's:
-- EXECUTE granted on it by hand must be granted again).  dedup_scope keeps
-- its 1.0 columns, so that application roles keep their EXECUTE on it.
DROP FUNCTION @extschema@.dedup_set_scope(text, interval, interval, interval, integer);
CREATE FUNCTION @extschema@.dedup_set_scope(
    scope text, ttl interval DEFAULT NULL, lease interval DEFAULT NULL,
    retention interval DEFAULT NULL, max_attempts integer DEFAULT NULL,
    sequence_mode text DEFAULT NULL,
    OUT scope text, OUT ttl interval, OUT lease interval, OUT retention interval,
    OUT max_attempts integer, OUT configured boolean, OUT sequence_mode text)
AS 'MODULE_PATHNAME' LANGUAGE C VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.dedup_set_scope(text, interval, interval, interval, integer, text) IS
    'set a scope''s ttl, lease, retention, outbox max_attempts and sequence_mode (strict or monotonic; NULL leaves a setting as it is); returns the effective settings';

REVOKE ALL ON FUNCTION @extschema@.dedup_set_scope(text, interval, interval, interval, integer, text) FROM PUBLIC;

-------------------------------------------------------------------------
-- Per-scope privileges (issue 20): scopes and topics are granted to roles
-- in dedup.grants and checked at a call's first use of its scope
-------------------------------------------------------------------------
-- Whether a role has a privilege ('usage' or 'relay') on a scope, from
-- dedup.grants (superusers and the extension owner's roles have every one);
-- with raise, 42501 naming the scope and the role when it has not.  The
-- relay's functions, which run as the owner, check the role that called.
CREATE FUNCTION dedup.has_privilege(role oid, scope text, privilege text, raise boolean)
RETURNS boolean
AS 'MODULE_PATHNAME', 'dedup_has_privilege' LANGUAGE C STABLE;
REVOKE ALL ON FUNCTION dedup.has_privilege(oid, text, text, boolean) FROM PUBLIC;

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

-- The relay's functions check the calling role's relay privilege: see the
-- outbox's section (issue 15), which gives them their 1.1 form.

-- The grant helpers take scopes, and have revoke twins; one list of
-- functions per privilege.
DROP FUNCTION @extschema@.dedup_grant_usage(regrole);
DROP FUNCTION @extschema@.dedup_grant_relay(regrole);
DROP FUNCTION dedup.grant_execute(regrole, regprocedure[]);
-- The functions a role of each privilege is granted EXECUTE on: the one
-- list the grant and revoke helpers read.
CREATE FUNCTION dedup.functions_of(privilege text)
RETURNS regprocedure[]
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT CASE privilege
    WHEN 'usage' THEN ARRAY[
        '@extschema@.dedup_scope(text)',
        '@extschema@.dedup_claim(text, text, interval, boolean)',
        '@extschema@.dedup_claim(text, bytea, interval, boolean)',
        '@extschema@.dedup_claim(text, uuid, interval, boolean)',
        '@extschema@.dedup_claim(text, @extschema@.dedup_fingerprint, interval, boolean)',
        '@extschema@.dedup_claim_batch(text, text[], interval, boolean)',
        '@extschema@.dedup_claim_batch(text, bytea[], interval, boolean)',
        '@extschema@.dedup_claim_batch(text, uuid[], interval, boolean)',
        '@extschema@.dedup_claim_batch(text, @extschema@.dedup_fingerprint[], interval, boolean)',
        '@extschema@.dedup_begin(text, text, jsonb, interval)',
        '@extschema@.dedup_complete(text, text, integer, jsonb, integer)',
        '@extschema@.dedup_release(text, text, integer)',
        '@extschema@.dedup_lookup(text, text)',
        '@extschema@.dedup_outbox_put(text, text, jsonb, text, text, jsonb, text)',
        '@extschema@.dedup_advance(text, text, bigint, bigint, boolean)',
        '@extschema@.dedup_advance_batch(text, text[], bigint[], bigint[], boolean)',
        '@extschema@.dedup_new_epoch(text, text)',
        '@extschema@.dedup_position(text, text)',
        '@extschema@.dedup_streams(text)'
    ]::regprocedure[]
    WHEN 'relay' THEN ARRAY[
        '@extschema@.dedup_outbox_take(text, integer)',
        '@extschema@.dedup_outbox_ack(uuid[], integer[])',
        '@extschema@.dedup_outbox_nack(uuid[], interval, text, integer[])',
        '@extschema@.dedup_outbox_stats(text)'
    ]::regprocedure[]
    END
$$;
REVOKE ALL ON FUNCTION dedup.functions_of(text) FROM PUBLIC;

-- What the four helpers share: check the scopes, then add (GRANT EXECUTE on
-- the privilege's functions and a row of dedup.grants per scope, one NULL
-- row for every scope) or remove (the rows of the scopes given; with NULL,
-- every row of the privilege and the EXECUTE grants).  The GRANT and REVOKE
-- are run on a Citus cluster's workers too (dedup.run_everywhere).
CREATE FUNCTION dedup.change_grant(role regrole, privilege text, scopes text[], adding boolean)
RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    fn regprocedure;
    s text;
BEGIN
    IF role IS NULL THEN
        RAISE EXCEPTION 'role must not be null' USING ERRCODE = '22004';
    END IF;
    IF array_ndims(scopes) > 1 THEN
        RAISE EXCEPTION 'scopes must be a one-dimensional array' USING ERRCODE = '2202E';
    END IF;
    FOREACH s IN ARRAY coalesce(scopes, '{}')
    LOOP
        IF s IS NULL THEN
            RAISE EXCEPTION 'scopes must not contain null' USING ERRCODE = '22004',
                HINT = 'Pass NULL instead of the array for every scope.';
        ELSIF s = '' THEN
            RAISE EXCEPTION 'scope must not be empty' USING ERRCODE = '22023';
        ELSIF octet_length(s) > 200 THEN
            RAISE EXCEPTION 'scope name is too long' USING ERRCODE = '22001',
                DETAIL = format('The scope name has %s bytes; the limit is 200.', octet_length(s));
        ELSIF strpos(s, '*') BETWEEN 1 AND length(s) - 1 THEN
            RAISE EXCEPTION 'scope % has a "*" before its end', quote_literal(s) USING ERRCODE = '22023',
                HINT = 'A "*" may only end a scope, which then names every scope it begins (''payments.*'').';
        END IF;
    END LOOP;
    IF adding THEN
        FOREACH fn IN ARRAY dedup.functions_of(privilege)
        LOOP
            PERFORM dedup.run_everywhere(format('GRANT EXECUTE ON FUNCTION %s TO %s', fn, role));
        END LOOP;
        -- the role by name: on a Citus cluster, where dedup.grants is a
        -- reference table, each node stores its own OID of it
        FOREACH s IN ARRAY coalesce(scopes, ARRAY[NULL::text])
        LOOP
            EXECUTE format('INSERT INTO dedup.grants AS g (role, privilege, scope)'
                           ' VALUES (%L::pg_catalog.regrole, %L, %L)'
                           ' ON CONFLICT ON CONSTRAINT grants_role_privilege_scope_key DO NOTHING',
                           role::text, privilege, s);
        END LOOP;
    ELSE
        DELETE FROM dedup.grants AS g
        WHERE g.role::oid = change_grant.role::oid AND g.privilege = change_grant.privilege
          AND (scopes IS NULL OR g.scope = ANY (scopes));
        IF scopes IS NULL THEN
            FOREACH fn IN ARRAY dedup.functions_of(privilege)
            LOOP
                PERFORM dedup.run_everywhere(format('REVOKE EXECUTE ON FUNCTION %s FROM %s', fn, role));
            END LOOP;
        END IF;
    END IF;
END
$$;
REVOKE ALL ON FUNCTION dedup.change_grant(regrole, text, text[], boolean) FROM PUBLIC;

-- What an application role needs to claim keys, use records, put outbox
-- events and read scope settings, on the scopes given (NULL: every scope).
CREATE FUNCTION @extschema@.dedup_grant_usage(role regrole, scopes text[] DEFAULT NULL)
RETURNS void
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT dedup.change_grant(role, 'usage', scopes, true)
$$;
COMMENT ON FUNCTION @extschema@.dedup_grant_usage(regrole, text[]) IS
    'let an application role claim keys, use idempotency records and put outbox events of the scopes given (NULL: every scope; ''p*'': every scope beginning with p); grants add up';
REVOKE ALL ON FUNCTION @extschema@.dedup_grant_usage(regrole, text[]) FROM PUBLIC;

CREATE FUNCTION @extschema@.dedup_revoke_usage(role regrole, scopes text[] DEFAULT NULL)
RETURNS void
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT dedup.change_grant(role, 'usage', scopes, false)
$$;
COMMENT ON FUNCTION @extschema@.dedup_revoke_usage(regrole, text[]) IS
    'take back an application role''s usage of the scopes given, as they were granted; NULL takes back every scope and the functions';
REVOKE ALL ON FUNCTION @extschema@.dedup_revoke_usage(regrole, text[]) FROM PUBLIC;

-- What a relay role needs to publish outbox events of the topics given.
CREATE FUNCTION @extschema@.dedup_grant_relay(role regrole, topics text[] DEFAULT NULL)
RETURNS void
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT dedup.change_grant(role, 'relay', topics, true)
$$;
COMMENT ON FUNCTION @extschema@.dedup_grant_relay(regrole, text[]) IS
    'let a relay role take, ack and nack outbox events of the topics given and read their figures (NULL: every topic; ''p*'': every topic beginning with p); not redrive';
REVOKE ALL ON FUNCTION @extschema@.dedup_grant_relay(regrole, text[]) FROM PUBLIC;

CREATE FUNCTION @extschema@.dedup_revoke_relay(role regrole, topics text[] DEFAULT NULL)
RETURNS void
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT dedup.change_grant(role, 'relay', topics, false)
$$;
COMMENT ON FUNCTION @extschema@.dedup_revoke_relay(regrole, text[]) IS
    'take back a relay role''s relay of the topics given, as they were granted; NULL takes back every topic and the functions';
REVOKE ALL ON FUNCTION @extschema@.dedup_revoke_relay(regrole, text[]) FROM PUBLIC;

-- Who may use or relay which scopes, as granted (members of a role have its
-- grants; superusers and the extension owner's roles need none).
CREATE VIEW @extschema@.dedup_scope_privileges AS
    SELECT g.role, g.privilege, g.scope, g.granted_at
    FROM dedup.grants AS g;
COMMENT ON VIEW @extschema@.dedup_scope_privileges IS
    'the scopes (usage) and topics (relay) granted to each role; scope NULL is every scope, ''p*'' every scope beginning with p';
REVOKE ALL ON @extschema@.dedup_scope_privileges FROM PUBLIC;


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
-- Monitoring (issue 22): per-scope call counters, for postgres_exporter
-- (monitoring/postgres_exporter.yaml); the relay's functions above count
-- the events they hand out, ack and nack through dedup.scope_count
-------------------------------------------------------------------------
-- Per-scope call counters, kept in shared memory when dedup is preloaded
-- (scopestats.c), for monitoring: one row per scope counted, of the current
-- database or of all.  dedup.scope_count is how the relay's PL/pgSQL
-- functions count the events they hand out, ack and nack.
CREATE FUNCTION @extschema@.dedup_scope_stats(all_databases boolean DEFAULT false,
    OUT datname name, OUT scope text, OUT claims bigint, OUT duplicates bigint,
    OUT records_started bigint, OUT records_replayed bigint,
    OUT records_completed bigint, OUT records_released bigint,
    OUT events_put bigint, OUT events_taken bigint, OUT events_acked bigint,
    OUT events_nacked bigint)
RETURNS SETOF record
AS 'MODULE_PATHNAME' LANGUAGE C VOLATILE STRICT;
COMMENT ON FUNCTION @extschema@.dedup_scope_stats(boolean) IS
    'calls per scope since the server started, as answered (new claims, duplicates, records started/replayed/completed/released, events put/taken/acked/nacked): of this database, or of every database with all_databases';

CREATE VIEW @extschema@.dedup_scope_stats AS
    SELECT s.datname, s.scope, s.claims, s.duplicates, s.records_started,
           s.records_replayed, s.records_completed, s.records_released,
           s.events_put, s.events_taken, s.events_acked, s.events_nacked
    FROM @extschema@.dedup_scope_stats(true) AS s;
COMMENT ON VIEW @extschema@.dedup_scope_stats IS
    'calls per database and scope since the server started (needs dedup in shared_preload_libraries)';

CREATE FUNCTION dedup.scope_count(scope text, counter text, n bigint)
RETURNS void
AS 'MODULE_PATHNAME', 'dedup_scope_count_sql' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION dedup.scope_count(text, text, bigint) IS
    'add n to a counter of a scope (a column of dedup_scope_stats); for the relay''s functions';
REVOKE ALL ON FUNCTION dedup.scope_count(text, text, bigint) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.dedup_scope_stats(boolean) FROM PUBLIC;
REVOKE ALL ON @extschema@.dedup_scope_stats FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.dedup_scope_stats(boolean) TO pg_monitor;
GRANT SELECT ON @extschema@.dedup_scope_stats TO pg_monitor;

-------------------------------------------------------------------------
-- Outbox on batches (issue 15): dedup.outbox becomes an append-only log;
-- a relay's position per topic, its batches in reused slots, and a row of
-- its own only for an event that needs one (dedup.outbox_retry)
-------------------------------------------------------------------------
-- Where each topic's relays are in the log: every event of the topic with
-- a seq below next_seq was handed out in a batch, or held back (in
-- dedup.outbox_retry).  A topic has a row from the first take that reads
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
-- last_seq but for the seqs in settled (held back, or acked or nacked one
-- by one), and the events of dedup.outbox_retry that name the batch
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
    retried     integer NOT NULL DEFAULT 0,
    events      integer NOT NULL DEFAULT 0,
    aggregates  integer[] NOT NULL DEFAULT '{}',
    part        @extschema@.dedup_fingerprint NOT NULL,
    CONSTRAINT outbox_batches_pkey PRIMARY KEY (slot)
) USING heap WITH (fillfactor = 20);
CREATE INDEX outbox_batches_topic ON dedup.outbox_batches (topic, slot);
COMMENT ON TABLE dedup.outbox_batches IS 'the slots of the outbox''s batches, reused by any topic: a busy one holds a batch of its topic handed out and not yet acked, with its events, attempt and lease';

-- Events with a state of their own (PgQ's retry queue): nacked ones,
-- waiting for their retry_delay; ones held back behind an earlier event of
-- their aggregate that was not yet published; redriven dead ones.  A copy
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
COMMENT ON TABLE dedup.outbox_retry IS 'outbox events nacked, held back behind an earlier event of their aggregate, or redriven: each with its own attempts and time';

SELECT pg_catalog.pg_extension_config_dump('dedup.outbox_topics', '');
SELECT pg_catalog.pg_extension_config_dump('dedup.outbox_batches', '');
SELECT pg_catalog.pg_extension_config_dump('dedup.outbox_retry', '');

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

-- The relay, on batches (PgQ's and Kafka's design, with per-aggregate order).
--
-- The log (dedup.outbox) is appended by puts and never updated.  A topic's
-- relays read it in seq order from the topic's position (outbox_topics),
-- and a take hands out the next events as one batch (outbox_batches): one
-- row for the batch, none per event.  Acking the batch deletes that row;
-- the events stay in the log until the cleanup deletes what every relay
-- has passed.  Only events that need a state of their own get a row in
-- outbox_retry: one nacked (until its retry_delay), one held back because
-- an earlier event of its aggregate is not yet published, one redriven.
--
-- Commit order.  A put takes its seq under a lock of its topic held until
-- it commits (outbox.c); a take reads the sequence, then waits for the
-- puts of the topic in progress (dedup.outbox_stable_seq), so every seq up
-- to what it read is settled: committed, and seen by the take's next
-- statement, or rolled back.  The position never passes an event that
-- could still commit.  Like Kafka's read_committed consumers at the last
-- stable offset, a take waits while a put of its topic is uncommitted.
--
-- Aggregates.  An event is handed out only when no earlier event of its
-- aggregate is unpublished: none in a batch not yet acked (its lease may
-- have passed: it is handed out again first), none in outbox_retry.  A
-- batch holds at most one event of an aggregate.  An event of the log that
-- must wait goes to outbox_retry, and from there out in seq order.  So a
-- failing event holds back its aggregate only, never its topic.
--
-- Leases and attempts.  A batch has one lease, from its hand-out; when it
-- passes the next take hands the same events out again (attempt + 1),
-- before anything new, under a new batch id, so that the relay that held
-- it before can no longer ack or nack it by that id.  An event handed out max_attempts times and not acked goes dead;
-- so does one nacked at its max_attempts.  Relays of one topic take one
-- after another in a partition (the relay lock of the topic there, held
-- for the take's transaction); they publish and ack in parallel.
--
-- A take needs a snapshot of its own for each statement: it refuses to run
-- in a REPEATABLE READ or SERIALIZABLE transaction (0A000).
--
-- Partitions (sql/tables/outbox.sql).  Each function below works in one
-- partition of the outbox, in_part, which the relay's public functions
-- (outbox.c) pass: the partition of a topic's log a take reads, that of a
-- batch's id (its number is in the id), those of the events of ids.
-- Every statement names it, so that on a Citus cluster each runs on the
-- partition's shards alone.  Positions, slots, batches, retries and dead
-- letters are a partition's; per-aggregate order is kept within one,
-- which holds every event of an aggregate.

-- The highest seq below which every put of topic has settled: waits for
-- the puts of the topic in progress (never for the caller's own).
CREATE FUNCTION dedup.outbox_stable_seq(in_part @extschema@.dedup_fingerprint, topic text)
RETURNS bigint
AS 'MODULE_PATHNAME', 'dedup_outbox_stable_seq' LANGUAGE C STRICT VOLATILE;
REVOKE ALL ON FUNCTION dedup.outbox_stable_seq(@extschema@.dedup_fingerprint, text) FROM PUBLIC;

-- The relay lock of a topic in a partition, held until the transaction
-- ends: the takes of a topic in a partition go one after another.
CREATE FUNCTION dedup.outbox_lock_relay(in_part @extschema@.dedup_fingerprint, topic text) RETURNS void
AS 'MODULE_PATHNAME', 'dedup_outbox_lock_relay' LANGUAGE C STRICT VOLATILE;
REVOKE ALL ON FUNCTION dedup.outbox_lock_relay(@extschema@.dedup_fingerprint, text) FROM PUBLIC;

-- The lock of a slot number in a partition, until the transaction ends, if
-- no other transaction holds it (true), or false at once: a take inserts a
-- new slot under its number's lock, so it never waits for another's insert.
CREATE FUNCTION dedup.outbox_lock_slot(in_part @extschema@.dedup_fingerprint, slot integer) RETURNS boolean
AS 'MODULE_PATHNAME', 'dedup_outbox_lock_slot' LANGUAGE C STRICT VOLATILE;
REVOKE ALL ON FUNCTION dedup.outbox_lock_slot(@extschema@.dedup_fingerprint, integer) FROM PUBLIC;

-- Move events to the dead letters: from the log (by seq) or from
-- outbox_retry (by id), with their attempts and last error.
CREATE FUNCTION dedup.outbox_bury(in_part @extschema@.dedup_fingerprint, for_topic text, log_seqs bigint[],
    log_attempts integer, retry_ids uuid[], error text)
RETURNS integer
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    n integer := 0;
    m integer;
BEGIN
    IF cardinality(log_seqs) > 0 THEN
        INSERT INTO dedup.outbox_dead (part, seq, id, topic, aggregatetype, aggregateid, type,
                                       payload, headers, created_at, attempts, last_error)
        SELECT o.part, o.seq, o.id, o.topic, o.aggregatetype, o.aggregateid, o.type,
               o.payload, o.headers, o.created_at, log_attempts, error
        FROM dedup.outbox AS o
        WHERE o.part OPERATOR(@extschema@.=) in_part AND o.topic = for_topic AND o.seq = ANY (log_seqs)
        ON CONFLICT ON CONSTRAINT outbox_dead_pkey DO NOTHING;
        GET DIAGNOSTICS n = ROW_COUNT;
    END IF;
    IF cardinality(retry_ids) > 0 THEN
        WITH gone AS (
            DELETE FROM dedup.outbox_retry AS r
            WHERE r.part OPERATOR(@extschema@.=) in_part AND r.id = ANY (retry_ids) RETURNING r.*
        )
        INSERT INTO dedup.outbox_dead (part, seq, id, topic, aggregatetype, aggregateid, type,
                                       payload, headers, created_at, attempts, last_error)
        SELECT g.part, g.seq, g.id, g.topic, g.aggregatetype, g.aggregateid, g.type,
               g.payload, g.headers, g.created_at, g.attempts, coalesce(error, g.last_error)
        FROM gone AS g
        ON CONFLICT ON CONSTRAINT outbox_dead_pkey DO NOTHING;
        GET DIAGNOSTICS m = ROW_COUNT;
        n := n + m;
    END IF;
    RETURN n;
END
$$;
REVOKE ALL ON FUNCTION dedup.outbox_bury(@extschema@.dedup_fingerprint, text, bigint[], integer, uuid[], text) FROM PUBLIC;

-- A batch's id: its partition's number times 2^47, plus its slot's number
-- times 2^31, plus the slot's generation.
CREATE FUNCTION dedup.outbox_batch_id(in_part @extschema@.dedup_fingerprint, slot integer, generation integer)
RETURNS bigint
AS 'MODULE_PATHNAME', 'dedup_outbox_batch_id' LANGUAGE C IMMUTABLE STRICT;
REVOKE ALL ON FUNCTION dedup.outbox_batch_id(@extschema@.dedup_fingerprint, integer, integer) FROM PUBLIC;

-- The busy slot of partition in_part that holds batch bid, locked, or no row.
-- (These two are PL/pgSQL, not SQL: Citus plans no statement of a SQL
-- function that has parameters.)
CREATE FUNCTION dedup.outbox_batch(in_part @extschema@.dedup_fingerprint, bid bigint)
RETURNS SETOF dedup.outbox_batches
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN QUERY
    SELECT * FROM dedup.outbox_batches AS x
    WHERE x.part OPERATOR(@extschema@.=) in_part
      AND x.slot = bid / 2147483648 % 65536 AND x.generation = bid % 2147483648
      AND dedup.outbox_batch_id(x.part, x.slot, x.generation) = bid AND x.busy
    FOR UPDATE;
END
$$;
REVOKE ALL ON FUNCTION dedup.outbox_batch(@extschema@.dedup_fingerprint, bigint) FROM PUBLIC;

-- The topic of batch bid, busy in partition in_part, if caller may relay
-- it; NULL if no batch of that id is handed out, or if the caller may not
-- relay its topic: the two are answered alike (a batch id is small and
-- easily guessed; a relay learns no topic it may not see), before anything
-- is written or locked.
CREATE FUNCTION dedup.outbox_batch_topic(caller oid, in_part @extschema@.dedup_fingerprint, bid bigint)
RETURNS text
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    t text;
BEGIN
    SELECT x.topic INTO t FROM dedup.outbox_batches AS x
    WHERE x.part OPERATOR(@extschema@.=) in_part
      AND x.slot = bid / 2147483648 % 65536 AND x.generation = bid % 2147483648
      AND dedup.outbox_batch_id(x.part, x.slot, x.generation) = bid AND x.busy;
    IF NOT FOUND OR NOT dedup.has_privilege(caller, t, 'relay', false) THEN
        RETURN NULL;
    END IF;
    RETURN t;
END
$$;
REVOKE ALL ON FUNCTION dedup.outbox_batch_topic(oid, @extschema@.dedup_fingerprint, bigint) FROM PUBLIC;

-- The events of a batch, in order: from the log and from outbox_retry.
-- The batch's columns are passed one by one (a row of a Citus shard has
-- a type of its own).  Called on its own, not inside a statement that
-- reads a table of the outbox: on a Citus cluster such a statement runs on
-- a shard, where no other statement on a distributed table may run.
CREATE FUNCTION dedup.outbox_members(in_part @extschema@.dedup_fingerprint, topic text, first_seq bigint,
    last_seq bigint, settled bigint[], attempt integer, retried integer, bid bigint)
RETURNS TABLE (seq bigint, id uuid, aggregatetype text, aggregateid text, type text,
               payload jsonb, headers jsonb, attempts integer, created_at timestamptz,
               in_retry boolean)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN QUERY
    SELECT e.* FROM (
        SELECT o.seq, o.id, o.aggregatetype, o.aggregateid, o.type, o.payload, o.headers,
               outbox_members.attempt, o.created_at, false
        FROM dedup.outbox AS o
        WHERE outbox_members.first_seq IS NOT NULL
          AND o.part OPERATOR(@extschema@.=) outbox_members.in_part
          AND o.topic = outbox_members.topic
          AND o.seq BETWEEN outbox_members.first_seq AND outbox_members.last_seq
          AND o.seq <> ALL (outbox_members.settled)
        UNION ALL
        SELECT r.seq, r.id, r.aggregatetype, r.aggregateid, r.type, r.payload, r.headers,
               r.attempts, r.created_at, true
        FROM dedup.outbox_retry AS r
        WHERE outbox_members.retried > 0
          AND r.part OPERATOR(@extschema@.=) outbox_members.in_part
          AND r.batch = outbox_members.bid
    ) AS e
    ORDER BY e.seq;
END
$$;
REVOKE ALL ON FUNCTION dedup.outbox_members(@extschema@.dedup_fingerprint, text, bigint, bigint, bigint[], integer,
    integer, bigint) FROM PUBLIC;

-- After events left a batch: its count, aggregates and retried recounted;
-- a batch left with none frees its slot.
CREATE FUNCTION dedup.outbox_batch_recount(in_part @extschema@.dedup_fingerprint, slot_of integer)
RETURNS dedup.outbox_batches
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    b dedup.outbox_batches;
    n integer;
    r integer;
    a integer[];
BEGIN
    SELECT * INTO b FROM dedup.outbox_batches AS x
    WHERE x.part OPERATOR(@extschema@.=) in_part AND x.slot = slot_of;
    SELECT count(*), count(*) FILTER (WHERE m.in_retry),
           coalesce(array_agg(pg_catalog.hashtext(m.aggregateid)), '{}')
    INTO n, r, a
    FROM dedup.outbox_members(b.part, b.topic, b.first_seq, b.last_seq, b.settled,
                              b.attempt, b.retried,
                              dedup.outbox_batch_id(b.part, b.slot, b.generation)) AS m;
    UPDATE dedup.outbox_batches AS x
    SET events = n, retried = r, aggregates = a, busy = n > 0
    WHERE x.part OPERATOR(@extschema@.=) in_part AND x.slot = slot_of
    RETURNING x.* INTO b;
    RETURN b;
END
$$;
REVOKE ALL ON FUNCTION dedup.outbox_batch_recount(@extschema@.dedup_fingerprint, integer) FROM PUBLIC;

CREATE FUNCTION dedup.outbox_take_batch(caller oid, in_part @extschema@.dedup_fingerprint, topic text,
    batch_size integer)
RETURNS TABLE (batch_id bigint, id uuid, aggregatetype text, aggregateid text, type text,
               payload jsonb, headers jsonb, attempts integer, created_at timestamptz,
               lease_expires_at timestamptz)
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    lease interval;
    max_attempts integer;
    pos bigint;
    b dedup.outbox_batches;
    k integer;
    bid bigint;
    blocked integer[];
    has_retry boolean;
    has_log boolean;
    positioned boolean;
    r_ids uuid[] := '{}';
    r_aggs integer[] := '{}';
    dying uuid[];
    stable bigint;
    lease_end timestamptz;
    n bigint;
BEGIN
    IF topic IS NULL OR batch_size IS NULL THEN
        RAISE EXCEPTION 'topic and batch_size must not be null' USING ERRCODE = '22004';
    END IF;
    IF batch_size < 1 OR batch_size > 10000 THEN
        RAISE EXCEPTION 'batch_size must be between 1 and 10000' USING ERRCODE = '22023';
    END IF;
    PERFORM dedup.has_privilege(caller, topic, 'relay', true);
    SELECT s.lease, s.max_attempts INTO lease, max_attempts
    FROM @extschema@.dedup_scope(topic) AS s;

    -- the topic's relays take one at a time (its relay lock, until the
    -- transaction ends); each statement after sees what the take before did
    PERFORM dedup.outbox_lock_relay(in_part, topic);
    SELECT t.next_seq INTO pos FROM dedup.outbox_topics AS t
    WHERE t.part OPERATOR(@extschema@.=) in_part AND t.topic = outbox_take_batch.topic;
    -- a topic gets its position once a take reads its log (below)
    positioned := FOUND;
    IF NOT positioned THEN
        pos := 0;
    END IF;
    -- a lease runs from the hand-out, after any wait (set again below after
    -- waiting for the topic's puts)
    lease_end := pg_catalog.clock_timestamp() + lease;

    -- a batch whose lease passed goes out again first, whole, but for the
    -- events handed out max_attempts times, which go dead
    FOR b IN SELECT * FROM dedup.outbox_batches AS x
             WHERE x.part OPERATOR(@extschema@.=) in_part AND x.topic = outbox_take_batch.topic
               AND x.busy AND x.lease_until <= pg_catalog.statement_timestamp()
             ORDER BY x.lease_until
    LOOP
        SELECT * INTO b
        FROM dedup.outbox_batch(in_part, dedup.outbox_batch_id(in_part, b.slot, b.generation)) AS x
        WHERE x.lease_until <= pg_catalog.statement_timestamp();
        CONTINUE WHEN NOT FOUND;
        bid := dedup.outbox_batch_id(in_part, b.slot, b.generation);
        dying := ARRAY(SELECT r.id FROM dedup.outbox_retry AS r
                       WHERE b.retried > 0 AND r.part OPERATOR(@extschema@.=) in_part AND r.batch = bid
                         AND r.attempts >= max_attempts);
        IF b.attempt >= max_attempts THEN
            PERFORM dedup.outbox_bury(in_part, b.topic,
                ARRAY(SELECT m.seq
                      FROM dedup.outbox_members(in_part, b.topic, b.first_seq, b.last_seq,
                                                b.settled, b.attempt, b.retried, bid) AS m
                      WHERE NOT m.in_retry),
                b.attempt, dying, NULL);
            UPDATE dedup.outbox_batches AS x SET first_seq = NULL, last_seq = NULL
            WHERE x.part OPERATOR(@extschema@.=) in_part AND x.slot = b.slot;
        ELSE
            PERFORM dedup.outbox_bury(in_part, b.topic, '{}', 0, dying, NULL);
        END IF;
        -- under a new id: the relay that held it before acks or nacks it no more
        UPDATE dedup.outbox_retry AS r SET attempts = r.attempts + 1,
               batch = dedup.outbox_batch_id(in_part, b.slot, b.generation % 2147483647 + 1)
        WHERE b.retried > 0 AND r.part OPERATOR(@extschema@.=) in_part AND r.batch = bid;
        UPDATE dedup.outbox_batches AS x
        SET attempt = x.attempt + 1, lease_until = lease_end,
            generation = b.generation % 2147483647 + 1
        WHERE x.part OPERATOR(@extschema@.=) in_part AND x.slot = b.slot;
        b := dedup.outbox_batch_recount(in_part, b.slot);
        CONTINUE WHEN NOT b.busy;
        bid := dedup.outbox_batch_id(in_part, b.slot, b.generation);
        RETURN QUERY SELECT bid, m.id, m.aggregatetype, m.aggregateid, m.type, m.payload,
                            m.headers, m.attempts, m.created_at, lease_end
                     FROM dedup.outbox_members(in_part, b.topic, b.first_seq, b.last_seq,
                                               b.settled, b.attempt, b.retried, bid) AS m;
        GET DIAGNOSTICS n = ROW_COUNT;
        PERFORM dedup.scope_count(topic, 'events_taken', n);
        RETURN;
    END LOOP;

    -- nothing to hand out (no event of the topic in outbox_retry, none in
    -- the log past its position): nothing is written, no position, no slot
    has_retry := (SELECT r.seq FROM dedup.outbox_retry AS r
                  WHERE r.part OPERATOR(@extschema@.=) in_part AND r.topic = outbox_take_batch.topic
                  ORDER BY r.seq LIMIT 1) IS NOT NULL;
    has_log := (SELECT o.seq FROM dedup.outbox AS o
                WHERE o.part OPERATOR(@extschema@.=) in_part AND o.topic = outbox_take_batch.topic
                  AND o.seq >= pos
                ORDER BY o.seq LIMIT 1) IS NOT NULL;
    IF NOT has_retry AND NOT has_log THEN
        RETURN;
    END IF;

    -- a new batch, in a free slot (locked: it stays free until the batch
    -- is written in it; one another take has locked is passed, never
    -- waited for): the topic's own first, else any of the partition's,
    -- whatever topic it served (its generation goes on: no id handed out
    -- before names the new batch), else a new one: the first number past
    -- the partition's last slot that no other take is inserting (each
    -- inserts under its number's lock) and none inserted meanwhile.  So
    -- a partition has no more slots than batches handed out at once.
    SELECT * INTO b FROM dedup.outbox_batches AS x
    WHERE x.part OPERATOR(@extschema@.=) in_part AND x.topic = outbox_take_batch.topic AND NOT x.busy
    ORDER BY x.slot LIMIT 1
    FOR UPDATE SKIP LOCKED;
    IF NOT FOUND THEN
        SELECT * INTO b FROM dedup.outbox_batches AS x
        WHERE x.part OPERATOR(@extschema@.=) in_part AND NOT x.busy
        ORDER BY x.slot LIMIT 1
        FOR UPDATE SKIP LOCKED;
    END IF;
    IF NOT FOUND THEN
        k := (SELECT coalesce(max(y.slot), 0) + 1 FROM dedup.outbox_batches AS y
              WHERE y.part OPERATOR(@extschema@.=) in_part);
        LOOP
            IF k >= 65536 THEN
                RAISE EXCEPTION 'an outbox partition has no room for another batch'
                    USING ERRCODE = '54000',
                          DETAIL = '65535 batches of its topics are handed out and not acked.',
                          HINT = 'Ack or nack batches before taking more.';
            END IF;
            IF dedup.outbox_lock_slot(in_part, k) THEN
                INSERT INTO dedup.outbox_batches AS x (part, slot, topic)
                VALUES (in_part, k, outbox_take_batch.topic)
                ON CONFLICT DO NOTHING
                RETURNING x.* INTO b;
                EXIT WHEN FOUND;
            END IF;
            k := k + 1;
        END LOOP;
    END IF;
    bid := dedup.outbox_batch_id(in_part, b.slot, b.generation % 2147483647 + 1);
    blocked := ARRAY(SELECT DISTINCT a FROM dedup.outbox_batches AS x, unnest(x.aggregates) AS a
                     WHERE x.part OPERATOR(@extschema@.=) in_part AND x.topic = outbox_take_batch.topic AND x.busy);

    -- first events of outbox_retry that are due, each the earliest of its
    -- aggregate, of an aggregate no batch holds
    -- (has_retry and has_log above are scalar subqueries with ORDER BY and
    -- LIMIT, not EXISTS, which the planner strips of them: a generic plan
    -- would read the whole table)
    IF has_retry THEN
        dying := ARRAY(
            SELECT r.id FROM dedup.outbox_retry AS r
            WHERE r.part OPERATOR(@extschema@.=) in_part AND r.topic = outbox_take_batch.topic AND r.batch IS NULL
              AND r.visible_at <= pg_catalog.statement_timestamp()
              AND r.attempts >= max_attempts);
        PERFORM dedup.outbox_bury(in_part, topic, '{}', 0, dying, NULL);
        WITH due AS (
            SELECT r.id AS rid
            FROM dedup.outbox_retry AS r
            WHERE r.part OPERATOR(@extschema@.=) in_part AND r.topic = outbox_take_batch.topic AND r.batch IS NULL
              AND r.visible_at <= pg_catalog.statement_timestamp()
              AND pg_catalog.hashtext(r.aggregateid) <> ALL (blocked)
              AND NOT EXISTS (SELECT FROM dedup.outbox_retry AS e
                              WHERE e.part OPERATOR(@extschema@.=) in_part AND e.topic = r.topic
                                AND e.aggregateid = r.aggregateid AND e.seq < r.seq)
            ORDER BY r.seq
            LIMIT batch_size
            FOR UPDATE OF r SKIP LOCKED
        ), taken AS (
            UPDATE dedup.outbox_retry AS r SET batch = bid, attempts = r.attempts + 1
            FROM due WHERE r.part OPERATOR(@extschema@.=) in_part AND r.id = due.rid
            RETURNING r.id, r.seq, r.aggregateid
        )
        SELECT coalesce(array_agg(t.id ORDER BY t.seq), '{}'),
               coalesce(array_agg(pg_catalog.hashtext(t.aggregateid) ORDER BY t.seq), '{}')
        INTO r_ids, r_aggs
        FROM taken AS t;
    END IF;

    -- then the log from the topic's position up to where every put settled;
    -- an event of an aggregate that is held, or the second of one in this
    -- batch, goes to outbox_retry to wait its turn
    IF cardinality(r_ids) < batch_size AND has_log THEN
        IF NOT positioned THEN
            INSERT INTO dedup.outbox_topics (part, topic) VALUES (in_part, outbox_take_batch.topic);
        END IF;
        stable := dedup.outbox_stable_seq(in_part, topic);
        lease_end := pg_catalog.clock_timestamp() + lease;
        RETURN QUERY
        WITH scanned AS (
            SELECT o.*, pg_catalog.hashtext(o.aggregateid) AS h
            FROM dedup.outbox AS o
            WHERE o.part OPERATOR(@extschema@.=) in_part AND o.topic = outbox_take_batch.topic
              AND o.seq >= pos AND o.seq <= stable
            ORDER BY o.seq
            LIMIT batch_size - cardinality(r_ids)
        ), judged AS (
            SELECT s.*,
                   (s.h = ANY (blocked) OR s.h = ANY (r_aggs)
                    OR pg_catalog.row_number() OVER (PARTITION BY s.aggregateid ORDER BY s.seq) > 1
                    OR (has_retry AND EXISTS (SELECT FROM dedup.outbox_retry AS r
                                              WHERE r.part OPERATOR(@extschema@.=) in_part AND r.topic = s.topic
                                                AND r.aggregateid = s.aggregateid))) AS held
            FROM scanned AS s
        ), held_back AS (
            INSERT INTO dedup.outbox_retry (part, seq, id, topic, aggregatetype, aggregateid, type,
                                            payload, headers, created_at)
            SELECT j.part, j.seq, j.id, j.topic, j.aggregatetype, j.aggregateid, j.type,
                   j.payload, j.headers, j.created_at
            FROM judged AS j WHERE j.held
            ON CONFLICT ON CONSTRAINT outbox_retry_pkey DO NOTHING
        ), moved AS (
            UPDATE dedup.outbox_topics AS t
            SET next_seq = (SELECT CASE WHEN count(*) = batch_size - cardinality(r_ids)
                                        THEN max(s.seq) + 1
                                        ELSE greatest(pos, stable + 1) END
                            FROM scanned AS s)
            WHERE t.part OPERATOR(@extschema@.=) in_part AND t.topic = outbox_take_batch.topic
        ), made AS (
            UPDATE dedup.outbox_batches AS x
            SET topic = outbox_take_batch.topic,
                generation = b.generation % 2147483647 + 1, busy = true, attempt = 1,
                lease_until = lease_end, first_seq = c.lo, last_seq = c.hi, settled = c.held,
                retried = cardinality(r_ids), events = cardinality(r_ids) + c.n,
                aggregates = r_aggs || c.aggs
            FROM (SELECT min(j.seq) AS lo, max(j.seq) AS hi,
                         coalesce(array_agg(j.seq) FILTER (WHERE j.held), '{}') AS held,
                         count(*) FILTER (WHERE NOT j.held) AS n,
                         coalesce(array_agg(j.h) FILTER (WHERE NOT j.held), '{}') AS aggs
                  FROM judged AS j) AS c
            WHERE x.part OPERATOR(@extschema@.=) in_part AND x.slot = b.slot AND c.n + cardinality(r_ids) > 0
        )
        SELECT e.batch_id, e.id, e.aggregatetype, e.aggregateid, e.type, e.payload, e.headers,
               e.attempts, e.created_at, e.lease_expires_at
        FROM (
            SELECT bid, j.id, j.aggregatetype, j.aggregateid, j.type, j.payload, j.headers,
                   1, j.created_at, lease_end, j.seq
            FROM judged AS j WHERE NOT j.held
            UNION ALL
            SELECT bid, r.id, r.aggregatetype, r.aggregateid, r.type, r.payload, r.headers,
                   r.attempts, r.created_at, lease_end, r.seq
            FROM dedup.outbox_retry AS r WHERE r.part OPERATOR(@extschema@.=) in_part AND r.id = ANY (r_ids)
        ) AS e(batch_id, id, aggregatetype, aggregateid, type, payload, headers, attempts,
               created_at, lease_expires_at, seq)
        ORDER BY e.seq;
        GET DIAGNOSTICS n = ROW_COUNT;
    ELSIF cardinality(r_ids) > 0 THEN
        UPDATE dedup.outbox_batches AS x
        SET topic = outbox_take_batch.topic,
            generation = b.generation % 2147483647 + 1, busy = true, attempt = 1,
            lease_until = lease_end, first_seq = NULL, last_seq = NULL, settled = '{}',
            retried = cardinality(r_ids), events = cardinality(r_ids), aggregates = r_aggs
        WHERE x.part OPERATOR(@extschema@.=) in_part AND x.slot = b.slot;
        RETURN QUERY
        SELECT bid, r.id, r.aggregatetype, r.aggregateid, r.type, r.payload, r.headers,
               r.attempts, r.created_at, lease_end
        FROM dedup.outbox_retry AS r WHERE r.part OPERATOR(@extschema@.=) in_part AND r.id = ANY (r_ids)
        ORDER BY r.seq;
        GET DIAGNOSTICS n = ROW_COUNT;
    ELSE
        n := 0;
    END IF;
    PERFORM dedup.scope_count(topic, 'events_taken', n);
END
$$;

-- The 1.0 shape of take: the same batch, without its id.
CREATE FUNCTION dedup.outbox_take(caller oid, in_part @extschema@.dedup_fingerprint, topic text, batch_size integer)
RETURNS TABLE (id uuid, aggregatetype text, aggregateid text, type text, payload jsonb,
               headers jsonb, attempts integer, created_at timestamptz,
               lease_expires_at timestamptz)
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT t.id, t.aggregatetype, t.aggregateid, t.type, t.payload, t.headers, t.attempts,
           t.created_at, t.lease_expires_at
    FROM dedup.outbox_take_batch(caller, in_part, topic, batch_size) AS t
$$;

-- Settle events of one batch: those of done (NULL: all but the failed)
-- were published and never come back; those of failed were not, and come
-- back after retry_delay, or go dead at max_attempts; the batch keeps the
-- others.  With given_ids, an event acts only if named there, at the
-- attempt given_attempts names (NULL: any), as the 1.0 ack and nack do.
-- Returns what was acked, what nacked, and the batch's topic (NULL when
-- no batch of that id is handed out, or the caller may not relay its
-- topic: nothing is done then, and nothing named).
CREATE FUNCTION dedup.outbox_settle(caller oid, in_part @extschema@.dedup_fingerprint, bid bigint, done uuid[],
    failed uuid[], given_ids uuid[], given_attempts integer[], retry_delay interval, error text,
    OUT acked uuid[], OUT nacked uuid[], OUT topic text)
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    b dedup.outbox_batches;
    max_attempts integer;
    visible timestamptz;
    m_id uuid[];
    m_seq bigint[];
    m_attempt integer[];
    m_retried boolean[];
    m_verdict "char"[];
BEGIN
    acked := '{}';
    nacked := '{}';
    topic := dedup.outbox_batch_topic(caller, in_part, bid);
    IF topic IS NULL THEN
        RETURN;
    END IF;
    SELECT * INTO b FROM dedup.outbox_batch(in_part, bid);
    IF NOT FOUND OR b.topic <> topic THEN
        topic := NULL;
        RETURN;
    END IF;
    SELECT s.max_attempts INTO max_attempts FROM @extschema@.dedup_scope(b.topic) AS s;
    visible := pg_catalog.statement_timestamp() + retry_delay;
    -- the batch's events, and the verdict on each: 'a' acked, 'f' failed,
    -- 'k' kept in the batch
    SELECT array_agg(m.id ORDER BY m.seq), array_agg(m.seq ORDER BY m.seq),
           array_agg(m.attempts ORDER BY m.seq), array_agg(m.in_retry ORDER BY m.seq),
           array_agg(CASE
               WHEN given_ids IS NOT NULL
                    AND NOT EXISTS (SELECT FROM unnest(given_ids, given_attempts) AS g(gi, ga)
                                    WHERE g.gi = m.id AND (g.ga IS NULL OR g.ga = m.attempts)) THEN 'k'
               WHEN m.id = ANY (failed) THEN 'f'
               WHEN done IS NULL OR m.id = ANY (done) THEN 'a'
               ELSE 'k' END::"char" ORDER BY m.seq)
    INTO m_id, m_seq, m_attempt, m_retried, m_verdict
    FROM dedup.outbox_members(in_part, b.topic, b.first_seq, b.last_seq, b.settled, b.attempt,
                              b.retried, bid) AS m;
    acked := ARRAY(SELECT u.i FROM unnest(m_id, m_verdict) AS u(i, v) WHERE u.v = 'a');
    nacked := ARRAY(SELECT u.i FROM unnest(m_id, m_verdict) AS u(i, v) WHERE u.v = 'f');
    IF cardinality(acked) = 0 AND cardinality(nacked) = 0 THEN
        RETURN;
    END IF;
    -- published events of outbox_retry leave it
    IF b.retried > 0 THEN
        DELETE FROM dedup.outbox_retry AS r
        USING unnest(m_id, m_retried, m_verdict) AS u(i, rt, v)
        WHERE u.rt AND u.v = 'a' AND r.part OPERATOR(@extschema@.=) in_part AND r.id = u.i;
    END IF;
    IF cardinality(nacked) > 0 THEN
        -- failed events: dead at max_attempts, or back after retry_delay
        PERFORM dedup.outbox_bury(in_part, b.topic,
            ARRAY(SELECT u.s FROM unnest(m_seq, m_attempt, m_retried, m_verdict) AS u(s, t, rt, v)
                  WHERE u.v = 'f' AND NOT u.rt AND u.t >= max_attempts),
            b.attempt,
            ARRAY(SELECT u.i FROM unnest(m_id, m_attempt, m_retried, m_verdict) AS u(i, t, rt, v)
                  WHERE u.v = 'f' AND u.rt AND u.t >= max_attempts),
            error);
        UPDATE dedup.outbox_retry AS r
        SET batch = NULL, visible_at = visible, last_error = coalesce(error, r.last_error)
        FROM unnest(m_id, m_attempt, m_retried, m_verdict) AS u(i, t, rt, v)
        WHERE u.v = 'f' AND u.rt AND u.t < max_attempts AND r.part OPERATOR(@extschema@.=) in_part AND r.id = u.i;
        INSERT INTO dedup.outbox_retry (part, seq, id, topic, aggregatetype, aggregateid, type,
                                        payload, headers, created_at, attempts, visible_at,
                                        last_error)
        SELECT o.part, o.seq, o.id, o.topic, o.aggregatetype, o.aggregateid, o.type, o.payload,
               o.headers, o.created_at, u.t, visible, error
        FROM unnest(m_seq, m_attempt, m_retried, m_verdict) AS u(s, t, rt, v)
        JOIN dedup.outbox AS o ON o.part OPERATOR(@extschema@.=) in_part AND o.topic = b.topic AND o.seq = u.s
        WHERE u.v = 'f' AND NOT u.rt AND u.t < max_attempts
        ON CONFLICT ON CONSTRAINT outbox_retry_pkey DO NOTHING;
    END IF;
    -- events of the log that left the batch are settled in it
    UPDATE dedup.outbox_batches AS x
    SET settled = x.settled || ARRAY(SELECT u.s FROM unnest(m_seq, m_retried, m_verdict) AS u(s, rt, v)
                                     WHERE u.v <> 'k' AND NOT u.rt)
    WHERE x.part OPERATOR(@extschema@.=) in_part AND x.slot = b.slot;
    PERFORM dedup.outbox_batch_recount(in_part, b.slot);
END
$$;
REVOKE ALL ON FUNCTION dedup.outbox_settle(oid, @extschema@.dedup_fingerprint, bigint, uuid[], uuid[], uuid[], integer[],
    interval, text) FROM PUBLIC;

-- The batch was published: every event of it but those of failed, which
-- come back after retry_delay (or go dead at max_attempts).  A batch acked
-- whole frees its slot: one update.
CREATE FUNCTION dedup.outbox_ack_batch(caller oid, in_part @extschema@.dedup_fingerprint, batch_id bigint,
    failed uuid[], retry_delay interval, error text)
RETURNS integer
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    t text;
    n integer;
    s record;
BEGIN
    IF batch_id IS NULL THEN
        RAISE EXCEPTION 'batch_id must not be null' USING ERRCODE = '22004';
    END IF;
    IF failed IS NOT NULL AND array_position(failed, NULL) IS NOT NULL THEN
        RAISE EXCEPTION 'failed must not hold a null' USING ERRCODE = '22004';
    END IF;
    PERFORM dedup.check_interval(retry_delay, 'retry_delay', true);
    IF coalesce(cardinality(failed), 0) = 0 THEN
        -- (the privilege checked first: Citus runs no STABLE function of a
        -- column in an UPDATE); a batch of a topic the caller may not relay
        -- is answered as one not handed out
        SELECT x.topic INTO t FROM dedup.outbox_batches AS x
        WHERE x.part OPERATOR(@extschema@.=) in_part
          AND x.slot = batch_id / 2147483648 % 65536 AND x.generation = batch_id % 2147483648
          AND dedup.outbox_batch_id(x.part, x.slot, x.generation) = batch_id
          AND x.busy AND x.retried = 0;
        IF FOUND AND NOT dedup.has_privilege(caller, t, 'relay', false) THEN
            RETURN 0;
        END IF;
        UPDATE dedup.outbox_batches AS x SET busy = false
        WHERE x.part OPERATOR(@extschema@.=) in_part
          AND x.slot = batch_id / 2147483648 % 65536 AND x.generation = batch_id % 2147483648
          AND dedup.outbox_batch_id(x.part, x.slot, x.generation) = batch_id
          AND x.busy AND x.retried = 0 AND x.topic = t
        RETURNING x.topic, x.events INTO t, n;
        IF FOUND THEN
            PERFORM dedup.scope_count(t, 'events_acked', n);
            RETURN n;
        END IF;
    END IF;
    s := dedup.outbox_settle(caller, in_part, batch_id, NULL, coalesce(failed, '{}'), NULL, NULL,
                             retry_delay, error);
    IF s.topic IS NOT NULL THEN
        PERFORM dedup.scope_count(s.topic, 'events_acked', cardinality(s.acked));
        PERFORM dedup.scope_count(s.topic, 'events_nacked', cardinality(s.nacked));
    END IF;
    RETURN coalesce(cardinality(s.acked), 0);
END
$$;

-- The batch could not be published: all of it back after retry_delay, or
-- dead at max_attempts.
CREATE FUNCTION dedup.outbox_nack_batch(caller oid, in_part @extschema@.dedup_fingerprint, batch_id bigint,
    retry_delay interval, error text)
RETURNS integer
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    s record;
BEGIN
    IF batch_id IS NULL THEN
        RAISE EXCEPTION 'batch_id must not be null' USING ERRCODE = '22004';
    END IF;
    PERFORM dedup.check_interval(retry_delay, 'retry_delay', true);
    -- a batch of a topic the caller may not relay: as one not handed out
    -- (before its row is locked, below)
    IF dedup.outbox_batch_topic(caller, in_part, batch_id) IS NULL THEN
        RETURN 0;
    END IF;
    s := dedup.outbox_settle(caller, in_part, batch_id, '{}',
                             ARRAY(SELECT m.id FROM dedup.outbox_batch(in_part, batch_id) AS b,
                                   dedup.outbox_members(in_part, b.topic, b.first_seq, b.last_seq,
                                                        b.settled, b.attempt, b.retried,
                                                        batch_id) AS m),
                             NULL, NULL, retry_delay, error);
    IF s.topic IS NOT NULL THEN
        PERFORM dedup.scope_count(s.topic, 'events_nacked', cardinality(s.nacked));
    END IF;
    RETURN coalesce(cardinality(s.nacked), 0);
END
$$;

-- The (id, attempt) pairs an ack or nack names; attempts, when given,
-- must match ids one for one.
CREATE OR REPLACE FUNCTION dedup.outbox_given(ids uuid[], attempts integer[])
RETURNS TABLE (id uuid, attempt integer)
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF ids IS NULL OR array_position(ids, NULL) IS NOT NULL THEN
        RAISE EXCEPTION 'ids must not be null' USING ERRCODE = '22004';
    END IF;
    IF attempts IS NOT NULL AND (cardinality(attempts) <> cardinality(ids)
                                 OR array_position(attempts, NULL) IS NOT NULL) THEN
        RAISE EXCEPTION 'attempts must give one attempt number per id' USING ERRCODE = '22023';
    END IF;
    RETURN QUERY SELECT g.i, g.a FROM unnest(ids, attempts) AS g(i, a);
END
$$;
REVOKE ALL ON FUNCTION dedup.outbox_given(uuid[], integer[]) FROM PUBLIC;

-- (1.0's took no partition.)
DROP FUNCTION dedup.outbox_check_ids(uuid[], uuid[]);

-- The ids of a relay's ack or nack that it did not act on must be events
-- it could have been handed: one never handed out (in the log past its
-- topic's position, or waiting in outbox_retry with no attempt) is 55000,
-- one unknown 42704.  Any other (acked before, dead, back in the queue, or
-- taken again under another attempt) was acted on by someone else: fine.
CREATE FUNCTION dedup.outbox_check_ids(in_part @extschema@.dedup_fingerprint, ids uuid[], done uuid[])
RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    bad uuid;
BEGIN
    SELECT i INTO bad FROM unnest(ids) AS i
    WHERE i <> ALL (done)
      AND (EXISTS (SELECT FROM dedup.outbox_retry AS r
                   WHERE r.part OPERATOR(@extschema@.=) in_part AND r.id = i AND r.attempts = 0 AND r.batch IS NULL)
           OR EXISTS (SELECT FROM dedup.outbox AS o
                      LEFT JOIN dedup.outbox_topics AS t
                             ON t.part OPERATOR(@extschema@.=) o.part AND t.topic = o.topic
                      WHERE o.part OPERATOR(@extschema@.=) in_part AND o.id = i AND o.seq >= coalesce(t.next_seq, 0)))
    LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'outbox event % is not taken', bad USING ERRCODE = '55000',
            HINT = 'Only an event handed out by dedup_outbox_take() can be acked or nacked.';
    END IF;
    SELECT i INTO bad FROM unnest(ids) AS i
    WHERE i <> ALL (done)
      AND NOT EXISTS (SELECT FROM dedup.outbox AS o WHERE o.part OPERATOR(@extschema@.=) in_part AND o.id = i)
      AND NOT EXISTS (SELECT FROM dedup.outbox_retry AS r WHERE r.part OPERATOR(@extschema@.=) in_part AND r.id = i)
      AND NOT EXISTS (SELECT FROM dedup.outbox_dead AS d WHERE d.part OPERATOR(@extschema@.=) in_part AND d.id = i)
      AND NOT EXISTS (SELECT FROM dedup.outbox_keys AS k
                      WHERE k.key OPERATOR(@extschema@.=)
                            pg_catalog.replace(i::text, '-', '')::@extschema@.dedup_fingerprint)
    LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'outbox event % does not exist', bad USING ERRCODE = '42704';
    END IF;
END
$$;
REVOKE ALL ON FUNCTION dedup.outbox_check_ids(@extschema@.dedup_fingerprint, uuid[], uuid[]) FROM PUBLIC;

-- The ids of the busy batches of a partition that hold any of ids, in slot
-- order.
CREATE FUNCTION dedup.outbox_batches_of(in_part @extschema@.dedup_fingerprint, ids uuid[])
RETURNS bigint[]
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    b dedup.outbox_batches;
    bid bigint;
    named bigint[] := '{}';
BEGIN
    FOR b IN SELECT * FROM dedup.outbox_batches AS x
             WHERE x.part OPERATOR(@extschema@.=) in_part AND x.busy ORDER BY x.slot LOOP
        bid := dedup.outbox_batch_id(b.part, b.slot, b.generation);
        IF EXISTS (SELECT FROM dedup.outbox_members(b.part, b.topic, b.first_seq, b.last_seq,
                                                    b.settled, b.attempt, b.retried, bid) AS m
                   WHERE m.id = ANY (ids)) THEN
            named := named || bid;
        END IF;
    END LOOP;
    RETURN named;
END
$$;
REVOKE ALL ON FUNCTION dedup.outbox_batches_of(@extschema@.dedup_fingerprint, uuid[]) FROM PUBLIC;

-- Settle the events named by id, batch by batch: the 1.0 shape of ack and
-- nack.  With nack false, the events were published (an event of the dead
-- letters too: it leaves them); with nack true they come back after
-- retry_delay or go dead.  With attempts (as take returned them), an event
-- taken again since is left to the relay that holds it now.
CREATE FUNCTION dedup.outbox_settle_ids(caller oid, in_part @extschema@.dedup_fingerprint, ids uuid[],
    attempts integer[], nack boolean, retry_delay interval, error text)
RETURNS integer
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    given_ids uuid[];
    given_attempts integer[];
    done uuid[] := '{}';
    dead_ids uuid[];
    dead_topics text[];
    named bigint[];
    bid bigint;
    s record;
    missed boolean;
BEGIN
    SELECT coalesce(array_agg(g.id), '{}'), array_agg(g.attempt)
    INTO given_ids, given_attempts FROM dedup.outbox_given(ids, attempts) AS g;
    -- the batches the ids are in
    named := dedup.outbox_batches_of(in_part, given_ids);
    -- refused before anything is done: every topic the ids are events of
    PERFORM dedup.has_privilege(caller, x.topic, 'relay', true)
    FROM (SELECT b.topic FROM dedup.outbox_batches AS b
          WHERE b.part OPERATOR(@extschema@.=) in_part
            AND dedup.outbox_batch_id(b.part, b.slot, b.generation) = ANY (named)
          UNION
          SELECT r.topic FROM dedup.outbox_retry AS r
          WHERE r.part OPERATOR(@extschema@.=) in_part AND r.id = ANY (given_ids)
          UNION
          SELECT d.topic FROM dedup.outbox_dead AS d
          WHERE d.part OPERATOR(@extschema@.=) in_part AND d.id = ANY (given_ids)) AS x;
    -- a batch handed out again (under a new id) while this call waited for
    -- it is looked up again, by the ids not yet settled
    FOR round IN 1..3 LOOP
        missed := false;
        FOREACH bid IN ARRAY named
        LOOP
            IF nack THEN
                s := dedup.outbox_settle(caller, in_part, bid, '{}', given_ids, given_ids,
                                         given_attempts, retry_delay, error);
                done := done || s.nacked;
                PERFORM dedup.scope_count(s.topic, 'events_nacked', cardinality(s.nacked));
            ELSE
                s := dedup.outbox_settle(caller, in_part, bid, given_ids, '{}', given_ids,
                                         given_attempts, retry_delay, error);
                done := done || s.acked;
                PERFORM dedup.scope_count(s.topic, 'events_acked', cardinality(s.acked));
            END IF;
            missed := missed OR s.topic IS NULL;
        END LOOP;
        EXIT WHEN NOT missed;
        named := dedup.outbox_batches_of(in_part,
                                         ARRAY(SELECT i FROM unnest(given_ids) AS i
                                               WHERE i <> ALL (done)));
    END LOOP;
    IF NOT nack THEN
        -- an event dead-lettered while its relay was still publishing
        WITH gone AS (
            DELETE FROM dedup.outbox_dead AS d
            USING unnest(given_ids, given_attempts) AS g(i, a)
            WHERE d.part OPERATOR(@extschema@.=) in_part AND d.id = g.i AND d.id <> ALL (done)
              AND (g.a IS NULL OR d.attempts = g.a)
            RETURNING d.id, d.topic
        )
        SELECT coalesce(array_agg(g.id), '{}'), coalesce(array_agg(g.topic), '{}')
        INTO dead_ids, dead_topics FROM gone AS g;
        done := done || dead_ids;
        PERFORM dedup.scope_count(x.topic, 'events_acked', count(*))
        FROM unnest(dead_topics) AS x(topic) GROUP BY x.topic;
    END IF;
    IF cardinality(done) < cardinality(given_ids) THEN
        PERFORM dedup.outbox_check_ids(in_part, given_ids, done);
    END IF;
    RETURN cardinality(done);
END
$$;
REVOKE ALL ON FUNCTION dedup.outbox_settle_ids(oid, @extschema@.dedup_fingerprint, uuid[], integer[], boolean, interval,
    text) FROM PUBLIC;

CREATE FUNCTION dedup.outbox_ack(caller oid, in_part @extschema@.dedup_fingerprint, ids uuid[], attempts integer[])
RETURNS integer
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT dedup.outbox_settle_ids(caller, in_part, ids, attempts, false, interval '0', NULL)
$$;

CREATE FUNCTION dedup.outbox_nack(caller oid, in_part @extschema@.dedup_fingerprint, ids uuid[],
    retry_delay interval, error text, attempts integer[])
RETURNS integer
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM dedup.check_interval(retry_delay, 'retry_delay', true);
    RETURN dedup.outbox_settle_ids(caller, in_part, ids, attempts, true, retry_delay, error);
END
$$;

-- Dead events back: into outbox_retry, with no attempts, in their place
-- (dedup_outbox_redrive notifies the topic's relays when any moved).
CREATE FUNCTION dedup.outbox_redrive(caller oid, in_part @extschema@.dedup_fingerprint, topic text, ids uuid[])
RETURNS integer
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    n integer;
BEGIN
    IF topic IS NULL THEN
        RAISE EXCEPTION 'topic must not be null' USING ERRCODE = '22004';
    END IF;
    PERFORM dedup.has_privilege(caller, topic, 'relay', true);
    WITH revived AS (
        DELETE FROM dedup.outbox_dead AS d
        WHERE d.part OPERATOR(@extschema@.=) in_part AND d.topic = outbox_redrive.topic
          AND (ids IS NULL OR d.id = ANY (ids))
        RETURNING d.*
    )
    INSERT INTO dedup.outbox_retry (part, seq, id, topic, aggregatetype, aggregateid, type,
                                    payload, headers, created_at, last_error)
    SELECT r.part, r.seq, r.id, r.topic, r.aggregatetype, r.aggregateid, r.type, r.payload,
           r.headers, r.created_at, r.last_error
    FROM revived AS r
    ON CONFLICT ON CONSTRAINT outbox_retry_pkey DO NOTHING;
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END
$$;

-- Per topic: events not yet handed out or whose lease passed (pending),
-- handed out under a lease (in flight), dead, and the age of the oldest
-- not yet published; of partition in_part, or of every one (NULL).
CREATE FUNCTION dedup.outbox_stats(caller oid, in_part @extschema@.dedup_fingerprint, for_topic text)
RETURNS TABLE (topic text, pending bigint, in_flight bigint, dead bigint,
               oldest_pending_age interval)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF for_topic IS NOT NULL THEN
        PERFORM dedup.has_privilege(caller, for_topic, 'relay', true);
    END IF;
    RETURN QUERY
    SELECT e.topic,
           count(*) FILTER (WHERE e.state = 'p'),
           count(*) FILTER (WHERE e.state = 'f'),
           count(*) FILTER (WHERE e.state = 'd'),
           pg_catalog.now() - min(e.created_at) FILTER (WHERE e.state <> 'd')
    FROM (
        -- the log past each topic's position
        SELECT o.topic, o.created_at, 'p'::"char" AS state
        FROM dedup.outbox AS o
        LEFT JOIN dedup.outbox_topics AS t ON t.part OPERATOR(@extschema@.=) o.part AND t.topic = o.topic
        WHERE (in_part IS NULL OR o.part OPERATOR(@extschema@.=) in_part)
          AND (for_topic IS NULL OR o.topic = for_topic) AND o.seq >= coalesce(t.next_seq, 0)
        UNION ALL
        -- events of batches, from the log and from outbox_retry (as
        -- dedup.outbox_members() finds them, here joined)
        SELECT b.topic, o.created_at,
               CASE WHEN b.lease_until > pg_catalog.now() THEN 'f' ELSE 'p' END::"char"
        FROM dedup.outbox_batches AS b
        JOIN dedup.outbox AS o
          ON o.part OPERATOR(@extschema@.=) b.part AND o.topic = b.topic
         AND o.seq BETWEEN b.first_seq AND b.last_seq AND o.seq <> ALL (b.settled)
        WHERE (in_part IS NULL OR b.part OPERATOR(@extschema@.=) in_part)
          AND b.busy AND (for_topic IS NULL OR b.topic = for_topic)
        UNION ALL
        SELECT b.topic, r.created_at,
               CASE WHEN b.lease_until > pg_catalog.now() THEN 'f' ELSE 'p' END::"char"
        FROM dedup.outbox_batches AS b
        JOIN dedup.outbox_retry AS r
          ON r.part OPERATOR(@extschema@.=) b.part
         AND r.batch = dedup.outbox_batch_id(b.part, b.slot, b.generation)
        WHERE (in_part IS NULL OR b.part OPERATOR(@extschema@.=) in_part)
          AND b.busy AND b.retried > 0 AND (for_topic IS NULL OR b.topic = for_topic)
        UNION ALL
        -- events of outbox_retry not handed out
        SELECT r.topic, r.created_at, 'p'::"char"
        FROM dedup.outbox_retry AS r
        WHERE (in_part IS NULL OR r.part OPERATOR(@extschema@.=) in_part)
          AND r.batch IS NULL AND (for_topic IS NULL OR r.topic = for_topic)
        UNION ALL
        SELECT d.topic, d.created_at, 'd'::"char"
        FROM dedup.outbox_dead AS d
        WHERE (in_part IS NULL OR d.part OPERATOR(@extschema@.=) in_part)
          AND (for_topic IS NULL OR d.topic = for_topic)
    ) AS e
    WHERE for_topic IS NOT NULL OR dedup.has_privilege(caller, e.topic, 'relay', false)
    GROUP BY e.topic
    ORDER BY e.topic;
END
$$;

-- Published events leave the log once their topic's retention passed (an
-- event's row is its key: within retention a put of its key finds it):
-- up to batch_size events of partition in_part, of each topic before both
-- its position and the first event of its batches.  Run by the cleanup as
-- the owner of the outbox; returns how many went.
CREATE FUNCTION dedup.outbox_trim(in_part @extschema@.dedup_fingerprint, batch_size integer)
RETURNS bigint
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    t record;
    n bigint := 0;
    m bigint;
BEGIN
    FOR t IN SELECT x.topic,
                    least(x.next_seq, (SELECT min(b.first_seq) FROM dedup.outbox_batches AS b
                                       WHERE b.part OPERATOR(@extschema@.=) in_part AND b.topic = x.topic
                                         AND b.busy)) AS upto,
                    pg_catalog.statement_timestamp()
                    - (SELECT s.retention FROM @extschema@.dedup_scope(x.topic) AS s) AS cutoff
             FROM dedup.outbox_topics AS x WHERE x.part OPERATOR(@extschema@.=) in_part ORDER BY x.topic LOOP
        EXIT WHEN n >= batch_size;
        -- the oldest events first: created_at grows with seq, so a first
        -- one kept means the rest are kept too
        DELETE FROM dedup.outbox AS o
        WHERE o.part OPERATOR(@extschema@.=) in_part AND o.ctid = ANY (ARRAY(
            SELECT y.ctid
            FROM (SELECT x.ctid, x.created_at FROM dedup.outbox AS x
                  WHERE x.part OPERATOR(@extschema@.=) in_part AND x.topic = t.topic AND x.seq < t.upto
                  ORDER BY x.seq LIMIT batch_size - n) AS y
            WHERE y.created_at < t.cutoff));
        GET DIAGNOSTICS m = ROW_COUNT;
        n := n + m;
    END LOOP;
    RETURN n;
END
$$;
REVOKE ALL ON FUNCTION dedup.outbox_trim(@extschema@.dedup_fingerprint, integer) FROM PUBLIC;

REVOKE ALL ON FUNCTION
    dedup.outbox_take_batch(oid, @extschema@.dedup_fingerprint, text, integer),
    dedup.outbox_take(oid, @extschema@.dedup_fingerprint, text, integer),
    dedup.outbox_ack_batch(oid, @extschema@.dedup_fingerprint, bigint, uuid[], interval, text),
    dedup.outbox_nack_batch(oid, @extschema@.dedup_fingerprint, bigint, interval, text),
    dedup.outbox_ack(oid, @extschema@.dedup_fingerprint, uuid[], integer[]),
    dedup.outbox_nack(oid, @extschema@.dedup_fingerprint, uuid[], interval, text, integer[]),
    dedup.outbox_redrive(oid, @extschema@.dedup_fingerprint, text, uuid[]),
    dedup.outbox_stats(oid, @extschema@.dedup_fingerprint, text)
FROM PUBLIC;

-- The relay's public functions.  Each runs the function of the same name in
-- schema dedup (above) as the owner of the outbox, passing the role that
-- called it, which must have the relay privilege on every topic the call
-- touches (42501 otherwise, before anything is written), and the partition
-- it works in: dedup_outbox_relay in C switches to the owner as PostgreSQL
-- does for SECURITY DEFINER, but keeps the caller's identity for the
-- check.  A batch id names no topic: an ack or nack of a batch of a topic
-- the caller may not relay answers as for a batch not handed out (0),
-- naming nothing and writing nothing.
CREATE FUNCTION @extschema@.dedup_outbox_take_batch(topic text, batch_size integer DEFAULT 100)
RETURNS TABLE (batch_id bigint, id uuid, aggregatetype text, aggregateid text, type text,
               payload jsonb, headers jsonb, attempts integer, created_at timestamptz,
               lease_expires_at timestamptz)
AS 'MODULE_PATHNAME', 'dedup_outbox_relay' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.dedup_outbox_take_batch(text, integer) IS
    'hand out a batch of up to batch_size events of a topic under one lease (the topic''s lease); ack it with dedup_outbox_ack_batch(batch_id); a batch not acked comes back whole after its lease';

CREATE FUNCTION @extschema@.dedup_outbox_ack_batch(batch_id bigint, failed uuid[] DEFAULT NULL,
    retry_delay interval DEFAULT '0', error text DEFAULT NULL)
RETURNS integer
AS 'MODULE_PATHNAME', 'dedup_outbox_relay' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.dedup_outbox_ack_batch(bigint, uuid[], interval, text) IS
    'the batch was published but for the events in failed, which come back after retry_delay (or go dead at the topic''s max_attempts); returns how many were acked (0 for a batch acked before)';

CREATE FUNCTION @extschema@.dedup_outbox_nack_batch(batch_id bigint,
    retry_delay interval DEFAULT '0', error text DEFAULT NULL)
RETURNS integer
AS 'MODULE_PATHNAME', 'dedup_outbox_relay' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.dedup_outbox_nack_batch(bigint, interval, text) IS
    'no event of the batch was published: all come back after retry_delay, or go dead at the topic''s max_attempts';

CREATE OR REPLACE FUNCTION @extschema@.dedup_outbox_take(topic text, batch_size integer DEFAULT 100)
RETURNS TABLE (id uuid, aggregatetype text, aggregateid text, type text, payload jsonb,
               headers jsonb, attempts integer, created_at timestamptz,
               lease_expires_at timestamptz)
AS 'MODULE_PATHNAME', 'dedup_outbox_relay' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.dedup_outbox_take(text, integer) IS
    'hand out up to batch_size events of a topic with a lease (the topic''s lease); an event not acked comes back after it';

CREATE OR REPLACE FUNCTION @extschema@.dedup_outbox_ack(ids uuid[], attempts integer[] DEFAULT NULL)
RETURNS integer
AS 'MODULE_PATHNAME', 'dedup_outbox_relay' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.dedup_outbox_ack(uuid[], integer[]) IS
    'the events were published: they never come back; returns how many were acked now (ids acked before, or taken again since their attempt, count 0)';

CREATE OR REPLACE FUNCTION @extschema@.dedup_outbox_nack(ids uuid[],
    retry_delay interval DEFAULT '0', error text DEFAULT NULL, attempts integer[] DEFAULT NULL)
RETURNS integer
AS 'MODULE_PATHNAME', 'dedup_outbox_relay' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.dedup_outbox_nack(uuid[], interval, text, integer[]) IS
    'the events could not be published: they come back after retry_delay, or go to dead after the topic''s max_attempts';

CREATE OR REPLACE FUNCTION @extschema@.dedup_outbox_redrive(topic text, ids uuid[] DEFAULT NULL)
RETURNS integer
AS 'MODULE_PATHNAME', 'dedup_outbox_relay' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.dedup_outbox_redrive(text, uuid[]) IS
    'put dead events of a topic (all, or those of ids) back in the outbox, in their original order, with no attempts';

CREATE OR REPLACE FUNCTION @extschema@.dedup_outbox_stats(topic text DEFAULT NULL,
    OUT topic text, OUT pending bigint, OUT in_flight bigint, OUT dead bigint,
    OUT oldest_pending_age interval)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'dedup_outbox_relay' LANGUAGE C STABLE;
COMMENT ON FUNCTION @extschema@.dedup_outbox_stats(text) IS
    'per topic: events pending (including leases that passed), in flight, dead, and the age of the oldest not yet published';

-- The relay's batch functions are for relay roles, not for PUBLIC, and
-- join the privilege's list.  Roles granted relay before get them by
-- running dedup_grant_relay(role) again (as for the stream functions above).
REVOKE ALL ON FUNCTION
    @extschema@.dedup_outbox_take_batch(text, integer),
    @extschema@.dedup_outbox_ack_batch(bigint, uuid[], interval, text),
    @extschema@.dedup_outbox_nack_batch(bigint, interval, text)
FROM PUBLIC;
-- The functions a role of each privilege is granted EXECUTE on: the one
-- list the grant and revoke helpers read.
CREATE OR REPLACE FUNCTION dedup.functions_of(privilege text)
RETURNS regprocedure[]
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT CASE privilege
    WHEN 'usage' THEN ARRAY[
        '@extschema@.dedup_scope(text)',
        '@extschema@.dedup_claim(text, text, interval, boolean)',
        '@extschema@.dedup_claim(text, bytea, interval, boolean)',
        '@extschema@.dedup_claim(text, uuid, interval, boolean)',
        '@extschema@.dedup_claim(text, @extschema@.dedup_fingerprint, interval, boolean)',
        '@extschema@.dedup_claim_batch(text, text[], interval, boolean)',
        '@extschema@.dedup_claim_batch(text, bytea[], interval, boolean)',
        '@extschema@.dedup_claim_batch(text, uuid[], interval, boolean)',
        '@extschema@.dedup_claim_batch(text, @extschema@.dedup_fingerprint[], interval, boolean)',
        '@extschema@.dedup_begin(text, text, jsonb, interval)',
        '@extschema@.dedup_complete(text, text, integer, jsonb, integer)',
        '@extschema@.dedup_release(text, text, integer)',
        '@extschema@.dedup_lookup(text, text)',
        '@extschema@.dedup_seen(text, text)',
        '@extschema@.dedup_seen(text, bytea)',
        '@extschema@.dedup_seen(text, uuid)',
        '@extschema@.dedup_seen(text, @extschema@.dedup_fingerprint)',
        '@extschema@.dedup_history(text)',
        '@extschema@.dedup_outbox_put(text, text, jsonb, text, text, jsonb, text)',
        '@extschema@.dedup_advance(text, text, bigint, bigint, boolean)',
        '@extschema@.dedup_advance_batch(text, text[], bigint[], bigint[], boolean)',
        '@extschema@.dedup_new_epoch(text, text)',
        '@extschema@.dedup_position(text, text)',
        '@extschema@.dedup_streams(text)'
    ]::regprocedure[]
    WHEN 'relay' THEN ARRAY[
        '@extschema@.dedup_outbox_take(text, integer)',
        '@extschema@.dedup_outbox_take_batch(text, integer)',
        '@extschema@.dedup_outbox_ack_batch(bigint, uuid[], interval, text)',
        '@extschema@.dedup_outbox_nack_batch(bigint, interval, text)',
        '@extschema@.dedup_outbox_ack(uuid[], integer[])',
        '@extschema@.dedup_outbox_nack(uuid[], interval, text, integer[])',
        '@extschema@.dedup_outbox_stats(text)'
    ]::regprocedure[]
    END
$$;
REVOKE ALL ON FUNCTION dedup.functions_of(text) FROM PUBLIC;

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

-- dedup_set_scope takes and returns the history and its false_positive_rate
-- (it is the owner's: EXECUTE granted on it by hand must be granted again).
DROP FUNCTION @extschema@.dedup_set_scope(text, interval, interval, interval, integer, text);
CREATE FUNCTION @extschema@.dedup_set_scope(
    scope text, ttl interval DEFAULT NULL, lease interval DEFAULT NULL,
    retention interval DEFAULT NULL, max_attempts integer DEFAULT NULL,
    sequence_mode text DEFAULT NULL, history interval DEFAULT NULL,
    false_positive_rate double precision DEFAULT NULL,
    OUT scope text, OUT ttl interval, OUT lease interval, OUT retention interval,
    OUT max_attempts integer, OUT configured boolean, OUT sequence_mode text,
    OUT history interval, OUT false_positive_rate double precision)
AS 'MODULE_PATHNAME' LANGUAGE C VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.dedup_set_scope(text, interval, interval, interval, integer, text, interval, double precision) IS
    'set a scope''s ttl, lease, retention, outbox max_attempts, sequence_mode (strict or monotonic) and history (a window, 0 for none, and its false_positive_rate); NULL leaves a setting as it is; returns the effective settings';
REVOKE ALL ON FUNCTION @extschema@.dedup_set_scope(text, interval, interval, interval, integer, text, interval, double precision) FROM PUBLIC;

CREATE FUNCTION @extschema@.dedup_seen(scope text, key text)
RETURNS text
AS 'MODULE_PATHNAME', 'dedup_seen_varlena' LANGUAGE C STABLE;
CREATE FUNCTION @extschema@.dedup_seen(scope text, key bytea)
RETURNS text
AS 'MODULE_PATHNAME', 'dedup_seen_varlena' LANGUAGE C STABLE;
CREATE FUNCTION @extschema@.dedup_seen(scope text, key uuid)
RETURNS text
AS 'MODULE_PATHNAME', 'dedup_seen_fixed' LANGUAGE C STABLE;
CREATE FUNCTION @extschema@.dedup_seen(scope text, key @extschema@.dedup_fingerprint)
RETURNS text
AS 'MODULE_PATHNAME', 'dedup_seen_fixed' LANGUAGE C STABLE;
COMMENT ON FUNCTION @extschema@.dedup_seen(text, text) IS
    'why dedup_claim would answer as it would now: exact (a live claim), history (an expired claim within the scope''s history window, or the history''s filter holds the key, maybe falsely), or absent';
COMMENT ON FUNCTION @extschema@.dedup_seen(text, bytea) IS
    'dedup_seen for a bytea key';
COMMENT ON FUNCTION @extschema@.dedup_seen(text, uuid) IS
    'dedup_seen for a uuid key';
COMMENT ON FUNCTION @extschema@.dedup_seen(text, @extschema@.dedup_fingerprint) IS
    'dedup_seen for a key given as its fingerprint';

CREATE FUNCTION @extschema@.dedup_history(scope text,
    OUT generation bigint, OUT opened_at timestamptz, OUT slice_end timestamptz,
    OUT expires_at timestamptz, OUT false_positive_rate double precision,
    OUT k integer, OUT capacity bigint, OUT keys bigint, OUT bytes bigint)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'dedup_history' LANGUAGE C STABLE STRICT;
COMMENT ON FUNCTION @extschema@.dedup_history(text) IS
    'the generations of a scope''s history: when each opened, until when it takes folds, when it goes, its rate of false positives when full, its bit positions a key, the keys it was sized for and holds, and its bytes';

-- For roles granted usage, not for PUBLIC; they join the privilege's list
-- (dedup.functions_of, above): run dedup_grant_usage(role) again.
REVOKE ALL ON FUNCTION
    @extschema@.dedup_seen(text, text),
    @extschema@.dedup_seen(text, bytea),
    @extschema@.dedup_seen(text, uuid),
    @extschema@.dedup_seen(text, @extschema@.dedup_fingerprint),
    @extschema@.dedup_history(text)
FROM PUBLIC;

-------------------------------------------------------------------------
-- Distributed PostgreSQL (issue 18): dedup_key() for co-locating business
-- tables, dedup_distribute(), and the call forwarded to a key's shard
-------------------------------------------------------------------------
-- The fingerprint a key is stored under in a scope (dedup.claims.key): a
-- business table distributed by a column of it, co-located with
-- dedup.claims, has each row on the node of its key's claim.
CREATE FUNCTION @extschema@.dedup_key(scope text, key text)
RETURNS @extschema@.dedup_fingerprint
AS 'MODULE_PATHNAME', 'dedup_key_varlena' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION @extschema@.dedup_key(scope text, key bytea)
RETURNS @extschema@.dedup_fingerprint
AS 'MODULE_PATHNAME', 'dedup_key_varlena' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION @extschema@.dedup_key(scope text, key uuid)
RETURNS @extschema@.dedup_fingerprint
AS 'MODULE_PATHNAME', 'dedup_key_fixed' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION @extschema@.dedup_key(scope text, key @extschema@.dedup_fingerprint)
RETURNS @extschema@.dedup_fingerprint
AS 'MODULE_PATHNAME', 'dedup_key_fixed' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.dedup_key(text, text) IS
    'the fingerprint a key is stored under in a scope: distribute a business table by it, co-located with dedup.claims, to keep a claim and its business row on one node';
-- and a stream's, for a table co-located with dedup.streams
CREATE FUNCTION @extschema@.dedup_stream_key(scope text, stream text)
RETURNS @extschema@.dedup_fingerprint
AS 'MODULE_PATHNAME', 'dedup_stream_key_sql' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.dedup_stream_key(text, text) IS
    'the fingerprint a stream''s mark is stored under in a scope (dedup.streams.key)';

-- A call forwarded to the node of its key's shard (cluster.c).  Citus
-- delegates it there by its first argument once dedup_distribute() has
-- distributed it.  Left executable by PUBLIC on purpose: it runs only
-- dedup's own functions, as the role that called, whose EXECUTE privilege
-- and scope grants are checked there as for any call; it grants nothing.
-- In the extension's schema, as the calls it carries are.
CREATE FUNCTION @extschema@.dedup_call_on_shard(key @extschema@.dedup_fingerprint, function text, args text[])
RETURNS SETOF text[]
AS 'MODULE_PATHNAME', 'dedup_call_on_shard' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.dedup_call_on_shard(@extschema@.dedup_fingerprint, text, text[]) IS
    'run a call of one of dedup''s functions on this node, the one of its key''s shard; for dedup''s routing only';

-- Run a statement on this node and, on a Citus cluster whose dedup is
-- distributed, on every worker too: the GRANT and REVOKE of the grant
-- helpers, which Citus does not propagate for an extension's functions.
-- The workers' part runs on connections of its own, committed whatever
-- this transaction does: a grant rolled back here leaves EXECUTE on the
-- workers, which gives no scope (dedup.grants, a reference table, does).
CREATE FUNCTION dedup.run_everywhere(command text)
RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    distributed boolean := false;
    failed text;
BEGIN
    EXECUTE command;
    IF to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL THEN
        EXECUTE 'SELECT EXISTS (SELECT FROM pg_catalog.pg_dist_partition'
                ' WHERE logicalrelid = ''dedup.claims''::pg_catalog.regclass)' INTO distributed;
    END IF;
    IF distributed THEN
        EXECUTE 'SELECT string_agg(format(''%s:%s: %s'', nodename, nodeport, result), ''; '')'
                ' FROM run_command_on_workers($1) WHERE NOT success' INTO failed USING command;
        IF failed IS NOT NULL THEN
            RAISE EXCEPTION 'could not run "%" on every worker of the Citus cluster', command
                USING ERRCODE = '08006', DETAIL = failed;
        END IF;
    END IF;
END
$$;
REVOKE ALL ON FUNCTION dedup.run_everywhere(text) FROM PUBLIC;

-- The outbox's partitions on a cluster (cluster.c): that of an aggregate's
-- events, and all of them, one a shard of dedup.claims.
CREATE FUNCTION dedup.outbox_partition_of(topic text, aggregate_id text)
RETURNS @extschema@.dedup_fingerprint
AS 'MODULE_PATHNAME', 'dedup_outbox_partition_of' LANGUAGE C STRICT STABLE;
REVOKE ALL ON FUNCTION dedup.outbox_partition_of(text, text) FROM PUBLIC;
CREATE FUNCTION dedup.outbox_partitions()
RETURNS SETOF @extschema@.dedup_fingerprint
AS 'MODULE_PATHNAME', 'dedup_outbox_partitions' LANGUAGE C STRICT STABLE;
REVOKE ALL ON FUNCTION dedup.outbox_partitions() FROM PUBLIC;

-- Distribute dedup's tables on a Citus cluster, from its coordinator:
-- claims and records (dedup.claims) and sequence marks (dedup.streams) by
-- their key, co-located; the outbox's tables by partition (part), one a
-- shard of dedup.claims, co-located with it; scopes and grants as
-- reference tables; the forwarded call by its key.  The time buckets of
-- dedup.claims are merged into it first (the latest row of each key),
-- since Citus distributes no table with inheritance children; the
-- outbox's events move to their aggregate's partition, each partition
-- starting at its topic's position (so no batch may be handed out, and no
-- key of 1.0 kept).  The histories stay on the coordinator.  Once, by the
-- extension's owner.
CREATE FUNCTION @extschema@.dedup_distribute(shard_count integer DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    b record;
    g record;
    n integer;
BEGIN
    IF NOT EXISTS (SELECT FROM pg_extension WHERE extname = 'citus') THEN
        RAISE EXCEPTION 'Citus is not installed in this database'
            USING ERRCODE = '55000',
                  HINT = 'Run CREATE EXTENSION citus first, and add the worker nodes.';
    END IF;
    IF (SELECT groupid FROM pg_dist_local_group) <> 0 THEN
        RAISE EXCEPTION 'dedup_distribute() runs on the coordinator of a Citus cluster'
            USING ERRCODE = '55000';
    END IF;
    IF EXISTS (SELECT FROM pg_dist_partition WHERE logicalrelid = 'dedup.claims'::regclass) THEN
        RAISE EXCEPTION 'dedup''s tables are distributed already'
            USING ERRCODE = '55000';
    END IF;
    IF shard_count IS NOT NULL AND (shard_count < 1 OR shard_count > 64000) THEN
        RAISE EXCEPTION 'shard_count must be between 1 and 64000'
            USING ERRCODE = '22023';
    END IF;
    IF EXISTS (SELECT FROM dedup.scopes WHERE history_id IS NOT NULL) THEN
        RAISE EXCEPTION 'a scope with a history does not run on a Citus cluster'
            USING ERRCODE = '0A000',
                  DETAIL = 'A history is folded from the time buckets of dedup.claims, which a distributed dedup.claims does not have.',
                  HINT = 'Take the histories away first: dedup_set_scope(scope, history => ''0'').';
    END IF;

    -- no call reads or writes claims or the outbox while they move
    LOCK TABLE dedup.buckets, dedup.claims, dedup.outbox, dedup.outbox_topics,
               dedup.outbox_batches, dedup.outbox_retry, dedup.outbox_dead, dedup.outbox_keys
        IN ACCESS EXCLUSIVE MODE;
    IF EXISTS (SELECT FROM dedup.outbox_batches WHERE busy) THEN
        RAISE EXCEPTION 'the outbox has batches handed out'
            USING ERRCODE = '55000',
                  DETAIL = 'The events of a batch move to the partitions of their aggregates on the cluster.',
                  HINT = 'Ack or nack them (dedup_outbox_ack_batch, dedup_outbox_nack_batch, or dedup_outbox_ack and dedup_outbox_nack by id), then distribute.';
    END IF;
    IF EXISTS (SELECT FROM dedup.outbox_keys WHERE expires_at > pg_catalog.statement_timestamp()) THEN
        RAISE EXCEPTION 'keys of outbox events put by dedup 1.0 are kept'
            USING ERRCODE = '55000',
                  DETAIL = 'A cluster keeps the key of an event in its partition only.',
                  HINT = 'Distribute once their topics'' retention passed (the cleanup deletes them).';
    END IF;
    DELETE FROM dedup.outbox_keys;
    CREATE TEMP TABLE dedup_merged ON COMMIT DROP AS
        SELECT * FROM ONLY dedup.claims WITH NO DATA;
    ALTER TABLE dedup_merged ADD COLUMN bucket integer;
    FOR b IN SELECT bucket, relid FROM dedup.buckets WHERE bucket <> 0 LOOP
        EXECUTE format('INSERT INTO dedup_merged SELECT *, %s FROM %s', b.bucket, b.relid);
    END LOOP;
    -- a key's latest row is in its newest bucket; bucket 0 is dedup.claims itself
    DELETE FROM ONLY dedup.claims c USING dedup_merged m WHERE c.key OPERATOR(@extschema@.=) m.key;
    INSERT INTO dedup.claims
        SELECT DISTINCT ON (key) key, expires_at, record, history FROM dedup_merged
        ORDER BY key, bucket DESC;
    FOR b IN SELECT bucket, relid FROM dedup.buckets WHERE bucket <> 0 LOOP
        EXECUTE format('DROP TABLE %s', b.relid);
    END LOOP;
    DELETE FROM dedup.buckets;

    n := coalesce(shard_count, current_setting('citus.shard_count')::integer);
    -- the triggers that tell each node's backends the scopes changed go
    -- onto the shards of the reference tables, where the rows are written
    PERFORM set_config('citus.enable_unsafe_triggers', 'on', true);
    PERFORM create_reference_table('dedup.scopes');
    -- the grants by role name, as change_grant writes them, so that each node
    -- stores its own OID of each role (Citus copies a table's rows as they are)
    CREATE TEMP TABLE dedup_grants_by_name ON COMMIT DROP AS
        SELECT role::text AS role_name, privilege, scope, granted_at FROM dedup.grants;
    DELETE FROM dedup.grants;
    PERFORM create_reference_table('dedup.grants');
    FOR g IN SELECT * FROM dedup_grants_by_name LOOP
        EXECUTE format('INSERT INTO dedup.grants (role, privilege, scope, granted_at)'
                       ' VALUES (%L::pg_catalog.regrole, %L, %L, %L)',
                       g.role_name, g.privilege, g.scope, g.granted_at);
    END LOOP;
    PERFORM create_distributed_table('dedup.claims', 'key', shard_count => n);
    PERFORM create_distributed_table('dedup.streams', 'key', colocate_with => 'dedup.claims');
    -- the outbox: each event to the partition of its aggregate, each
    -- partition of a topic from the topic's position (every event of it
    -- before that was handed out, or is held in dedup.outbox_retry)
    CREATE TEMP TABLE dedup_positions ON COMMIT DROP AS
        SELECT topic, max(next_seq) AS next_seq FROM dedup.outbox_topics GROUP BY topic;
    DELETE FROM dedup.outbox_topics;
    -- the slots stay where they are, in partition 0 (one server's), with
    -- their generations: the id of a batch handed out before never names
    -- one handed out after
    UPDATE dedup.outbox SET part = dedup.outbox_partition_of(topic, aggregateid);
    UPDATE dedup.outbox_retry SET part = dedup.outbox_partition_of(topic, aggregateid);
    UPDATE dedup.outbox_dead SET part = dedup.outbox_partition_of(topic, aggregateid);
    -- the partition first in the keys (one server's have one partition),
    -- as Citus wants its distribution column in them
    ALTER TABLE dedup.outbox
        DROP CONSTRAINT outbox_pkey, ADD CONSTRAINT outbox_pkey PRIMARY KEY (part, id);
    DROP INDEX dedup.outbox_topic_seq;
    CREATE UNIQUE INDEX outbox_topic_seq ON dedup.outbox (part, topic, seq);
    ALTER TABLE dedup.outbox_topics
        DROP CONSTRAINT outbox_topics_pkey, ADD CONSTRAINT outbox_topics_pkey PRIMARY KEY (part, topic);
    ALTER TABLE dedup.outbox_batches
        DROP CONSTRAINT outbox_batches_pkey, ADD CONSTRAINT outbox_batches_pkey PRIMARY KEY (part, slot);
    ALTER TABLE dedup.outbox_retry
        DROP CONSTRAINT outbox_retry_pkey, ADD CONSTRAINT outbox_retry_pkey PRIMARY KEY (part, id);
    ALTER TABLE dedup.outbox_dead
        DROP CONSTRAINT outbox_dead_pkey, ADD CONSTRAINT outbox_dead_pkey PRIMARY KEY (part, id);
    INSERT INTO dedup.outbox_topics (part, topic, next_seq)
        SELECT p.part, x.topic, x.next_seq
        FROM dedup_positions AS x, dedup.outbox_partitions() AS p(part);
    PERFORM create_distributed_table('dedup.outbox', 'part', colocate_with => 'dedup.claims');
    PERFORM create_distributed_table('dedup.outbox_topics', 'part', colocate_with => 'dedup.claims');
    PERFORM create_distributed_table('dedup.outbox_batches', 'part', colocate_with => 'dedup.claims');
    PERFORM create_distributed_table('dedup.outbox_retry', 'part', colocate_with => 'dedup.claims');
    PERFORM create_distributed_table('dedup.outbox_dead', 'part', colocate_with => 'dedup.claims');
    PERFORM create_distributed_function(
        '@extschema@.dedup_call_on_shard(@extschema@.dedup_fingerprint, text, text[])', '$1',
        colocate_with => 'dedup.claims', force_delegation => true);
    -- the roles granted before: their EXECUTE on the workers too (the rows
    -- are there already, so change_grant only grants)
    FOR g IN SELECT role_name, privilege,
                    array_agg(scope) FILTER (WHERE scope IS NOT NULL) AS scopes,
                    bool_or(scope IS NULL) AS every_scope
             FROM dedup_grants_by_name GROUP BY 1, 2 LOOP
        PERFORM dedup.change_grant(g.role_name::regrole, g.privilege,
                                   CASE WHEN NOT g.every_scope THEN g.scopes END, true);
    END LOOP;
END;
$$;
COMMENT ON FUNCTION @extschema@.dedup_distribute(integer) IS
    'on a Citus coordinator: distribute dedup.claims and dedup.streams by key (shard_count shards, citus.shard_count by default) and the outbox by partition (one a shard), make the scopes and grants reference tables, and route calls to the node of their key';
REVOKE ALL ON FUNCTION @extschema@.dedup_distribute(integer) FROM PUBLIC;

-------------------------------------------------------------------------
-- Records (issue 32): whether a key was taken over from a holder whose
-- lease had passed, so that a caller without an attempt is refused only
-- then (1.0's records, with no such field, count as taken over once past
-- attempt 1, as 1.0 refused them)
-------------------------------------------------------------------------
ALTER TYPE dedup.record_state ADD ATTRIBUTE taken_over boolean;
