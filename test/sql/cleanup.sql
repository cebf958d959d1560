-- dedup_cleanup_batch and the dedup_cleanup procedure: they delete exactly
-- the expired rows, in batches, and nothing that is live.

-- 300 live claims and 200 that have expired, interleaved in the heap
SELECT count(*) FROM dedup_claim_batch('cleanup', ARRAY(SELECT 'k-' || i FROM generate_series(1, 500) i));
UPDATE dedup.claims SET expires_at = clock_timestamp() - interval '1 minute'
WHERE key IN (SELECT c.key FROM dedup.claims c ORDER BY key LIMIT 200);
SELECT count(*) FILTER (WHERE expires_at <= clock_timestamp()) AS expired,
       count(*) FILTER (WHERE expires_at > clock_timestamp()) AS live
FROM dedup.claims;
CREATE TEMP TABLE live_before AS
  SELECT key FROM dedup.claims WHERE expires_at > clock_timestamp();

-- one batch of at most 50 rows: deletes 50, says where to go on
SELECT deleted, next_position IS NOT NULL AS more FROM dedup_cleanup_batch(0, 50);
SELECT count(*) AS expired_left FROM dedup.claims WHERE expires_at <= clock_timestamp();

-- the procedure commits after each batch: from a function (as inside a
-- transaction block, below) it is refused (2D000) before it runs a batch,
-- its hint naming the way to clean up inside a transaction; no row is
-- deleted and no failed batch is counted
SELECT sum(errors) AS errors_before FROM dedup_cleanup_stats() \gset
SELECT regress_try('CALL dedup_cleanup()') AS from_a_function;
SELECT count(*) AS expired_left FROM dedup.claims WHERE expires_at <= clock_timestamp();
SELECT sum(errors) - :errors_before AS errors_counted FROM dedup_cleanup_stats();

-- the procedure finishes the pass, a committed batch at a time
CALL dedup_cleanup(batch_size => 40);
SELECT count(*) AS expired_left FROM dedup.claims WHERE expires_at <= clock_timestamp();
-- every live claim is still there, and is still a duplicate
SELECT count(*) AS live_kept FROM dedup.claims JOIN live_before USING (key);
-- the 200 expired keys are new again, the 300 live ones duplicates
SELECT count(*) AS new_after_cleanup
FROM dedup_claim_batch('cleanup', ARRAY(SELECT 'k-' || i FROM generate_series(1, 500) i));
-- a second pass finds nothing
CALL dedup_cleanup();
-- without a batch_size, dedup.cleanup_batch_size applies
UPDATE dedup.claims SET expires_at = clock_timestamp() - interval '1 minute'
WHERE key IN (SELECT c.key FROM dedup.claims c ORDER BY key LIMIT 5);
SET dedup.cleanup_batch_size = 2;
SELECT deleted FROM dedup_cleanup_batch();
SET dedup.cleanup_pause = 0;
CALL dedup_cleanup();
RESET dedup.cleanup_batch_size;
RESET dedup.cleanup_pause;
-- past the end of dedup.claims: nothing deleted, the pass goes on with
-- dedup.outbox_keys (stage 1: position 2^32)
SELECT deleted, next_position FROM dedup_cleanup_batch(1000000, 10);

-- a batch rolled back deletes nothing
UPDATE dedup.claims SET expires_at = clock_timestamp() - interval '1 minute';
BEGIN;
SELECT deleted FROM dedup_cleanup_batch();
ROLLBACK;
SELECT count(*) AS still_there FROM dedup.claims;

-- a row claimed again in the cleaning transaction itself is live: kept
BEGIN;
SELECT dedup_claim('cleanup', 'k-1') AS reclaimed;
SELECT deleted FROM dedup_cleanup_batch();
COMMIT;
SELECT count(*) AS kept FROM dedup.claims;
SELECT dedup_claim('cleanup', 'k-1') AS still_claimed;

-- errors
SELECT stmt, regress_try(stmt) FROM (VALUES
  ($$SELECT * FROM dedup_cleanup_batch(0, 0)$$),
  ($$SELECT * FROM dedup_cleanup_batch(0, -5)$$),
  ($$SELECT * FROM dedup_cleanup_batch(0, 1000001)$$),
  ($$SELECT deleted FROM dedup_cleanup_batch(0, NULL)$$),
  ($$SELECT * FROM dedup_cleanup_batch(-1, 10)$$),
  ($$SELECT * FROM dedup_cleanup_batch(4294967295, 10)$$),
  ($$CALL dedup_cleanup(batch_size => 0)$$),
  ($$SET dedup.cleanup_batch_size = 0$$)) AS t(stmt);
-- (dedup.cleanup_pause out of its range: test/sql/setting_ranges.sql)
SELECT count(*) AS kept FROM dedup.claims;
-- the procedure commits, so it cannot run inside a transaction block (2D000)
BEGIN;
CALL dedup_cleanup();
ROLLBACK;
-- nor in a read-only transaction (25006)
BEGIN READ ONLY;
SELECT * FROM dedup_cleanup_batch();
ROLLBACK;
SELECT count(*) AS kept FROM dedup.claims;
-- nor in a subtransaction (a DO block with an EXCEPTION clause), which
-- cannot commit: refused (2D000) before its first batch, nothing deleted
SELECT count(*) FROM dedup_claim_batch('cleanup', ARRAY['s-1', 's-2', 's-3']);
UPDATE dedup.claims SET expires_at = clock_timestamp() - interval '1 minute';
SELECT count(*) AS expired_before FROM dedup.claims WHERE expires_at <= clock_timestamp();
DO $$
DECLARE
  d bigint;
BEGIN
  CALL dedup_cleanup(1, d);
EXCEPTION WHEN OTHERS THEN
  RAISE NOTICE 'sqlstate %: %', SQLSTATE, SQLERRM;
END
$$;
SELECT count(*) AS expired_after FROM dedup.claims WHERE expires_at <= clock_timestamp();


-- figures (the test server preloads dedup): what committed batches deleted,
-- per kind; a batch rolled back counts as an error and deletes nothing
TRUNCATE dedup.claims;
CREATE TEMP TABLE figures_before AS
  SELECT kind, rows_deleted, batches, errors FROM dedup_cleanup_stats();
SELECT count(*) FROM dedup_claim_batch('figures', ARRAY(SELECT 'f-' || i FROM generate_series(1, 7) i));
SELECT count(*) FROM generate_series(1, 3) i,
  LATERAL dedup_begin('figures', 'r-' || i) b, LATERAL dedup_complete('figures', 'r-' || i, 200, '{}') c;
SELECT (dedup_begin('figures', 'live')).outcome;
-- all but the processing record of 'live'
UPDATE dedup.claims SET expires_at = clock_timestamp() - interval '1 minute' WHERE (record).status IS DISTINCT FROM 'p';
SELECT clock_timestamp() AS before_pass \gset
CALL dedup_cleanup();
SELECT s.datname = current_database() AS this_db, kind,
       s.rows_deleted - b.rows_deleted AS deleted, s.rows_deleted_last_pass AS last_pass,
       s.batches > b.batches AS batches_counted, s.errors - b.errors AS errors,
       s.last_pass_started_at BETWEEN :'before_pass' AND clock_timestamp() AS last_pass_now,
       s.last_pass_duration < interval '1 minute' AS short,
       s.cleanup_lag BETWEEN interval '0' AND clock_timestamp() - :'before_pass' AS lag_since_pass
FROM dedup_cleanup_stats() s JOIN figures_before b USING (kind) ORDER BY kind;
-- rolled back: an error, and no deleted rows
UPDATE dedup.claims SET expires_at = clock_timestamp() - interval '1 minute';
BEGIN;
SELECT deleted FROM dedup_cleanup_batch();
ROLLBACK;
SELECT kind, s.rows_deleted - b.rows_deleted AS deleted, s.errors - b.errors AS errors
FROM dedup_cleanup_stats() s JOIN figures_before b USING (kind) ORDER BY kind;
SELECT count(*) AS still_there FROM dedup.claims;
-- a batch in a subtransaction that rolls back: an error, no deleted rows,
-- though the transaction commits; a batch after it counts
BEGIN;
SAVEPOINT s;
SELECT deleted FROM dedup_cleanup_batch();
ROLLBACK TO SAVEPOINT s;
SAVEPOINT t;
SELECT deleted FROM dedup_cleanup_batch(1000000, 10);
RELEASE SAVEPOINT t;
COMMIT;
SELECT kind, s.rows_deleted - b.rows_deleted AS deleted, s.errors - b.errors AS errors
FROM dedup_cleanup_stats() s JOIN figures_before b USING (kind) ORDER BY kind;
SELECT count(*) AS still_there FROM dedup.claims;
-- a transaction that ran a batch cannot be prepared (0A000): it rolls back
BEGIN;
SELECT deleted FROM dedup_cleanup_batch();
PREPARE TRANSACTION 'dedup_cleanup';
SELECT count(*) AS still_there FROM dedup.claims;
SELECT count(*) AS prepared FROM pg_prepared_xacts;
-- the view has the same rows for this database
SELECT count(*) AS view_rows FROM dedup_cleanup_stats v
  JOIN dedup_cleanup_stats() f USING (datname, kind, rows_deleted, errors);
-- monitoring roles may read the figures; PUBLIC may not
SELECT has_function_privilege('pg_monitor', 'dedup_cleanup_stats(boolean)', 'EXECUTE') AS monitor_fn,
       has_table_privilege('pg_monitor', 'dedup_cleanup_stats', 'SELECT') AS monitor_view,
       has_function_privilege('public', 'dedup_cleanup_stats(boolean)', 'EXECUTE') AS public_fn;
TRUNCATE dedup.claims;
