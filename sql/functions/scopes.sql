-------------------------------------------------------------------------
-- Scopes
-------------------------------------------------------------------------
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
