-------------------------------------------------------------------------
-- The history tier (history.c): a scope's memory of its expired claims
-------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION @extschema@.dedup_seen(scope text, key text)
RETURNS text
AS 'MODULE_PATHNAME', 'dedup_seen_varlena' LANGUAGE C STABLE;
CREATE OR REPLACE FUNCTION @extschema@.dedup_seen(scope text, key bytea)
RETURNS text
AS 'MODULE_PATHNAME', 'dedup_seen_varlena' LANGUAGE C STABLE;
CREATE OR REPLACE FUNCTION @extschema@.dedup_seen(scope text, key uuid)
RETURNS text
AS 'MODULE_PATHNAME', 'dedup_seen_fixed' LANGUAGE C STABLE;
CREATE OR REPLACE FUNCTION @extschema@.dedup_seen(scope text, key @extschema@.dedup_fingerprint)
RETURNS text
AS 'MODULE_PATHNAME', 'dedup_seen_fixed' LANGUAGE C STABLE;
CREATE OR REPLACE FUNCTION @extschema@.dedup_seen(scope text, key bigint)
RETURNS text
AS 'MODULE_PATHNAME', 'dedup_seen_int8' LANGUAGE C STABLE;
COMMENT ON FUNCTION @extschema@.dedup_seen(text, text) IS
    'why dedup_claim would answer as it would now: exact (a live claim), history (an expired claim within the scope''s history window, or the history''s filter holds the key, maybe falsely), or absent';
COMMENT ON FUNCTION @extschema@.dedup_seen(text, bytea) IS
    'dedup_seen for a bytea key';
COMMENT ON FUNCTION @extschema@.dedup_seen(text, uuid) IS
    'dedup_seen for a uuid key';
COMMENT ON FUNCTION @extschema@.dedup_seen(text, @extschema@.dedup_fingerprint) IS
    'dedup_seen for a key given as its fingerprint';
COMMENT ON FUNCTION @extschema@.dedup_seen(text, bigint) IS
    'dedup_seen for a bigint key (its decimal text)';

CREATE OR REPLACE FUNCTION @extschema@.dedup_history(scope text,
    OUT generation bigint, OUT opened_at timestamptz, OUT slice_end timestamptz,
    OUT expires_at timestamptz, OUT false_positive_rate double precision,
    OUT k integer, OUT capacity bigint, OUT keys bigint, OUT bytes bigint)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'dedup_history' LANGUAGE C STABLE STRICT;
COMMENT ON FUNCTION @extschema@.dedup_history(text) IS
    'the generations of a scope''s history: when each opened, until when it takes folds, when it goes, its rate of false positives when full, its bit positions a key, the keys it was sized for and holds, and its bytes';
