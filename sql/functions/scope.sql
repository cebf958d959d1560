-------------------------------------------------------------------------
-- Scopes
-------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION @extschema@.dedup_set_scope(
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

CREATE OR REPLACE FUNCTION @extschema@.dedup_reset_scope(scope text)
RETURNS boolean
AS 'MODULE_PATHNAME' LANGUAGE C VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.dedup_reset_scope(text) IS
    'forget a scope''s settings, so that it uses the GUC defaults again; true if it had any';

CREATE OR REPLACE FUNCTION @extschema@.dedup_scope(
    scope text,
    OUT scope text, OUT ttl interval, OUT lease interval, OUT retention interval,
    OUT max_attempts integer, OUT configured boolean, OUT sequence_mode text,
    OUT history interval, OUT false_positive_rate double precision)
AS 'MODULE_PATHNAME' LANGUAGE C STABLE;
COMMENT ON FUNCTION @extschema@.dedup_scope(text) IS
    'the effective settings of a scope: its own where set, the GUC defaults otherwise';

-- Per-scope call counters, kept in shared memory when dedup is preloaded
-- (scope_counters.c), for monitoring: one row per scope counted, of the current
-- database or of all.  dedup.scope_count is how the relay's PL/pgSQL
-- functions count the events they hand out, ack and nack.
CREATE OR REPLACE FUNCTION @extschema@.dedup_scope_stats(all_databases boolean DEFAULT false,
    OUT datname name, OUT scope text, OUT claims bigint, OUT duplicates bigint,
    OUT records_started bigint, OUT records_replayed bigint,
    OUT records_completed bigint, OUT records_released bigint,
    OUT events_put bigint, OUT events_taken bigint, OUT events_acked bigint,
    OUT events_nacked bigint)
RETURNS SETOF record
AS 'MODULE_PATHNAME' LANGUAGE C VOLATILE STRICT;
COMMENT ON FUNCTION @extschema@.dedup_scope_stats(boolean) IS
    'calls per scope since the server started, as answered (new claims, duplicates, records started/replayed/completed/released, events put/taken/acked/nacked): of this database, or of every database with all_databases';

CREATE OR REPLACE VIEW @extschema@.dedup_scope_stats AS
    SELECT s.datname, s.scope, s.claims, s.duplicates, s.records_started,
           s.records_replayed, s.records_completed, s.records_released,
           s.events_put, s.events_taken, s.events_acked, s.events_nacked
    FROM @extschema@.dedup_scope_stats(true) AS s;
COMMENT ON VIEW @extschema@.dedup_scope_stats IS
    'calls per database and scope since the server started (needs dedup in shared_preload_libraries)';

CREATE OR REPLACE FUNCTION dedup.scope_count(scope text, counter text, n bigint)
RETURNS void
AS 'MODULE_PATHNAME', 'dedup_scope_count_sql' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION dedup.scope_count(text, text, bigint) IS
    'add n to a counter of a scope (a column of dedup_scope_stats); for the relay''s functions';
REVOKE ALL ON FUNCTION dedup.scope_count(text, text, bigint) FROM PUBLIC;
