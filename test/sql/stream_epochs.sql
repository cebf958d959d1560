-- dedup_new_epoch_batch: one new epoch for many streams (a Kafka producer's
-- partitions), newer than each one's; and the mark is the last sequence
-- applied (a Kafka consumer seeks to mark + 1).
TRUNCATE dedup.streams;
\pset null '(null)'
SELECT dedup_advance('kafka', 'orders-0', 100, 2), dedup_advance('kafka', 'orders-1', 7, 5),
       dedup_advance('kafka', 'orders-2', 3);
-- one epoch, newer than the newest of them, for all; a stream never
-- advanced gets it too; a stream given twice counts once
SELECT dedup_new_epoch_batch('kafka', ARRAY['orders-0', 'orders-1', 'orders-2', 'orders-3', 'orders-1']) AS epoch;
SELECT stream, mark, epoch FROM dedup_streams('kafka') ORDER BY stream;
-- the old producers are fenced on every stream; the new one starts anywhere
SELECT regress_try($$SELECT dedup_advance('kafka', 'orders-0', 101, 2)$$);
SELECT regress_try($$SELECT dedup_advance('kafka', 'orders-1', 8, 5)$$);
SELECT regress_try($$SELECT dedup_advance('kafka', 'orders-2', 4)$$);
SELECT * FROM dedup_advance_batch('kafka', ARRAY['orders-0', 'orders-1'], ARRAY[0, 0], ARRAY[6, 6]);
-- the mark is the last offset applied: a consumer resumes at mark + 1
SELECT mark, mark + 1 AS next_to_read FROM dedup_position('kafka', 'orders-0');
-- epochs never go back: an expired stream counts too
UPDATE dedup.streams SET expires_at = clock_timestamp() - interval '1 second' WHERE stream = 'orders-1';
SELECT dedup_new_epoch_batch('kafka', ARRAY['orders-1']) AS epoch;
-- in one transaction, twice: each newer
BEGIN;
SELECT dedup_new_epoch_batch('kafka', ARRAY['orders-0', 'orders-1']) AS first,
       dedup_new_epoch_batch('kafka', ARRAY['orders-0', 'orders-1']) AS second;
COMMIT;
-- a rollback leaves every stream as it was
BEGIN;
SELECT dedup_new_epoch_batch('kafka', ARRAY['orders-0', 'orders-2']) IS NOT NULL AS taken;
ROLLBACK;
SELECT stream, mark, epoch FROM dedup_streams('kafka') ORDER BY stream;

-- bad input: its SQLSTATE, and nothing written
SELECT dedup_advance('kafka', 'orders-9', 1, 9223372036854775806);
CREATE TEMP TABLE before AS SELECT key, expires_at, epoch, mark FROM dedup.streams;
SELECT regress_try($$SELECT dedup_new_epoch_batch('kafka', NULL)$$);
SELECT regress_try($$SELECT dedup_new_epoch_batch('kafka', ARRAY[]::text[])$$);
SELECT regress_try($$SELECT dedup_new_epoch_batch('kafka', ARRAY['orders-0', NULL])$$);
SELECT regress_try($$SELECT dedup_new_epoch_batch('kafka', ARRAY['orders-0', ''])$$);
SELECT regress_try($$SELECT dedup_new_epoch_batch('kafka', ARRAY['orders-0', repeat('x', 201)])$$);
SELECT regress_try($$SELECT dedup_new_epoch_batch('kafka', ARRAY[['a'], ['b']])$$);
SELECT regress_try($$SELECT dedup_new_epoch_batch('', ARRAY['a'])$$);
SELECT regress_try($$SELECT dedup_new_epoch_batch('kafka', (SELECT array_agg('s-' || g) FROM generate_series(1, 100001) AS g))$$);
-- a stream at the largest epoch has no newer one to give: none is taken
SELECT regress_try($$SELECT dedup_new_epoch_batch('kafka', ARRAY['orders-0', 'orders-9'])$$);
SELECT (SELECT count(*) FROM (SELECT key, expires_at, epoch, mark FROM dedup.streams EXCEPT SELECT * FROM before) AS d)
     + (SELECT count(*) FROM (SELECT * FROM before EXCEPT SELECT key, expires_at, epoch, mark FROM dedup.streams) AS d) AS rows_changed;
DROP TABLE before;
TRUNCATE dedup.streams;
