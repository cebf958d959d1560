-------------------------------------------------------------------------
-- Cleanup of what has expired
-------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION @extschema@.dedup_cleanup_batch(
    "position" bigint DEFAULT 0, batch_size integer DEFAULT NULL,
    OUT deleted bigint, OUT next_position bigint)
AS 'MODULE_PATHNAME' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.dedup_cleanup_batch(bigint, integer) IS
    'one batch of cleanup in the current transaction: deletes up to batch_size expired rows from position on (0 starts a pass); next_position is where the next batch starts, NULL at the end of the pass';

-- A whole pass, one committed batch at a time, with dedup.cleanup_pause
-- between batches (cleanup.c).  No SECURITY DEFINER and no SET clause,
-- which would make every call atomic and forbid the commits.
CREATE OR REPLACE PROCEDURE @extschema@.dedup_cleanup(
    batch_size integer DEFAULT NULL, INOUT deleted bigint DEFAULT NULL)
AS 'MODULE_PATHNAME', 'dedup_cleanup_procedure' LANGUAGE C;
COMMENT ON PROCEDURE @extschema@.dedup_cleanup(integer, bigint) IS
    'delete everything that has expired, committing after each batch; returns the number of rows deleted';

-- The cleanup's figures, kept in shared memory when dedup is preloaded:
-- one row per kind of row, for the current database or for all.
CREATE OR REPLACE FUNCTION @extschema@.dedup_cleanup_stats(all_databases boolean DEFAULT false,
    OUT datname name, OUT kind text, OUT rows_deleted bigint,
    OUT rows_deleted_last_pass bigint, OUT last_pass_started_at timestamptz,
    OUT last_pass_duration interval, OUT batches bigint, OUT errors bigint,
    OUT cleanup_lag interval)
RETURNS SETOF record
AS 'MODULE_PATHNAME' LANGUAGE C VOLATILE STRICT;
COMMENT ON FUNCTION @extschema@.dedup_cleanup_stats(boolean) IS
    'cleanup figures per kind since the server started: of this database, or of every database with all_databases';

CREATE OR REPLACE VIEW @extschema@.dedup_cleanup_stats AS
    SELECT s.datname, s.kind, s.rows_deleted, s.rows_deleted_last_pass,
           s.last_pass_started_at, s.last_pass_duration, s.batches, s.errors,
           s.cleanup_lag
    FROM @extschema@.dedup_cleanup_stats(true) AS s;
COMMENT ON VIEW @extschema@.dedup_cleanup_stats IS
    'cleanup figures per database and kind since the server started (needs dedup in shared_preload_libraries)';

