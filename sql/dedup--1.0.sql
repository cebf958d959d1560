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
    updated_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
    CONSTRAINT scopes_pkey PRIMARY KEY (scope)
) USING heap;
COMMENT ON TABLE dedup.scopes IS 'per-scope settings; change them with dedup_set_scope()';

-- The state of an idempotency record (dedup_begin ... dedup_complete).
CREATE TYPE dedup.record_state AS (
    status        "char",          -- 'p' processing, 'c' complete
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

SELECT pg_catalog.pg_extension_config_dump('dedup.scopes', '');
SELECT pg_catalog.pg_extension_config_dump('dedup.claims', '');

-------------------------------------------------------------------------
-- Scopes
-------------------------------------------------------------------------
CREATE FUNCTION @extschema@.dedup_set_scope(
    scope text, ttl interval DEFAULT NULL, lease interval DEFAULT NULL,
    retention interval DEFAULT NULL,
    OUT scope text, OUT ttl interval, OUT lease interval, OUT retention interval,
    OUT configured boolean)
AS 'MODULE_PATHNAME' LANGUAGE C VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.dedup_set_scope(text, interval, interval, interval) IS
    'set a scope''s ttl, lease and retention (NULL leaves a setting as it is); returns the effective settings';

CREATE FUNCTION @extschema@.dedup_reset_scope(scope text)
RETURNS boolean
AS 'MODULE_PATHNAME' LANGUAGE C VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.dedup_reset_scope(text) IS
    'forget a scope''s settings, so that it uses the GUC defaults again; true if it had any';

CREATE FUNCTION @extschema@.dedup_scope(
    scope text,
    OUT scope text, OUT ttl interval, OUT lease interval, OUT retention interval,
    OUT configured boolean)
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
    status           text,         -- processing | complete
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
    @extschema@.dedup_set_scope(text, interval, interval, interval),
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
-- Figures are for monitoring roles, as pg_stat_statements' are.
REVOKE ALL ON FUNCTION @extschema@.dedup_cleanup_stats(boolean) FROM PUBLIC;
REVOKE ALL ON @extschema@.dedup_cleanup_stats FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.dedup_cleanup_stats(boolean) TO pg_monitor;
GRANT SELECT ON @extschema@.dedup_cleanup_stats TO pg_monitor;

-- What an application role needs to claim keys and read scope settings.
CREATE FUNCTION @extschema@.dedup_grant_usage(role regrole)
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
    FOREACH fn IN ARRAY ARRAY[
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
        '@extschema@.dedup_lookup(text, text)'
    ]::regprocedure[]
    LOOP
        EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO %s', fn, role);
    END LOOP;
END
$$;
COMMENT ON FUNCTION @extschema@.dedup_grant_usage(regrole) IS
    'grant an application role what it needs to claim keys and use idempotency records (not to change scope settings or run the cleanup)';
REVOKE ALL ON FUNCTION @extschema@.dedup_grant_usage(regrole) FROM PUBLIC;
