-------------------------------------------------------------------------
-- Claims.  A key is text, bytea, uuid, a dedup_fingerprint or a bigint, and
-- is its bytes: a uuid its 16 bytes (not its text), a bigint its decimal
-- text (42 and '42' are one key): src/fingerprint.c
-------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION @extschema@.dedup_claim(scope text, key text,
    ttl interval DEFAULT NULL, nowait boolean DEFAULT false)
RETURNS boolean
AS 'MODULE_PATHNAME', 'dedup_claim_varlena' LANGUAGE C VOLATILE;
CREATE OR REPLACE FUNCTION @extschema@.dedup_claim(scope text, key bytea,
    ttl interval DEFAULT NULL, nowait boolean DEFAULT false)
RETURNS boolean
AS 'MODULE_PATHNAME', 'dedup_claim_varlena' LANGUAGE C VOLATILE;
CREATE OR REPLACE FUNCTION @extschema@.dedup_claim(scope text, key uuid,
    ttl interval DEFAULT NULL, nowait boolean DEFAULT false)
RETURNS boolean
AS 'MODULE_PATHNAME', 'dedup_claim_fixed' LANGUAGE C VOLATILE;
CREATE OR REPLACE FUNCTION @extschema@.dedup_claim(scope text, key @extschema@.dedup_fingerprint,
    ttl interval DEFAULT NULL, nowait boolean DEFAULT false)
RETURNS boolean
AS 'MODULE_PATHNAME', 'dedup_claim_fixed' LANGUAGE C VOLATILE;
CREATE OR REPLACE FUNCTION @extschema@.dedup_claim(scope text, key bigint,
    ttl interval DEFAULT NULL, nowait boolean DEFAULT false)
RETURNS boolean
AS 'MODULE_PATHNAME', 'dedup_claim_int8' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.dedup_claim(text, text, interval, boolean) IS
    'claim a key in the current transaction: true the first time, false for a live duplicate';

CREATE OR REPLACE FUNCTION @extschema@.dedup_claim_batch(scope text, keys text[],
    ttl interval DEFAULT NULL, nowait boolean DEFAULT false)
RETURNS SETOF text
AS 'MODULE_PATHNAME', 'dedup_claim_batch' LANGUAGE C VOLATILE;
CREATE OR REPLACE FUNCTION @extschema@.dedup_claim_batch(scope text, keys bytea[],
    ttl interval DEFAULT NULL, nowait boolean DEFAULT false)
RETURNS SETOF bytea
AS 'MODULE_PATHNAME', 'dedup_claim_batch' LANGUAGE C VOLATILE;
CREATE OR REPLACE FUNCTION @extschema@.dedup_claim_batch(scope text, keys uuid[],
    ttl interval DEFAULT NULL, nowait boolean DEFAULT false)
RETURNS SETOF uuid
AS 'MODULE_PATHNAME', 'dedup_claim_batch' LANGUAGE C VOLATILE;
CREATE OR REPLACE FUNCTION @extschema@.dedup_claim_batch(scope text, keys @extschema@.dedup_fingerprint[],
    ttl interval DEFAULT NULL, nowait boolean DEFAULT false)
RETURNS SETOF @extschema@.dedup_fingerprint
AS 'MODULE_PATHNAME', 'dedup_claim_batch' LANGUAGE C VOLATILE;
CREATE OR REPLACE FUNCTION @extschema@.dedup_claim_batch(scope text, keys bigint[],
    ttl interval DEFAULT NULL, nowait boolean DEFAULT false)
RETURNS SETOF bigint
AS 'MODULE_PATHNAME', 'dedup_claim_batch' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.dedup_claim_batch(text, text[], interval, boolean) IS
    'claim many keys of a scope in the current transaction; returns the keys that were new';

