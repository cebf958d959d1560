-- The node's counter of batch ids behind a topic's batch ids (a partition's
-- shard moved to a node whose counter is behind; a database copied without
-- its sequences): a topic's position and low mark are read from its newest
-- batch row, the one of greatest id, so a take sets the counter past the
-- topic's newest id first.  Before, it read them from the old row: an acked
-- event went out again, and the new batch was unseen below the low mark.
SELECT dedup_set_scope('ctr', lease => '1 hour') IS NOT NULL AS scoped;
-- (the counter as it was, for the tests after: set back at the end)
SELECT last_value AS ctr_value, is_called AS ctr_called FROM dedup.outbox_batch_ids \gset
SELECT setval('dedup.outbox_batch_ids', 5000) > 0 AS counter_set;
CREATE TEMP TABLE ctr_puts (key text, id uuid);
INSERT INTO ctr_puts SELECT 'k1', dedup_outbox_put('ctr', 'k1', '{}'::jsonb, aggregate_id => 'a');
SELECT dedup_outbox_ack_batch(batch_id) AS acked
FROM (SELECT DISTINCT batch_id FROM dedup_outbox_take_batch('ctr', 10)) AS t;
SELECT setval('dedup.outbox_batch_ids', 10) > 0 AS counter_behind;
INSERT INTO ctr_puts SELECT 'k2', dedup_outbox_put('ctr', 'k2', '{}'::jsonb, aggregate_id => 'a');
-- k2 alone goes out, under an id above the topic's newest
CREATE TEMP TABLE ctr_taken AS SELECT * FROM dedup_outbox_take_batch('ctr', 10);
SELECT p.key, t.attempts, t.batch_id > 5001 AS above
FROM ctr_taken AS t JOIN ctr_puts AS p ON p.id = t.id ORDER BY t.seq;
SELECT count(*) AS batches_out, bool_and(id = (SELECT max(batch_id) FROM ctr_taken)) AS that_one
FROM dedup.outbox_inflight WHERE topic = 'ctr';
SELECT dedup_outbox_ack_batch(batch_id) AS acked FROM (SELECT DISTINCT batch_id FROM ctr_taken) AS t;
-- and the 1.0 take, the counter behind again: nothing goes out again
SELECT setval('dedup.outbox_batch_ids', 10) > 0 AS counter_behind;
INSERT INTO ctr_puts SELECT 'k3', dedup_outbox_put('ctr', 'k3', '{}'::jsonb, aggregate_id => 'a');
SELECT p.key, t.attempts FROM dedup_outbox_take('ctr', 10) AS t JOIN ctr_puts AS p ON p.id = t.id;
SELECT dedup_outbox_ack(ARRAY(SELECT id FROM ctr_puts WHERE key = 'k3')) AS acked;
SELECT count(*) AS again FROM dedup_outbox_take_batch('ctr', 10);
-- a batch whose lease passed goes out again under an id above the newest
INSERT INTO ctr_puts SELECT 'k4', dedup_outbox_put('ctr', 'k4', '{}'::jsonb, aggregate_id => 'b');
SELECT count(*) AS taken FROM dedup_outbox_take_batch('ctr', 10);
UPDATE dedup.outbox_batches SET lease_until = now() - interval '1 second' WHERE topic = 'ctr';
SELECT setval('dedup.outbox_batch_ids', 10) > 0 AS counter_behind;
SELECT p.key, t.attempts, t.batch_id > (SELECT max(id) FROM dedup.outbox_batches WHERE topic = 'ctr' AND busy = false) AS above
FROM dedup_outbox_take_batch('ctr', 10) AS t JOIN ctr_puts AS p ON p.id = t.id;
SELECT count(dedup_outbox_ack_batch(id)) AS acked FROM dedup.outbox_inflight WHERE topic = 'ctr';
SELECT count(*) AS again FROM dedup_outbox_take_batch('ctr', 10);
-- the counter behind the ids of another topic of the partition: a take
-- draws above the partition's greatest id, not only its topic's newest
-- (before: 23505, the new batch's row under an id another topic's had)
SELECT dedup_set_scope('ctr2', lease => '1 hour') IS NOT NULL AS scoped;
INSERT INTO ctr_puts SELECT 'k5', dedup_outbox_put('ctr2', 'k5', '{}'::jsonb, aggregate_id => 'a');
INSERT INTO ctr_puts SELECT 'k6', dedup_outbox_put('ctr2', 'k6', '{}'::jsonb, aggregate_id => 'b');
INSERT INTO ctr_puts SELECT 'k7', dedup_outbox_put('ctr', 'k7', '{}'::jsonb, aggregate_id => 'c');
INSERT INTO ctr_puts SELECT 'k8', dedup_outbox_put('ctr', 'k8', '{}'::jsonb, aggregate_id => 'd');
SELECT setval('dedup.outbox_batch_ids', 9000) > 0 AS counter_set;
CREATE TEMP TABLE ctr2_taken AS SELECT * FROM dedup_outbox_take_batch('ctr2', 1);
SELECT setval('dedup.outbox_batch_ids', 8999) > 0 AS counter_behind;
CREATE TEMP TABLE ctr_taken2 AS SELECT * FROM dedup_outbox_take_batch('ctr', 1);
SELECT setval('dedup.outbox_batch_ids', 8999) > 0 AS counter_behind;
INSERT INTO ctr_taken2 SELECT * FROM dedup_outbox_take_batch('ctr', 1);
SELECT p.key, t.batch_id > 9001 AS above FROM ctr_taken2 AS t JOIN ctr_puts AS p ON p.id = t.id
ORDER BY t.seq;
SELECT p.key, t.batch_id = 9001 AS first FROM ctr2_taken AS t JOIN ctr_puts AS p ON p.id = t.id;
SELECT topic, count(*) AS rows, count(DISTINCT id) AS ids FROM dedup.outbox_batches
WHERE topic IN ('ctr', 'ctr2') AND id > 9000 GROUP BY topic ORDER BY topic;
SELECT count(dedup_outbox_ack_batch(id)) AS acked FROM dedup.outbox_inflight WHERE topic IN ('ctr', 'ctr2');
SELECT dedup_reset_scope('ctr2');
TRUNCATE dedup.outbox, dedup.outbox_topics, dedup.outbox_batches, dedup.outbox_retry, dedup.outbox_held,
         dedup.outbox_dead, dedup.outbox_keys;
SELECT setval('dedup.outbox_batch_ids', :ctr_value, :'ctr_called') > 0 AS counter_back;
SELECT dedup_reset_scope('ctr');
