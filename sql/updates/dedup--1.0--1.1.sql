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

-- The relay's functions: the work moves to PL/pgSQL functions in schema
-- dedup that check the calling role's relay privilege; the public ones
-- become their C entry, which runs them as the owner.
CREATE FUNCTION dedup.outbox_take(caller oid, topic text, batch_size integer)
RETURNS TABLE (id uuid, aggregatetype text, aggregateid text, type text, payload jsonb,
               headers jsonb, attempts integer, created_at timestamptz,
               lease_expires_at timestamptz)
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    lease interval;
    max_attempts integer;
    n bigint;
BEGIN
    PERFORM dedup.check_writable('dedup_outbox_take');
    IF topic IS NULL OR batch_size IS NULL THEN
        RAISE EXCEPTION 'topic and batch_size must not be null' USING ERRCODE = '22004';
    END IF;
    IF batch_size < 1 OR batch_size > 10000 THEN
        RAISE EXCEPTION 'batch_size must be between 1 and 10000' USING ERRCODE = '22023';
    END IF;
    PERFORM dedup.has_privilege(caller, topic, 'relay', true);
    SELECT s.lease, s.max_attempts INTO lease, max_attempts
    FROM @extschema@.dedup_scope(topic) AS s;
    RETURN QUERY
    WITH candidates AS (
        SELECT o.id AS cid
        FROM dedup.outbox AS o
        WHERE o.topic = outbox_take.topic
          AND o.visible_at <= pg_catalog.statement_timestamp()
          AND NOT EXISTS (SELECT FROM dedup.outbox AS e
                          WHERE e.topic = o.topic AND e.aggregateid = o.aggregateid
                            AND e.id <> o.id
                            AND (e.seq < o.seq
                                 OR (e.status = 't'
                                     AND e.visible_at > pg_catalog.statement_timestamp())))
        ORDER BY o.seq
        LIMIT batch_size
        FOR UPDATE OF o SKIP LOCKED
    ), dead AS (
        DELETE FROM dedup.outbox AS o USING candidates AS c
        WHERE o.id = c.cid AND o.attempts >= max_attempts
        RETURNING o.*
    ), buried AS (
        INSERT INTO dedup.outbox_dead (seq, id, topic, aggregatetype, aggregateid, type,
                                       payload, headers, created_at, attempts, last_error)
        SELECT d.seq, d.id, d.topic, d.aggregatetype, d.aggregateid, d.type,
               d.payload, d.headers, d.created_at, d.attempts, d.last_error
        FROM dead AS d
        ON CONFLICT ON CONSTRAINT outbox_dead_pkey DO NOTHING
    ), taken AS (
        UPDATE dedup.outbox AS o
        SET status = 't', attempts = o.attempts + 1,
            visible_at = pg_catalog.statement_timestamp() + lease
        FROM candidates AS c
        WHERE o.id = c.cid AND o.attempts < max_attempts
        RETURNING o.seq, o.id, o.aggregatetype, o.aggregateid, o.type, o.payload,
                  o.headers, o.attempts, o.created_at, o.visible_at
    )
    SELECT t.id, t.aggregatetype, t.aggregateid, t.type, t.payload, t.headers,
           t.attempts, t.created_at, t.visible_at
    FROM taken AS t ORDER BY t.seq;
    GET DIAGNOSTICS n = ROW_COUNT;
    PERFORM dedup.scope_count(topic, 'events_taken', n);
END
$$;

CREATE FUNCTION dedup.outbox_ack(caller oid, ids uuid[], attempts integer[])
RETURNS integer
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    done uuid[];
    done_topics text[];
BEGIN
    PERFORM dedup.check_writable('dedup_outbox_ack');
    -- refused before anything is done, and again by the statement that acts
    -- (an event of another topic may have been put since); there the check
    -- names the joined row, so that it is made only for events named, and
    -- raises only for a row that is joined
    PERFORM dedup.has_privilege(caller, t.topic, 'relay', true)
    FROM (SELECT o.topic FROM dedup.outbox AS o WHERE o.id = ANY (ids)
          UNION
          SELECT d.topic FROM dedup.outbox_dead AS d WHERE d.id = ANY (ids)) AS t;
    WITH given AS (
        SELECT g.id, g.attempt FROM dedup.outbox_given(ids, attempts) AS g
    ), gone AS (
        DELETE FROM dedup.outbox AS o USING given AS g
        WHERE o.id = g.id AND o.attempts > 0 AND (g.attempt IS NULL OR o.attempts = g.attempt)
          AND dedup.has_privilege(caller, o.topic, 'relay', g.id = o.id)
        RETURNING o.id, o.topic
    ), gone_dead AS (
        DELETE FROM dedup.outbox_dead AS d USING given AS g
        WHERE d.id = g.id AND (g.attempt IS NULL OR d.attempts = g.attempt)
          AND dedup.has_privilege(caller, d.topic, 'relay', g.id = d.id)
        RETURNING d.id, d.topic
    )
    SELECT coalesce(array_agg(x.id), '{}'), coalesce(array_agg(x.topic), '{}') INTO done, done_topics
    FROM (SELECT gone.id, gone.topic FROM gone
          UNION ALL SELECT gone_dead.id, gone_dead.topic FROM gone_dead) AS x;
    IF cardinality(done) < cardinality(ids) THEN
        PERFORM dedup.outbox_check_ids(ids, done);
    END IF;
    -- counted once the call can no longer fail
    PERFORM dedup.scope_count(t.topic, 'events_acked', count(*))
    FROM pg_catalog.unnest(done_topics) AS t(topic) GROUP BY t.topic;
    RETURN cardinality(done);
END
$$;

CREATE FUNCTION dedup.outbox_nack(caller oid, ids uuid[],
    retry_delay interval, error text, attempts integer[])
RETURNS integer
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    done uuid[];
    done_topics text[];
BEGIN
    PERFORM dedup.check_writable('dedup_outbox_nack');
    PERFORM dedup.check_interval(retry_delay, 'retry_delay', true);
    -- refused before anything is done, and again by the statement that acts
    -- (an event of another topic may have been put since); there the check
    -- names the joined row, so that it is made only for events named, and
    -- raises only for a row that is joined
    PERFORM dedup.has_privilege(caller, t.topic, 'relay', true)
    FROM (SELECT o.topic FROM dedup.outbox AS o WHERE o.id = ANY (ids)
          UNION
          SELECT d.topic FROM dedup.outbox_dead AS d WHERE d.id = ANY (ids)) AS t;
    WITH given AS (
        SELECT g.id, g.attempt FROM dedup.outbox_given(ids, attempts) AS g
    ), targets AS (
        SELECT o.id AS tid,
               o.attempts >= (SELECT s.max_attempts FROM @extschema@.dedup_scope(o.topic) AS s) AS dies
        FROM dedup.outbox AS o JOIN given AS g ON o.id = g.id
        WHERE o.status = 't' AND (g.attempt IS NULL OR o.attempts = g.attempt)
          AND dedup.has_privilege(caller, o.topic, 'relay', g.id = o.id)
    ), dead AS (
        DELETE FROM dedup.outbox AS o USING targets AS t
        WHERE o.id = t.tid AND t.dies
        RETURNING o.*
    ), buried AS (
        INSERT INTO dedup.outbox_dead (seq, id, topic, aggregatetype, aggregateid, type,
                                       payload, headers, created_at, attempts, last_error)
        SELECT d.seq, d.id, d.topic, d.aggregatetype, d.aggregateid, d.type,
               d.payload, d.headers, d.created_at, d.attempts, coalesce(error, d.last_error)
        FROM dead AS d
        ON CONFLICT ON CONSTRAINT outbox_dead_pkey DO NOTHING
    ), back AS (
        UPDATE dedup.outbox AS o
        SET status = 'p', visible_at = pg_catalog.statement_timestamp() + retry_delay,
            last_error = coalesce(error, o.last_error)
        FROM targets AS t
        WHERE o.id = t.tid AND NOT t.dies
        RETURNING o.id, o.topic
    )
    SELECT coalesce(array_agg(x.id), '{}'), coalesce(array_agg(x.topic), '{}') INTO done, done_topics
    FROM (SELECT dead.id, dead.topic FROM dead UNION ALL SELECT back.id, back.topic FROM back) AS x;
    IF cardinality(done) < cardinality(ids) THEN
        PERFORM dedup.outbox_check_ids(ids, done);
    END IF;
    -- counted once the call can no longer fail
    PERFORM dedup.scope_count(t.topic, 'events_nacked', count(*))
    FROM pg_catalog.unnest(done_topics) AS t(topic) GROUP BY t.topic;
    RETURN cardinality(done);
END
$$;

CREATE FUNCTION dedup.outbox_redrive(caller oid, topic text, ids uuid[])
RETURNS integer
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    n integer;
BEGIN
    PERFORM dedup.check_writable('dedup_outbox_redrive');
    IF topic IS NULL THEN
        RAISE EXCEPTION 'topic must not be null' USING ERRCODE = '22004';
    END IF;
    PERFORM dedup.has_privilege(caller, topic, 'relay', true);
    WITH revived AS (
        DELETE FROM dedup.outbox_dead AS d
        WHERE d.topic = outbox_redrive.topic AND (ids IS NULL OR d.id = ANY (ids))
        RETURNING d.*
    )
    INSERT INTO dedup.outbox (seq, id, topic, aggregatetype, aggregateid, type, payload,
                              headers, created_at, last_error)
    OVERRIDING SYSTEM VALUE
    SELECT r.seq, r.id, r.topic, r.aggregatetype, r.aggregateid, r.type, r.payload,
           r.headers, r.created_at, r.last_error
    FROM revived AS r
    ON CONFLICT ON CONSTRAINT outbox_pkey DO NOTHING;
    GET DIAGNOSTICS n = ROW_COUNT;
    IF n > 0 THEN
        PERFORM pg_catalog.pg_notify('dedup_outbox', topic);
    END IF;
    RETURN n;
END
$$;

CREATE FUNCTION dedup.outbox_stats(caller oid, for_topic text)
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
    SELECT t.topic,
           count(*) FILTER (WHERE NOT t.dead AND NOT t.flying),
           count(*) FILTER (WHERE t.flying),
           count(*) FILTER (WHERE t.dead),
           pg_catalog.now() - min(t.created_at) FILTER (WHERE NOT t.dead)
    FROM (SELECT o.topic, o.created_at, false AS dead,
                 (o.status = 't' AND o.visible_at > pg_catalog.now()) AS flying
          FROM dedup.outbox AS o
          WHERE for_topic IS NULL OR o.topic = for_topic
          UNION ALL
          SELECT d.topic, d.created_at, true, false
          FROM dedup.outbox_dead AS d
          WHERE for_topic IS NULL OR d.topic = for_topic) AS t
    WHERE for_topic IS NOT NULL OR dedup.has_privilege(caller, t.topic, 'relay', false)
    GROUP BY t.topic
    ORDER BY t.topic;
END
$$;

REVOKE ALL ON FUNCTION
    dedup.outbox_take(oid, text, integer),
    dedup.outbox_ack(oid, uuid[], integer[]),
    dedup.outbox_nack(oid, uuid[], interval, text, integer[]),
    dedup.outbox_redrive(oid, text, uuid[]),
    dedup.outbox_stats(oid, text)
FROM PUBLIC;

-- The relay's public functions.  Each runs the function of the same name in
-- schema dedup (above) as the owner of the outbox, passing the role that
-- called it, which must have the relay privilege on every topic the call
-- touches (42501 otherwise, before anything is written): dedup_outbox_relay
-- in C switches to the owner as PostgreSQL does for SECURITY DEFINER, but
-- keeps the caller's identity for the check.
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
-- every row of the privilege and the EXECUTE grants).
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
            EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO %s', fn, role);
        END LOOP;
        INSERT INTO dedup.grants AS g (role, privilege, scope)
        SELECT change_grant.role, change_grant.privilege, u.s
        FROM unnest(coalesce(scopes, ARRAY[NULL::text])) AS u(s)
        ON CONFLICT ON CONSTRAINT grants_role_privilege_scope_key DO NOTHING;
    ELSE
        DELETE FROM dedup.grants AS g
        WHERE g.role::oid = change_grant.role::oid AND g.privilege = change_grant.privilege
          AND (scopes IS NULL OR g.scope = ANY (scopes));
        IF scopes IS NULL THEN
            FOREACH fn IN ARRAY dedup.functions_of(privilege)
            LOOP
                EXECUTE format('REVOKE EXECUTE ON FUNCTION %s FROM %s', fn, role);
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
