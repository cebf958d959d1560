-------------------------------------------------------------------------
-- Idempotency records: processing -> complete, with leases and stored
-- responses, in the same key space as claims, with the same kinds of key
-- (text and bytea as bytes, uuid and dedup_fingerprint as their 16 bytes,
-- bigint as its decimal text: src/fingerprint.c)
-------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION @extschema@.dedup_begin(scope text, key text,
    request jsonb DEFAULT NULL, lease interval DEFAULT NULL)
RETURNS @extschema@.dedup_begin_result
AS 'MODULE_PATHNAME' LANGUAGE C VOLATILE;
CREATE OR REPLACE FUNCTION @extschema@.dedup_begin(scope text, key bytea,
    request jsonb DEFAULT NULL, lease interval DEFAULT NULL)
RETURNS @extschema@.dedup_begin_result
AS 'MODULE_PATHNAME', 'dedup_begin' LANGUAGE C VOLATILE;
CREATE OR REPLACE FUNCTION @extschema@.dedup_begin(scope text, key uuid,
    request jsonb DEFAULT NULL, lease interval DEFAULT NULL)
RETURNS @extschema@.dedup_begin_result
AS 'MODULE_PATHNAME', 'dedup_begin_fixed' LANGUAGE C VOLATILE;
CREATE OR REPLACE FUNCTION @extschema@.dedup_begin(scope text, key @extschema@.dedup_fingerprint,
    request jsonb DEFAULT NULL, lease interval DEFAULT NULL)
RETURNS @extschema@.dedup_begin_result
AS 'MODULE_PATHNAME', 'dedup_begin_fixed' LANGUAGE C VOLATILE;
CREATE OR REPLACE FUNCTION @extschema@.dedup_begin(scope text, key bigint,
    request jsonb DEFAULT NULL, lease interval DEFAULT NULL)
RETURNS @extschema@.dedup_begin_result
AS 'MODULE_PATHNAME', 'dedup_begin_int8' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.dedup_begin(text, text, jsonb, interval) IS
    'begin work on an idempotency key: started (you hold a lease), replay (stored response), in_progress, or mismatch (another request used the key)';

-- The 1.1 form: a signature of its own (ttl has no default), so that a call
-- in 1.0's form matches one function only
CREATE OR REPLACE FUNCTION @extschema@.dedup_begin(scope text, key text,
    request jsonb, lease interval, ttl interval, ignore text[] DEFAULT NULL)
RETURNS @extschema@.dedup_begin_result
AS 'MODULE_PATHNAME', 'dedup_begin' LANGUAGE C VOLATILE;
CREATE OR REPLACE FUNCTION @extschema@.dedup_begin(scope text, key bytea,
    request jsonb, lease interval, ttl interval, ignore text[] DEFAULT NULL)
RETURNS @extschema@.dedup_begin_result
AS 'MODULE_PATHNAME', 'dedup_begin' LANGUAGE C VOLATILE;
CREATE OR REPLACE FUNCTION @extschema@.dedup_begin(scope text, key uuid,
    request jsonb, lease interval, ttl interval, ignore text[] DEFAULT NULL)
RETURNS @extschema@.dedup_begin_result
AS 'MODULE_PATHNAME', 'dedup_begin_fixed' LANGUAGE C VOLATILE;
CREATE OR REPLACE FUNCTION @extschema@.dedup_begin(scope text, key @extschema@.dedup_fingerprint,
    request jsonb, lease interval, ttl interval, ignore text[] DEFAULT NULL)
RETURNS @extschema@.dedup_begin_result
AS 'MODULE_PATHNAME', 'dedup_begin_fixed' LANGUAGE C VOLATILE;
CREATE OR REPLACE FUNCTION @extschema@.dedup_begin(scope text, key bigint,
    request jsonb, lease interval, ttl interval, ignore text[] DEFAULT NULL)
RETURNS @extschema@.dedup_begin_result
AS 'MODULE_PATHNAME', 'dedup_begin_int8' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.dedup_begin(text, text, jsonb, interval, interval, text[]) IS
    'dedup_begin with the record''s ttl (NULL: the scope''s) and the top-level request fields to leave out of its fingerprint';

CREATE OR REPLACE FUNCTION @extschema@.dedup_extend(scope text, key text, attempt integer,
    lease interval DEFAULT NULL)
RETURNS timestamptz
AS 'MODULE_PATHNAME', 'dedup_extend' LANGUAGE C VOLATILE;
CREATE OR REPLACE FUNCTION @extschema@.dedup_extend(scope text, key bytea, attempt integer,
    lease interval DEFAULT NULL)
RETURNS timestamptz
AS 'MODULE_PATHNAME', 'dedup_extend' LANGUAGE C VOLATILE;
CREATE OR REPLACE FUNCTION @extschema@.dedup_extend(scope text, key uuid, attempt integer,
    lease interval DEFAULT NULL)
RETURNS timestamptz
AS 'MODULE_PATHNAME', 'dedup_extend_fixed' LANGUAGE C VOLATILE;
CREATE OR REPLACE FUNCTION @extschema@.dedup_extend(scope text, key @extschema@.dedup_fingerprint, attempt integer,
    lease interval DEFAULT NULL)
RETURNS timestamptz
AS 'MODULE_PATHNAME', 'dedup_extend_fixed' LANGUAGE C VOLATILE;
CREATE OR REPLACE FUNCTION @extschema@.dedup_extend(scope text, key bigint, attempt integer,
    lease interval DEFAULT NULL)
RETURNS timestamptz
AS 'MODULE_PATHNAME', 'dedup_extend_int8' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.dedup_extend(text, text, integer, interval) IS
    'heartbeat: extend the lease of the caller''s attempt of a processing record to now + lease; refused once another attempt took the key over';

CREATE OR REPLACE FUNCTION @extschema@.dedup_complete(scope text, key text,
    response_code integer, response jsonb DEFAULT NULL, attempt integer DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME' LANGUAGE C VOLATILE;
CREATE OR REPLACE FUNCTION @extschema@.dedup_complete(scope text, key bytea,
    response_code integer, response jsonb DEFAULT NULL, attempt integer DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'dedup_complete' LANGUAGE C VOLATILE;
CREATE OR REPLACE FUNCTION @extschema@.dedup_complete(scope text, key uuid,
    response_code integer, response jsonb DEFAULT NULL, attempt integer DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'dedup_complete_fixed' LANGUAGE C VOLATILE;
CREATE OR REPLACE FUNCTION @extschema@.dedup_complete(scope text, key @extschema@.dedup_fingerprint,
    response_code integer, response jsonb DEFAULT NULL, attempt integer DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'dedup_complete_fixed' LANGUAGE C VOLATILE;
CREATE OR REPLACE FUNCTION @extschema@.dedup_complete(scope text, key bigint,
    response_code integer, response jsonb DEFAULT NULL, attempt integer DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'dedup_complete_int8' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.dedup_complete(text, text, integer, jsonb, integer) IS
    'store the response of a processing record and complete it; pass the attempt dedup_begin returned';

CREATE OR REPLACE FUNCTION @extschema@.dedup_release(scope text, key text, attempt integer DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME' LANGUAGE C VOLATILE;
CREATE OR REPLACE FUNCTION @extschema@.dedup_release(scope text, key bytea, attempt integer DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'dedup_release' LANGUAGE C VOLATILE;
CREATE OR REPLACE FUNCTION @extschema@.dedup_release(scope text, key uuid, attempt integer DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'dedup_release_fixed' LANGUAGE C VOLATILE;
CREATE OR REPLACE FUNCTION @extschema@.dedup_release(scope text, key @extschema@.dedup_fingerprint, attempt integer DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'dedup_release_fixed' LANGUAGE C VOLATILE;
CREATE OR REPLACE FUNCTION @extschema@.dedup_release(scope text, key bigint, attempt integer DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'dedup_release_int8' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.dedup_release(text, text, integer) IS
    'give a processing key back after a failure, so that a retry starts fresh';

-- request_fingerprint is text, as dedup_fingerprint writes it (1.0's was a
-- dedup_fingerprint: its text is the same; sql/types/records.sql says why)
CREATE OR REPLACE FUNCTION @extschema@.dedup_lookup(scope text, key text,
    OUT kind text, OUT status text, OUT attempts integer,
    OUT lease_expires_at timestamptz, OUT first_seen_at timestamptz,
    OUT completed_at timestamptz, OUT expires_at timestamptz,
    OUT response_code integer, OUT response jsonb,
    OUT request_fingerprint text)
RETURNS SETOF record
AS 'MODULE_PATHNAME' LANGUAGE C STABLE;
CREATE OR REPLACE FUNCTION @extschema@.dedup_lookup(scope text, key bytea,
    OUT kind text, OUT status text, OUT attempts integer,
    OUT lease_expires_at timestamptz, OUT first_seen_at timestamptz,
    OUT completed_at timestamptz, OUT expires_at timestamptz,
    OUT response_code integer, OUT response jsonb,
    OUT request_fingerprint text)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'dedup_lookup' LANGUAGE C STABLE;
CREATE OR REPLACE FUNCTION @extschema@.dedup_lookup(scope text, key uuid,
    OUT kind text, OUT status text, OUT attempts integer,
    OUT lease_expires_at timestamptz, OUT first_seen_at timestamptz,
    OUT completed_at timestamptz, OUT expires_at timestamptz,
    OUT response_code integer, OUT response jsonb,
    OUT request_fingerprint text)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'dedup_lookup_fixed' LANGUAGE C STABLE;
CREATE OR REPLACE FUNCTION @extschema@.dedup_lookup(scope text, key @extschema@.dedup_fingerprint,
    OUT kind text, OUT status text, OUT attempts integer,
    OUT lease_expires_at timestamptz, OUT first_seen_at timestamptz,
    OUT completed_at timestamptz, OUT expires_at timestamptz,
    OUT response_code integer, OUT response jsonb,
    OUT request_fingerprint text)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'dedup_lookup_fixed' LANGUAGE C STABLE;
CREATE OR REPLACE FUNCTION @extschema@.dedup_lookup(scope text, key bigint,
    OUT kind text, OUT status text, OUT attempts integer,
    OUT lease_expires_at timestamptz, OUT first_seen_at timestamptz,
    OUT completed_at timestamptz, OUT expires_at timestamptz,
    OUT response_code integer, OUT response jsonb,
    OUT request_fingerprint text)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'dedup_lookup_int8' LANGUAGE C STABLE;
COMMENT ON FUNCTION @extschema@.dedup_lookup(text, text) IS
    'the live claim or record of a key, without changing it; no row when absent or expired';

