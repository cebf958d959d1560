/* dedup--1.0.sql: install script of dedup 1.0 */

\echo Use "CREATE EXTENSION dedup" to load this file. \quit

/*
 * Public functions and the fingerprint type live in the schema the
 * extension is created in (@extschema@, usually public); the tables live in
 * the fixed schema "dedup", which no role but the owner can use.  The
 * functions that write are executable by nobody but the owner until
 * granted; see dedup_grant_usage() in the README.
 */
CREATE SCHEMA dedup;
COMMENT ON SCHEMA dedup IS 'tables of the dedup extension; use its functions, not the tables';
REVOKE ALL ON SCHEMA dedup FROM PUBLIC;

-------------------------------------------------------------------------
-- The fingerprint type: 16 bytes, written as 32 hexadecimal digits
-------------------------------------------------------------------------
CREATE TYPE @extschema@.dedup_fingerprint;

CREATE FUNCTION @extschema@.dedup_fingerprint_in(cstring)
RETURNS @extschema@.dedup_fingerprint
AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION @extschema@.dedup_fingerprint_out(@extschema@.dedup_fingerprint)
RETURNS cstring
AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION @extschema@.dedup_fingerprint_recv(internal)
RETURNS @extschema@.dedup_fingerprint
AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION @extschema@.dedup_fingerprint_send(@extschema@.dedup_fingerprint)
RETURNS bytea
AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE TYPE @extschema@.dedup_fingerprint (
    INPUT = @extschema@.dedup_fingerprint_in,
    OUTPUT = @extschema@.dedup_fingerprint_out,
    RECEIVE = @extschema@.dedup_fingerprint_recv,
    SEND = @extschema@.dedup_fingerprint_send,
    INTERNALLENGTH = 16,
    ALIGNMENT = char,
    STORAGE = plain
);
COMMENT ON TYPE @extschema@.dedup_fingerprint IS
    'first 128 bits of a SHA-256 digest of a key or payload';

-- constructors: the fingerprint of a value (not of a key within a scope)
CREATE FUNCTION @extschema@.dedup_fingerprint(value text)
RETURNS @extschema@.dedup_fingerprint
AS 'MODULE_PATHNAME', 'dedup_fingerprint_text' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION @extschema@.dedup_fingerprint(value bytea)
RETURNS @extschema@.dedup_fingerprint
AS 'MODULE_PATHNAME', 'dedup_fingerprint_text' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION @extschema@.dedup_fingerprint(value uuid)
RETURNS @extschema@.dedup_fingerprint
AS 'MODULE_PATHNAME', 'dedup_fingerprint_uuid' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION @extschema@.dedup_fingerprint(payload jsonb)
RETURNS @extschema@.dedup_fingerprint
AS 'MODULE_PATHNAME', 'dedup_fingerprint_jsonb' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION @extschema@.dedup_fingerprint(payload jsonb, ignore text[])
RETURNS @extschema@.dedup_fingerprint
AS 'MODULE_PATHNAME', 'dedup_fingerprint_jsonb' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.dedup_fingerprint(jsonb, text[]) IS
    'canonical fingerprint of a JSON value: key order, white space and number spelling do not matter; top-level fields named in ignore are left out';

CREATE CAST (bytea AS @extschema@.dedup_fingerprint)
    WITH FUNCTION @extschema@.dedup_fingerprint(bytea);
CREATE CAST (uuid AS @extschema@.dedup_fingerprint)
    WITH FUNCTION @extschema@.dedup_fingerprint(uuid);
CREATE CAST (jsonb AS @extschema@.dedup_fingerprint)
    WITH FUNCTION @extschema@.dedup_fingerprint(jsonb);

-- comparison, for the btree and hash operator classes
CREATE FUNCTION @extschema@.dedup_fingerprint_cmp(@extschema@.dedup_fingerprint, @extschema@.dedup_fingerprint)
RETURNS integer AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION @extschema@.dedup_fingerprint_eq(@extschema@.dedup_fingerprint, @extschema@.dedup_fingerprint)
RETURNS boolean AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION @extschema@.dedup_fingerprint_ne(@extschema@.dedup_fingerprint, @extschema@.dedup_fingerprint)
RETURNS boolean AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION @extschema@.dedup_fingerprint_lt(@extschema@.dedup_fingerprint, @extschema@.dedup_fingerprint)
RETURNS boolean AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION @extschema@.dedup_fingerprint_le(@extschema@.dedup_fingerprint, @extschema@.dedup_fingerprint)
RETURNS boolean AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION @extschema@.dedup_fingerprint_gt(@extschema@.dedup_fingerprint, @extschema@.dedup_fingerprint)
RETURNS boolean AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION @extschema@.dedup_fingerprint_ge(@extschema@.dedup_fingerprint, @extschema@.dedup_fingerprint)
RETURNS boolean AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION @extschema@.dedup_fingerprint_hash(@extschema@.dedup_fingerprint)
RETURNS integer AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION @extschema@.dedup_fingerprint_hash_extended(@extschema@.dedup_fingerprint, bigint)
RETURNS bigint AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;

CREATE OPERATOR @extschema@.= (
    LEFTARG = @extschema@.dedup_fingerprint, RIGHTARG = @extschema@.dedup_fingerprint,
    FUNCTION = @extschema@.dedup_fingerprint_eq,
    COMMUTATOR = OPERATOR(@extschema@.=), NEGATOR = OPERATOR(@extschema@.<>),
    RESTRICT = eqsel, JOIN = eqjoinsel, HASHES, MERGES
);
CREATE OPERATOR @extschema@.<> (
    LEFTARG = @extschema@.dedup_fingerprint, RIGHTARG = @extschema@.dedup_fingerprint,
    FUNCTION = @extschema@.dedup_fingerprint_ne,
    COMMUTATOR = OPERATOR(@extschema@.<>), NEGATOR = OPERATOR(@extschema@.=),
    RESTRICT = neqsel, JOIN = neqjoinsel
);
CREATE OPERATOR @extschema@.< (
    LEFTARG = @extschema@.dedup_fingerprint, RIGHTARG = @extschema@.dedup_fingerprint,
    FUNCTION = @extschema@.dedup_fingerprint_lt,
    COMMUTATOR = OPERATOR(@extschema@.>), NEGATOR = OPERATOR(@extschema@.>=),
    RESTRICT = scalarltsel, JOIN = scalarltjoinsel
);
CREATE OPERATOR @extschema@.<= (
    LEFTARG = @extschema@.dedup_fingerprint, RIGHTARG = @extschema@.dedup_fingerprint,
    FUNCTION = @extschema@.dedup_fingerprint_le,
    COMMUTATOR = OPERATOR(@extschema@.>=), NEGATOR = OPERATOR(@extschema@.>),
    RESTRICT = scalarlesel, JOIN = scalarlejoinsel
);
CREATE OPERATOR @extschema@.> (
    LEFTARG = @extschema@.dedup_fingerprint, RIGHTARG = @extschema@.dedup_fingerprint,
    FUNCTION = @extschema@.dedup_fingerprint_gt,
    COMMUTATOR = OPERATOR(@extschema@.<), NEGATOR = OPERATOR(@extschema@.<=),
    RESTRICT = scalargtsel, JOIN = scalargtjoinsel
);
CREATE OPERATOR @extschema@.>= (
    LEFTARG = @extschema@.dedup_fingerprint, RIGHTARG = @extschema@.dedup_fingerprint,
    FUNCTION = @extschema@.dedup_fingerprint_ge,
    COMMUTATOR = OPERATOR(@extschema@.<=), NEGATOR = OPERATOR(@extschema@.<),
    RESTRICT = scalargesel, JOIN = scalargejoinsel
);

CREATE OPERATOR CLASS @extschema@.dedup_fingerprint_ops
    DEFAULT FOR TYPE @extschema@.dedup_fingerprint USING btree AS
        OPERATOR 1 @extschema@.<,
        OPERATOR 2 @extschema@.<=,
        OPERATOR 3 @extschema@.=,
        OPERATOR 4 @extschema@.>=,
        OPERATOR 5 @extschema@.>,
        FUNCTION 1 @extschema@.dedup_fingerprint_cmp(@extschema@.dedup_fingerprint, @extschema@.dedup_fingerprint);

CREATE OPERATOR CLASS @extschema@.dedup_fingerprint_hash_ops
    DEFAULT FOR TYPE @extschema@.dedup_fingerprint USING hash AS
        OPERATOR 1 @extschema@.=,
        FUNCTION 1 @extschema@.dedup_fingerprint_hash(@extschema@.dedup_fingerprint),
        FUNCTION 2 @extschema@.dedup_fingerprint_hash_extended(@extschema@.dedup_fingerprint, bigint);

-------------------------------------------------------------------------
-- Tables
-------------------------------------------------------------------------

-- Per-scope settings; a NULL setting, or no row, means the GUC default.
CREATE TABLE dedup.scopes (
    scope      text COLLATE "C" NOT NULL,
    ttl        interval,
    lease      interval,
    retention  interval,
    max_attempts integer CHECK (max_attempts >= 1),
    updated_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
    CONSTRAINT scopes_pkey PRIMARY KEY (scope)
) USING heap;
COMMENT ON TABLE dedup.scopes IS 'per-scope settings; change them with dedup_set_scope()';

-- The state of an idempotency record (dedup_begin ... dedup_complete).
CREATE TYPE dedup.record_state AS (
    status        "char",          -- 'p' processing, 'c' complete, 'r' released
    attempts      integer,
    lease_until   timestamptz,
    request       @extschema@.dedup_fingerprint,
    response_code integer,
    response      jsonb,
    first_seen    timestamptz,
    completed_at  timestamptz
);

-- Claims and idempotency records: one row per live (scope, key), keyed by
-- a fingerprint of both.  A plain claim is a record that completed with its
-- transaction and stored nothing: its record is NULL.  Three columns (the
-- NULL one costs nothing: the null bitmap fits the header's padding) and one
-- unique index keep a new claim to one heap record and one btree record of
-- WAL; expired rows are found by the cleanup's sequential pass, so no index
-- on expires_at is paid for by every claim.  For a processing record,
-- expires_at is the end of its lease plus the scope's ttl.  The cleanup
-- leaves dead rows behind, so vacuum comes after 2% of them, not 20%.
CREATE TABLE dedup.claims (
    key        @extschema@.dedup_fingerprint NOT NULL,
    expires_at timestamptz NOT NULL,
    record     dedup.record_state,
    CONSTRAINT claims_pkey PRIMARY KEY (key)
) USING heap WITH (autovacuum_vacuum_scale_factor = 0.02);
COMMENT ON TABLE dedup.claims IS 'claimed keys and idempotency records (fingerprint of scope and key) and their expiry';

-- every change to the settings empties the backends' caches of them
CREATE FUNCTION dedup.scopes_changed() RETURNS trigger
AS 'MODULE_PATHNAME', 'dedup_scopes_changed' LANGUAGE C;
REVOKE ALL ON FUNCTION dedup.scopes_changed() FROM PUBLIC;
CREATE TRIGGER scopes_changed
    AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON dedup.scopes
    FOR EACH STATEMENT EXECUTE FUNCTION dedup.scopes_changed();

-- The transactional outbox.  Events not yet published live in
-- dedup.outbox, with the columns Debezium's Outbox Event Router reads (id,
-- aggregatetype, aggregateid, type, payload) and the relay's own state;
-- an acked event is deleted.  seq is the hand-out order; within an
-- aggregate it is commit order (dedup_outbox_put serializes the producers
-- of one aggregate).  Nothing the relay changes (status, attempts,
-- visible_at, last_error) is indexed, so taking an event is a HOT update.
-- A pending event is available from visible_at; a taken one is leased
-- until visible_at.
CREATE TABLE dedup.outbox (
    seq           bigint GENERATED ALWAYS AS IDENTITY,
    id            uuid NOT NULL,
    topic         text COLLATE "C" NOT NULL,
    aggregatetype text NOT NULL,
    aggregateid   text NOT NULL,
    type          text NOT NULL,
    payload       jsonb,
    headers       jsonb NOT NULL DEFAULT '{}',
    created_at    timestamptz NOT NULL DEFAULT pg_catalog.now(),
    status        "char" NOT NULL DEFAULT 'p',     -- 'p' pending, 't' taken
    attempts      integer NOT NULL DEFAULT 0,
    visible_at    timestamptz NOT NULL DEFAULT pg_catalog.now(),
    last_error    text,
    CONSTRAINT outbox_pkey PRIMARY KEY (id)
) USING heap WITH (fillfactor = 50, autovacuum_vacuum_scale_factor = 0.02);
CREATE INDEX outbox_topic_seq ON dedup.outbox (topic, seq);
CREATE INDEX outbox_aggregate_seq ON dedup.outbox (topic, aggregateid, seq);
COMMENT ON TABLE dedup.outbox IS 'outbox events not yet published (Debezium Outbox Event Router columns plus the relay''s state)';

-- Events that failed max_attempts times, until redriven.
CREATE TABLE dedup.outbox_dead (
    seq           bigint NOT NULL,
    id            uuid NOT NULL,
    topic         text COLLATE "C" NOT NULL,
    aggregatetype text NOT NULL,
    aggregateid   text NOT NULL,
    type          text NOT NULL,
    payload       jsonb,
    headers       jsonb NOT NULL,
    created_at    timestamptz NOT NULL,
    attempts      integer NOT NULL,
    last_error    text,
    died_at       timestamptz NOT NULL DEFAULT pg_catalog.now(),
    CONSTRAINT outbox_dead_pkey PRIMARY KEY (id)
) USING heap;
CREATE INDEX outbox_dead_topic_seq ON dedup.outbox_dead (topic, seq);
COMMENT ON TABLE dedup.outbox_dead IS 'dead-lettered outbox events; dedup_outbox_redrive() puts them back';

-- The (topic, key) of every event put within its topic's retention, so that
-- a retried producer transaction never publishes twice.  The same columns
-- as dedup.claims: the claim path and the cleanup serve both.
CREATE TABLE dedup.outbox_keys (
    key        @extschema@.dedup_fingerprint NOT NULL,
    expires_at timestamptz NOT NULL,
    record     dedup.record_state,
    CONSTRAINT outbox_keys_pkey PRIMARY KEY (key)
) USING heap WITH (autovacuum_vacuum_scale_factor = 0.02);
COMMENT ON TABLE dedup.outbox_keys IS 'keys of outbox events put within their topic''s retention';

SELECT pg_catalog.pg_extension_config_dump('dedup.scopes', '');
SELECT pg_catalog.pg_extension_config_dump('dedup.claims', '');
SELECT pg_catalog.pg_extension_config_dump('dedup.outbox', '');
SELECT pg_catalog.pg_extension_config_dump('dedup.outbox_seq_seq', '');
SELECT pg_catalog.pg_extension_config_dump('dedup.outbox_dead', '');
SELECT pg_catalog.pg_extension_config_dump('dedup.outbox_keys', '');

-------------------------------------------------------------------------
-- Scopes
-------------------------------------------------------------------------
CREATE FUNCTION @extschema@.dedup_set_scope(
    scope text, ttl interval DEFAULT NULL, lease interval DEFAULT NULL,
    retention interval DEFAULT NULL, max_attempts integer DEFAULT NULL,
    OUT scope text, OUT ttl interval, OUT lease interval, OUT retention interval,
    OUT max_attempts integer, OUT configured boolean)
AS 'MODULE_PATHNAME' LANGUAGE C VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.dedup_set_scope(text, interval, interval, interval, integer) IS
    'set a scope''s ttl, lease, retention and outbox max_attempts (NULL leaves a setting as it is); returns the effective settings';

CREATE FUNCTION @extschema@.dedup_reset_scope(scope text)
RETURNS boolean
AS 'MODULE_PATHNAME' LANGUAGE C VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.dedup_reset_scope(text) IS
    'forget a scope''s settings, so that it uses the GUC defaults again; true if it had any';

CREATE FUNCTION @extschema@.dedup_scope(
    scope text,
    OUT scope text, OUT ttl interval, OUT lease interval, OUT retention interval,
    OUT max_attempts integer, OUT configured boolean)
AS 'MODULE_PATHNAME' LANGUAGE C STABLE;
COMMENT ON FUNCTION @extschema@.dedup_scope(text) IS
    'the effective settings of a scope: its own where set, the GUC defaults otherwise';

-------------------------------------------------------------------------
-- Claims
-------------------------------------------------------------------------
CREATE FUNCTION @extschema@.dedup_claim(scope text, key text,
    ttl interval DEFAULT NULL, nowait boolean DEFAULT false)
RETURNS boolean
AS 'MODULE_PATHNAME', 'dedup_claim_varlena' LANGUAGE C VOLATILE;
CREATE FUNCTION @extschema@.dedup_claim(scope text, key bytea,
    ttl interval DEFAULT NULL, nowait boolean DEFAULT false)
RETURNS boolean
AS 'MODULE_PATHNAME', 'dedup_claim_varlena' LANGUAGE C VOLATILE;
CREATE FUNCTION @extschema@.dedup_claim(scope text, key uuid,
    ttl interval DEFAULT NULL, nowait boolean DEFAULT false)
RETURNS boolean
AS 'MODULE_PATHNAME', 'dedup_claim_fixed' LANGUAGE C VOLATILE;
CREATE FUNCTION @extschema@.dedup_claim(scope text, key @extschema@.dedup_fingerprint,
    ttl interval DEFAULT NULL, nowait boolean DEFAULT false)
RETURNS boolean
AS 'MODULE_PATHNAME', 'dedup_claim_fixed' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.dedup_claim(text, text, interval, boolean) IS
    'claim a key in the current transaction: true the first time, false for a live duplicate';

CREATE FUNCTION @extschema@.dedup_claim_batch(scope text, keys text[],
    ttl interval DEFAULT NULL, nowait boolean DEFAULT false)
RETURNS SETOF text
AS 'MODULE_PATHNAME', 'dedup_claim_batch' LANGUAGE C VOLATILE;
CREATE FUNCTION @extschema@.dedup_claim_batch(scope text, keys bytea[],
    ttl interval DEFAULT NULL, nowait boolean DEFAULT false)
RETURNS SETOF bytea
AS 'MODULE_PATHNAME', 'dedup_claim_batch' LANGUAGE C VOLATILE;
CREATE FUNCTION @extschema@.dedup_claim_batch(scope text, keys uuid[],
    ttl interval DEFAULT NULL, nowait boolean DEFAULT false)
RETURNS SETOF uuid
AS 'MODULE_PATHNAME', 'dedup_claim_batch' LANGUAGE C VOLATILE;
CREATE FUNCTION @extschema@.dedup_claim_batch(scope text, keys @extschema@.dedup_fingerprint[],
    ttl interval DEFAULT NULL, nowait boolean DEFAULT false)
RETURNS SETOF @extschema@.dedup_fingerprint
AS 'MODULE_PATHNAME', 'dedup_claim_batch' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.dedup_claim_batch(text, text[], interval, boolean) IS
    'claim many keys of a scope in the current transaction; returns the keys that were new';

-------------------------------------------------------------------------
-- Idempotency records: processing -> complete, with leases and stored
-- responses, in the same key space as claims
-------------------------------------------------------------------------
CREATE TYPE @extschema@.dedup_begin_result AS (
    outcome          text,         -- started | replay | in_progress | mismatch
    status           text,         -- processing | complete (| released: in_progress over a release being written)
    response_code    integer,      -- the stored response, for replay
    response         jsonb,
    attempts         integer,
    lease_expires_at timestamptz,
    first_seen_at    timestamptz
);
COMMENT ON TYPE @extschema@.dedup_begin_result IS 'what dedup_begin() found or did';

CREATE FUNCTION @extschema@.dedup_begin(scope text, key text,
    request jsonb DEFAULT NULL, lease interval DEFAULT NULL)
RETURNS @extschema@.dedup_begin_result
AS 'MODULE_PATHNAME' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.dedup_begin(text, text, jsonb, interval) IS
    'begin work on an idempotency key: started (you hold a lease), replay (stored response), in_progress, or mismatch (another request used the key)';

CREATE FUNCTION @extschema@.dedup_complete(scope text, key text,
    response_code integer, response jsonb DEFAULT NULL, attempt integer DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.dedup_complete(text, text, integer, jsonb, integer) IS
    'store the response of a processing record and complete it; pass the attempt dedup_begin returned';

CREATE FUNCTION @extschema@.dedup_release(scope text, key text, attempt integer DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.dedup_release(text, text, integer) IS
    'give a processing key back after a failure, so that a retry starts fresh';

CREATE FUNCTION @extschema@.dedup_lookup(scope text, key text,
    OUT kind text, OUT status text, OUT attempts integer,
    OUT lease_expires_at timestamptz, OUT first_seen_at timestamptz,
    OUT completed_at timestamptz, OUT expires_at timestamptz,
    OUT response_code integer, OUT response jsonb,
    OUT request_fingerprint @extschema@.dedup_fingerprint)
RETURNS SETOF record
AS 'MODULE_PATHNAME' LANGUAGE C STABLE;
COMMENT ON FUNCTION @extschema@.dedup_lookup(text, text) IS
    'the live claim or record of a key, without changing it; no row when absent or expired';

-------------------------------------------------------------------------
-- Transactional outbox
-------------------------------------------------------------------------
CREATE FUNCTION @extschema@.dedup_outbox_put(topic text, key text, payload jsonb,
    aggregate_id text DEFAULT NULL, type text DEFAULT NULL,
    headers jsonb DEFAULT NULL, aggregate_type text DEFAULT NULL)
RETURNS uuid
AS 'MODULE_PATHNAME' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.dedup_outbox_put(text, text, jsonb, text, text, jsonb, text) IS
    'enqueue an event in the current transaction; the same (topic, key) within the topic''s retention yields one event; returns its id';

-- What the C functions check before they write, for the relay's plpgsql
-- functions: a standby or a read-only transaction is refused with 25006
-- naming the function (and, on a standby, the standby).
CREATE FUNCTION dedup.check_writable(funcname text) RETURNS void
AS 'MODULE_PATHNAME', 'dedup_check_writable_sql' LANGUAGE C STRICT VOLATILE;
REVOKE ALL ON FUNCTION dedup.check_writable(text) FROM PUBLIC;

-- The relay.  An event is handed out at most once at a time: take locks
-- with SKIP LOCKED, so relays run in parallel.  Within an aggregate, only
-- the earliest event not yet acked is handed out, and only while no other
-- event of it is in flight, so events of one aggregate go out in commit
-- order and never two at once.  Leases run from the statement's start.
CREATE FUNCTION @extschema@.dedup_outbox_take(topic text, batch_size integer DEFAULT 100)
RETURNS TABLE (id uuid, aggregatetype text, aggregateid text, type text, payload jsonb,
               headers jsonb, attempts integer, created_at timestamptz,
               lease_expires_at timestamptz)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    lease interval;
    max_attempts integer;
BEGIN
    PERFORM dedup.check_writable('dedup_outbox_take');
    IF topic IS NULL OR batch_size IS NULL THEN
        RAISE EXCEPTION 'topic and batch_size must not be null' USING ERRCODE = '22004';
    END IF;
    IF batch_size < 1 OR batch_size > 10000 THEN
        RAISE EXCEPTION 'batch_size must be between 1 and 10000' USING ERRCODE = '22023';
    END IF;
    SELECT s.lease, s.max_attempts INTO lease, max_attempts
    FROM @extschema@.dedup_scope(topic) AS s;
    RETURN QUERY
    WITH candidates AS (
        SELECT o.id AS cid
        FROM dedup.outbox AS o
        WHERE o.topic = dedup_outbox_take.topic
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
END
$$;
COMMENT ON FUNCTION @extschema@.dedup_outbox_take(text, integer) IS
    'hand out up to batch_size events of a topic with a lease (the topic''s lease); an event not acked comes back after it';

-- The (id, attempt) pairs an ack or nack names; attempts, when given,
-- must match ids one for one.
CREATE FUNCTION dedup.outbox_given(ids uuid[], attempts integer[])
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

-- The ids of a relay's ack or nack that it did not act on must be events
-- it could have been handed: one that never was (attempts 0) is 55000, one
-- unknown 42704.  Any other (acked before, dead, back in the queue, or
-- taken again under another attempt) was acted on by someone else: fine.
CREATE FUNCTION dedup.outbox_check_ids(ids uuid[], done uuid[])
RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    bad uuid;
BEGIN
    SELECT i INTO bad FROM pg_catalog.unnest(ids) AS i
    WHERE i <> ALL (done)
      AND EXISTS (SELECT FROM dedup.outbox AS o WHERE o.id = i AND o.attempts = 0)
    LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'outbox event % is not taken', bad USING ERRCODE = '55000',
            HINT = 'Only an event handed out by dedup_outbox_take() can be acked or nacked.';
    END IF;
    SELECT i INTO bad FROM pg_catalog.unnest(ids) AS i
    WHERE i <> ALL (done)
      AND NOT EXISTS (SELECT FROM dedup.outbox AS o WHERE o.id = i)
      AND NOT EXISTS (SELECT FROM dedup.outbox_dead AS d WHERE d.id = i)
      AND NOT EXISTS (SELECT FROM dedup.outbox_keys AS k
                      WHERE k.key OPERATOR(@extschema@.=)
                            pg_catalog.replace(i::text, '-', '')::@extschema@.dedup_fingerprint)
    LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'outbox event % does not exist', bad USING ERRCODE = '42704';
    END IF;
END
$$;
REVOKE ALL ON FUNCTION dedup.outbox_check_ids(uuid[], uuid[]) FROM PUBLIC;

-- The events were published: they never come back.  Counts even when the
-- lease passed, and for an event dead-lettered meanwhile.  With attempts
-- (as take returned them), an event taken again since is left to the relay
-- that holds it now.
CREATE FUNCTION @extschema@.dedup_outbox_ack(ids uuid[], attempts integer[] DEFAULT NULL)
RETURNS integer
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    done uuid[];
BEGIN
    PERFORM dedup.check_writable('dedup_outbox_ack');
    WITH given AS (
        SELECT g.id, g.attempt FROM dedup.outbox_given(ids, attempts) AS g
    ), gone AS (
        DELETE FROM dedup.outbox AS o USING given AS g
        WHERE o.id = g.id AND o.attempts > 0 AND (g.attempt IS NULL OR o.attempts = g.attempt)
        RETURNING o.id
    ), gone_dead AS (
        DELETE FROM dedup.outbox_dead AS d USING given AS g
        WHERE d.id = g.id AND (g.attempt IS NULL OR d.attempts = g.attempt)
        RETURNING d.id
    )
    SELECT coalesce(array_agg(x.id), '{}') INTO done
    FROM (SELECT gone.id FROM gone UNION ALL SELECT gone_dead.id FROM gone_dead) AS x;
    IF cardinality(done) < cardinality(ids) THEN
        PERFORM dedup.outbox_check_ids(ids, done);
    END IF;
    RETURN cardinality(done);
END
$$;
COMMENT ON FUNCTION @extschema@.dedup_outbox_ack(uuid[], integer[]) IS
    'the events were published: they never come back; returns how many were acked now (ids acked before, or taken again since their attempt, count 0)';

-- The events could not be published: back after retry_delay, or dead at
-- the topic's max_attempts.  Only an event still taken, and with attempts
-- under that same attempt, is nacked; others were dealt with by someone else.
CREATE FUNCTION @extschema@.dedup_outbox_nack(ids uuid[],
    retry_delay interval DEFAULT '0', error text DEFAULT NULL, attempts integer[] DEFAULT NULL)
RETURNS integer
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    done uuid[];
BEGIN
    PERFORM dedup.check_writable('dedup_outbox_nack');
    IF retry_delay IS NULL THEN
        RAISE EXCEPTION 'retry_delay must not be null' USING ERRCODE = '22004';
    END IF;
    IF retry_delay < interval '0' THEN
        RAISE EXCEPTION 'retry_delay must not be negative' USING ERRCODE = '22023';
    END IF;
    WITH given AS (
        SELECT g.id, g.attempt FROM dedup.outbox_given(ids, attempts) AS g
    ), targets AS (
        SELECT o.id AS tid,
               o.attempts >= (SELECT s.max_attempts FROM @extschema@.dedup_scope(o.topic) AS s) AS dies
        FROM dedup.outbox AS o JOIN given AS g ON o.id = g.id
        WHERE o.status = 't' AND (g.attempt IS NULL OR o.attempts = g.attempt)
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
        RETURNING o.id
    )
    SELECT coalesce(array_agg(x.id), '{}') INTO done
    FROM (SELECT dead.id FROM dead UNION ALL SELECT back.id FROM back) AS x;
    IF cardinality(done) < cardinality(ids) THEN
        PERFORM dedup.outbox_check_ids(ids, done);
    END IF;
    RETURN cardinality(done);
END
$$;
COMMENT ON FUNCTION @extschema@.dedup_outbox_nack(uuid[], interval, text, integer[]) IS
    'the events could not be published: they come back after retry_delay, or go to dead after the topic''s max_attempts';

CREATE FUNCTION @extschema@.dedup_outbox_redrive(topic text, ids uuid[] DEFAULT NULL)
RETURNS integer
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    n integer;
BEGIN
    PERFORM dedup.check_writable('dedup_outbox_redrive');
    IF topic IS NULL THEN
        RAISE EXCEPTION 'topic must not be null' USING ERRCODE = '22004';
    END IF;
    WITH revived AS (
        DELETE FROM dedup.outbox_dead AS d
        WHERE d.topic = dedup_outbox_redrive.topic AND (ids IS NULL OR d.id = ANY (ids))
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
COMMENT ON FUNCTION @extschema@.dedup_outbox_redrive(text, uuid[]) IS
    'put dead events of a topic (all, or those of ids) back in the outbox, in their original order, with no attempts';

CREATE FUNCTION @extschema@.dedup_outbox_stats(topic text DEFAULT NULL,
    OUT topic text, OUT pending bigint, OUT in_flight bigint, OUT dead bigint,
    OUT oldest_pending_age interval)
RETURNS SETOF record
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT t.topic,
           count(*) FILTER (WHERE NOT t.dead AND NOT t.flying),
           count(*) FILTER (WHERE t.flying),
           count(*) FILTER (WHERE t.dead),
           pg_catalog.now() - min(t.created_at) FILTER (WHERE NOT t.dead)
    FROM (SELECT o.topic, o.created_at, false AS dead,
                 (o.status = 't' AND o.visible_at > pg_catalog.now()) AS flying
          FROM dedup.outbox AS o
          WHERE $1 IS NULL OR o.topic = $1
          UNION ALL
          SELECT d.topic, d.created_at, true, false
          FROM dedup.outbox_dead AS d
          WHERE $1 IS NULL OR d.topic = $1) AS t
    GROUP BY t.topic
    ORDER BY t.topic
$$;
COMMENT ON FUNCTION @extschema@.dedup_outbox_stats(text) IS
    'per topic: events pending (including leases that passed), in flight, dead, and the age of the oldest not yet published';
-------------------------------------------------------------------------
-- Cleanup of what has expired
-------------------------------------------------------------------------
CREATE FUNCTION @extschema@.dedup_cleanup_batch(
    "position" bigint DEFAULT 0, batch_size integer DEFAULT NULL,
    OUT deleted bigint, OUT next_position bigint)
AS 'MODULE_PATHNAME' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.dedup_cleanup_batch(bigint, integer) IS
    'one batch of cleanup in the current transaction: deletes up to batch_size expired rows from position on (0 starts a pass); next_position is where the next batch starts, NULL at the end of the pass';

-- A whole pass, one committed batch at a time, with dedup.cleanup_pause
-- between batches.  No SECURITY DEFINER and no SET clause, which would
-- forbid the COMMITs; every name and operator is qualified.
CREATE PROCEDURE @extschema@.dedup_cleanup(
    batch_size integer DEFAULT NULL, INOUT deleted bigint DEFAULT NULL)
LANGUAGE plpgsql
AS $$
DECLARE
    pos bigint := 0;
    n bigint;
    pause float8;
BEGIN
    deleted := 0;
    LOOP
        SELECT b.deleted, b.next_position INTO n, pos
        FROM @extschema@.dedup_cleanup_batch(pos, batch_size) AS b;
        deleted := deleted OPERATOR(pg_catalog.+) n;
        COMMIT;
        EXIT WHEN pos IS NULL;
        pause := pg_catalog.date_part('epoch',
            pg_catalog.current_setting('dedup.cleanup_pause')::pg_catalog.interval);
        IF pause OPERATOR(pg_catalog.>) 0 THEN
            PERFORM pg_catalog.pg_sleep(pause);
        END IF;
    END LOOP;
END
$$;
COMMENT ON PROCEDURE @extschema@.dedup_cleanup(integer, bigint) IS
    'delete everything that has expired, committing after each batch; returns the number of rows deleted';

-- The cleanup's figures, kept in shared memory when dedup is preloaded:
-- one row per kind of row, for the current database or for all.
CREATE FUNCTION @extschema@.dedup_cleanup_stats(all_databases boolean DEFAULT false,
    OUT datname name, OUT kind text, OUT rows_deleted bigint,
    OUT rows_deleted_last_pass bigint, OUT last_pass_started_at timestamptz,
    OUT last_pass_duration interval, OUT batches bigint, OUT errors bigint,
    OUT cleanup_lag interval)
RETURNS SETOF record
AS 'MODULE_PATHNAME' LANGUAGE C VOLATILE STRICT;
COMMENT ON FUNCTION @extschema@.dedup_cleanup_stats(boolean) IS
    'cleanup figures per kind since the server started: of this database, or of every database with all_databases';

CREATE VIEW @extschema@.dedup_cleanup_stats AS
    SELECT s.datname, s.kind, s.rows_deleted, s.rows_deleted_last_pass,
           s.last_pass_started_at, s.last_pass_duration, s.batches, s.errors,
           s.cleanup_lag
    FROM @extschema@.dedup_cleanup_stats(true) AS s;
COMMENT ON VIEW @extschema@.dedup_cleanup_stats IS
    'cleanup figures per database and kind since the server started (needs dedup in shared_preload_libraries)';

-------------------------------------------------------------------------
-- Privileges: the functions that read or write claims and settings are
-- for roles granted them, not for PUBLIC.
-------------------------------------------------------------------------
REVOKE ALL ON FUNCTION
    @extschema@.dedup_set_scope(text, interval, interval, interval, integer),
    @extschema@.dedup_reset_scope(text),
    @extschema@.dedup_scope(text),
    @extschema@.dedup_claim(text, text, interval, boolean),
    @extschema@.dedup_claim(text, bytea, interval, boolean),
    @extschema@.dedup_claim(text, uuid, interval, boolean),
    @extschema@.dedup_claim(text, @extschema@.dedup_fingerprint, interval, boolean),
    @extschema@.dedup_claim_batch(text, text[], interval, boolean),
    @extschema@.dedup_claim_batch(text, bytea[], interval, boolean),
    @extschema@.dedup_claim_batch(text, uuid[], interval, boolean),
    @extschema@.dedup_claim_batch(text, @extschema@.dedup_fingerprint[], interval, boolean),
    @extschema@.dedup_cleanup_batch(bigint, integer),
    @extschema@.dedup_begin(text, text, jsonb, interval),
    @extschema@.dedup_complete(text, text, integer, jsonb, integer),
    @extschema@.dedup_release(text, text, integer),
    @extschema@.dedup_lookup(text, text)
FROM PUBLIC;
REVOKE ALL ON PROCEDURE @extschema@.dedup_cleanup(integer, bigint) FROM PUBLIC;
REVOKE ALL ON FUNCTION
    @extschema@.dedup_outbox_put(text, text, jsonb, text, text, jsonb, text),
    @extschema@.dedup_outbox_take(text, integer),
    @extschema@.dedup_outbox_ack(uuid[], integer[]),
    @extschema@.dedup_outbox_nack(uuid[], interval, text, integer[]),
    @extschema@.dedup_outbox_redrive(text, uuid[]),
    @extschema@.dedup_outbox_stats(text)
FROM PUBLIC;
-- Figures are for monitoring roles, as pg_stat_statements' are.
REVOKE ALL ON FUNCTION @extschema@.dedup_cleanup_stats(boolean) FROM PUBLIC;
REVOKE ALL ON @extschema@.dedup_cleanup_stats FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.dedup_cleanup_stats(boolean) TO pg_monitor;
GRANT SELECT ON @extschema@.dedup_cleanup_stats TO pg_monitor;

-- GRANT EXECUTE on functions to a role: what the grant helpers share.
CREATE FUNCTION dedup.grant_execute(role regrole, functions regprocedure[])
RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    fn regprocedure;
BEGIN
    IF role IS NULL THEN
        RAISE EXCEPTION 'role must not be null' USING ERRCODE = '22004';
    END IF;
    FOREACH fn IN ARRAY functions
    LOOP
        EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO %s', fn, role);
    END LOOP;
END
$$;
REVOKE ALL ON FUNCTION dedup.grant_execute(regrole, regprocedure[]) FROM PUBLIC;

-- What an application role needs to claim keys and read scope settings.
CREATE FUNCTION @extschema@.dedup_grant_usage(role regrole)
RETURNS void
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT dedup.grant_execute(role, ARRAY[
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
        '@extschema@.dedup_outbox_put(text, text, jsonb, text, text, jsonb, text)'
    ]::regprocedure[])
$$;
COMMENT ON FUNCTION @extschema@.dedup_grant_usage(regrole) IS
    'grant an application role what it needs to claim keys, use idempotency records and put outbox events (not to change scope settings or run the cleanup)';
REVOKE ALL ON FUNCTION @extschema@.dedup_grant_usage(regrole) FROM PUBLIC;

-- What a relay role needs to publish outbox events.
CREATE FUNCTION @extschema@.dedup_grant_relay(role regrole)
RETURNS void
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT dedup.grant_execute(role, ARRAY[
        '@extschema@.dedup_outbox_take(text, integer)',
        '@extschema@.dedup_outbox_ack(uuid[], integer[])',
        '@extschema@.dedup_outbox_nack(uuid[], interval, text, integer[])',
        '@extschema@.dedup_outbox_stats(text)'
    ]::regprocedure[])
$$;
COMMENT ON FUNCTION @extschema@.dedup_grant_relay(regrole) IS
    'grant a relay role what it needs to take, ack and nack outbox events and read their figures (not to redrive)';
REVOKE ALL ON FUNCTION @extschema@.dedup_grant_relay(regrole) FROM PUBLIC;
