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
-- an empty stretch or past the end: nothing deleted, pass complete
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
  ($$SET dedup.cleanup_batch_size = 0$$),
  ($$SET dedup.cleanup_pause = '-1ms'$$),
  ($$SET dedup.cleanup_pause = '2min'$$)) AS t(stmt);
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

TRUNCATE dedup.claims;
