-- The transactional outbox: put, take, ack, nack, dead letters, redrive,
-- figures, the batch API, the cleanup of the log and of keys past
-- retention, and every error (with nothing changed).
TRUNCATE dedup.outbox, dedup.outbox_topics, dedup.outbox_batches, dedup.outbox_retry, dedup.outbox_held,
         dedup.outbox_dead, dedup.outbox_keys;
SELECT (dedup_set_scope('orders', lease => '1 minute', retention => '1 hour')).configured AS set;
-- the events a relay holds now, and those waiting in outbox_retry
CREATE TEMP VIEW in_flight AS
SELECT m.id, m.seq, m.aggregateid, m.attempts, m.payload->>'key' AS key
FROM dedup.outbox_inflight AS b, dedup.outbox_members(b.part, b.topic, b.first_seq, b.last_seq, b.settled, b.attempt, b.retried, b.id, b.extra) AS m;
-- each topic's position (its row in outbox_topics, or its newest batch
-- row's)
CREATE TEMP VIEW positions AS
SELECT x.part, x.topic, (dedup.outbox_position(x.part, x.topic)).next_seq FROM dedup.outbox_topics AS x;
CREATE TEMP VIEW retry AS
SELECT r.payload->>'key' AS key, r.aggregateid, r.attempts, r.batch IS NOT NULL AS in_batch,
       r.last_error, r.visible_at > now() AS delayed
FROM dedup.outbox_retry AS r;
-- the events held back behind an earlier one of their aggregate: one row
-- of outbox_held per aggregate, none per event
CREATE TEMP VIEW held_back AS
SELECT h.aggregateid, h.upto_seq >= h.from_seq AS ranged,
       string_agg(o.payload->>'key', ' ' ORDER BY o.seq) AS keys
FROM dedup.outbox_held AS h
JOIN dedup.outbox AS o ON o.topic = h.topic AND o.aggregateid = h.aggregateid
                      AND o.seq BETWEEN h.from_seq AND h.upto_seq
GROUP BY h.aggregateid, h.from_seq, h.upto_seq;

-- put: the same (topic, key) yields one event, whose id comes back either
-- way; the same key with another event (payload, aggregate, type,
-- headers) is refused, 22023, and writes nothing
BEGIN;
SELECT dedup_outbox_put('orders', 'o-1-created', '{"order": 1}', aggregate_id => '1') AS id1 \gset
SELECT dedup_outbox_put('orders', 'o-1-created', '{"order": 1}', aggregate_id => '1') = :'id1' AS same_id;
SELECT regress_try($$SELECT dedup_outbox_put('orders', 'o-1-created', '{"order": 1, "retry": true}', aggregate_id => '1')$$);
COMMIT;
SELECT dedup_outbox_put('orders', 'o-1-created', '{"order": 1}', aggregate_id => '1') = :'id1' AS same_id_later;
SELECT count(*) AS events FROM dedup.outbox;
-- the id is a version 8 UUID; another topic with the same key is another event
SELECT substr(:'id1', 15, 1) AS version, substr(:'id1', 20, 1) IN ('8', '9', 'a', 'b') AS variant;
SELECT dedup_outbox_put('invoices', 'o-1-created', '{}') <> :'id1' AS other_topic;
-- Debezium's columns, with their defaults: aggregatetype and type the topic,
-- aggregateid the key, headers {}; the log is in seq order
SELECT dedup_outbox_put('orders', 'o-2-created', '{"order": 2}') IS NOT NULL AS put;
SELECT dedup_outbox_put('orders', 'o-2-paid', '{"order": 2}', aggregate_id => '2', type => 'OrderPaid',
                        headers => '{"trace": "t-1"}', aggregate_type => 'Order') IS NOT NULL AS put;
SELECT aggregatetype, aggregateid, type, payload, headers
FROM dedup.outbox WHERE topic = 'orders' ORDER BY seq;
-- a rolled-back put leaves nothing, and the key is free again
BEGIN;
SELECT dedup_outbox_put('orders', 'o-3-created', '{"order": 3}') IS NOT NULL AS put;
ROLLBACK;
SELECT count(*) AS events_after_rollback FROM dedup.outbox WHERE topic = 'orders';
SELECT dedup_outbox_put('orders', 'o-3-created', '{"order": 3}') IS NOT NULL AS put_again;
SELECT count(*) AS events FROM dedup.outbox WHERE payload = '{"order": 3}';
-- a transaction whose put inserted an event cannot be prepared (0A000,
-- nothing written), whether or not a session listens on dedup_outbox; one
-- whose put was rolled back to a savepoint, or found its event there, can
\set VERBOSITY sqlstate
BEGIN;
SELECT dedup_outbox_put('orders', 'o-prepared', '{}') IS NOT NULL AS put;
PREPARE TRANSACTION 'dedup_put';
BEGIN;
SAVEPOINT s;
SELECT dedup_outbox_put('orders', 'o-prepared', '{}') IS NOT NULL AS put;
RELEASE SAVEPOINT s;
PREPARE TRANSACTION 'dedup_put';
LISTEN dedup_outbox;
BEGIN;
SELECT dedup_outbox_put('orders', 'o-prepared', '{}') IS NOT NULL AS put;
PREPARE TRANSACTION 'dedup_put';
UNLISTEN dedup_outbox;
\set VERBOSITY default
BEGIN;
SELECT dedup_outbox_put('orders', 'o-prepared', '{}') IS NOT NULL AS put;
PREPARE TRANSACTION 'dedup_put';
SELECT count(*) AS prepared FROM pg_prepared_xacts WHERE gid = 'dedup_put';
BEGIN;
SAVEPOINT s;
SELECT dedup_outbox_put('orders', 'o-prepared', '{}') IS NOT NULL AS put;
ROLLBACK TO SAVEPOINT s;
SELECT dedup_outbox_put('orders', 'o-2-created', '{"order": 2}') IS NOT NULL AS put_found;
PREPARE TRANSACTION 'dedup_put';
COMMIT PREPARED 'dedup_put';
SELECT count(*) AS events FROM dedup.outbox WHERE aggregateid = 'o-prepared';
-- a key put by dedup 1.0 is kept in dedup.outbox_keys until its retention
-- passes (a database created at 1.1 never has one there): a put finds it
BEGIN;
SELECT dedup_outbox_put('orders', 'from-1.0', '{}') AS legacy \gset
ROLLBACK;
INSERT INTO dedup.outbox_keys (key, expires_at)
VALUES (replace(:'legacy', '-', '')::dedup_fingerprint, now() + interval '1 hour');
SELECT dedup_outbox_put('orders', 'from-1.0', '{}') = :'legacy' AS same_id;
SELECT count(*) AS events FROM dedup.outbox WHERE aggregateid = 'from-1.0';
UPDATE dedup.outbox_keys SET expires_at = now() - interval '1 second';
SELECT dedup_outbox_put('orders', 'from-1.0', '{}') = :'legacy' AS same_id;
SELECT count(*) AS events_once_expired FROM dedup.outbox WHERE aggregateid = 'from-1.0';
DELETE FROM dedup.outbox_keys;

-- a consumer claims a message and publishes its follow-up event in one
-- transaction: both or neither
BEGIN;
SELECT dedup_claim('payments-consumer', 'msg-7') AS claimed,
       dedup_outbox_put('orders', 'msg-7-paid', '{"paid": 7}') IS NOT NULL AS put;
ROLLBACK;
SELECT dedup_claim('payments-consumer', 'msg-7') AS claimed_again,
       (SELECT count(*) FROM dedup.outbox WHERE payload = '{"paid": 7}') AS events_after_rollback;
TRUNCATE dedup.claims;

-- take: with the topic's lease; within an aggregate, one at a time, in
-- order: A's later events wait in outbox_retry, held back
TRUNCATE dedup.outbox, dedup.outbox_keys;
SELECT count(*) FROM (VALUES ('a-1', 'A'), ('a-2', 'A'), ('b-1', 'B'), ('a-3', 'A'), ('c-1', 'C')) AS v(k, agg),
  LATERAL dedup_outbox_put('orders', k, jsonb_build_object('key', k), aggregate_id => agg) AS p;
SELECT payload->>'key' AS key, aggregateid, attempts,
       lease_expires_at - clock_timestamp() BETWEEN interval '59 seconds' AND interval '1 minute' AS topic_lease
FROM dedup_outbox_take('orders', 10);
SELECT * FROM retry ORDER BY key;
SELECT * FROM held_back ORDER BY aggregateid;
-- everything handed out is in flight; A's next waits for A's first
SELECT payload->>'key' AS key FROM dedup_outbox_take('orders', 10);
SELECT topic, pending, in_flight, dead, oldest_pending_age >= interval '0' AS aged FROM dedup_outbox_stats('orders');
-- ack A's first (by id): A's second comes next, and only it
SELECT dedup_outbox_ack(ARRAY(SELECT id FROM in_flight WHERE key = 'a-1')) AS acked;
SELECT payload->>'key' AS key, attempts FROM dedup_outbox_take('orders', 10);
-- an acked event never comes back; acking it again is no error (0 acked)
SELECT dedup_outbox_ack(ARRAY[dedup_outbox_put('orders', 'a-1', '{"key": "a-1"}', aggregate_id => 'A')]) AS acked_again;
SELECT count(*) AS a1_in_flight FROM in_flight WHERE key = 'a-1';

-- nack: back at once, or after a delay, with the error kept
SELECT dedup_outbox_nack(ARRAY(SELECT id FROM in_flight WHERE key = 'b-1'),
                         error => 'broker down') AS nacked;
SELECT payload->>'key' AS key, attempts FROM dedup_outbox_take('orders', 10);
SELECT dedup_outbox_nack(ARRAY(SELECT id FROM in_flight WHERE key = 'b-1'),
                         retry_delay => '1 hour') AS nacked;
SELECT payload->>'key' AS key FROM dedup_outbox_take('orders', 10);
SELECT * FROM retry WHERE key = 'b-1';

-- a lease that passes: the batch comes back whole, attempts counted
UPDATE dedup.outbox_batches SET lease_until = now() - interval '1 second'
WHERE busy AND EXISTS (SELECT FROM dedup.outbox_members(outbox_batches.part, outbox_batches.topic, outbox_batches.first_seq, outbox_batches.last_seq, outbox_batches.settled, outbox_batches.attempt, outbox_batches.retried, outbox_batches.id, outbox_batches.extra) AS m WHERE m.payload->>'key' = 'c-1');
SELECT payload->>'key' AS key, attempts FROM dedup_outbox_take('orders', 10) ORDER BY 1;

-- dead letters: handed out the topic's max_attempts times, then dead
SELECT max_attempts FROM dedup_set_scope('orders', max_attempts => 2);
SELECT dedup_outbox_nack(ARRAY(SELECT id FROM in_flight WHERE key = 'c-1'),
                         error => 'poison') AS nacked;
SELECT count(*) AS c1_dead, min(attempts) AS attempts, min(last_error) AS last_error
FROM dedup.outbox_dead WHERE aggregateid = 'C';
SELECT topic, pending, in_flight, dead, oldest_pending_age >= interval '0' AS aged FROM dedup_outbox_stats('orders');
-- redrive: back in the outbox, in its place, with no attempts
SELECT dedup_outbox_redrive('orders') AS redriven;
SELECT payload->>'key' AS key, attempts FROM dedup_outbox_take('orders', 10);
SELECT max_attempts FROM dedup_set_scope('orders', max_attempts => 10);
SELECT stmt, regress_try(stmt) FROM (VALUES
  ($$SELECT dedup_set_scope('orders', max_attempts => 0)$$)) AS t(stmt);
-- without a setting of its own, a topic uses dedup.outbox_max_attempts
SET dedup.outbox_max_attempts = 3;
SELECT max_attempts, configured FROM dedup_scope('unset-topic');
RESET dedup.outbox_max_attempts;

-- a late relay: its lease passed and another relay took the event again.
-- With the attempt take gave it, its nack and its ack leave the event to
-- the relay that holds it now (0 acted on); that relay's ack counts.
TRUNCATE dedup.outbox, dedup.outbox_topics, dedup.outbox_batches, dedup.outbox_retry, dedup.outbox_held,
         dedup.outbox_dead, dedup.outbox_keys;
SELECT dedup_outbox_put('orders', 'late-1', '{}') AS late1 \gset
SELECT attempts AS relay1 FROM dedup_outbox_take('orders', 10);
UPDATE dedup.outbox_batches SET lease_until = now() - interval '1 second';
SELECT attempts AS relay2 FROM dedup_outbox_take('orders', 10);
SELECT dedup_outbox_nack(ARRAY[:'late1'::uuid], attempts => ARRAY[1]) AS late_nack,
       dedup_outbox_ack(ARRAY[:'late1'::uuid], attempts => ARRAY[1]) AS late_ack;
SELECT attempt, lease_until > now() AS still_leased FROM dedup.outbox_inflight;
SELECT dedup_outbox_ack(ARRAY[:'late1'::uuid], attempts => ARRAY[2]) AS holder_ack;
-- without attempts, a late ack counts: the event was published
SELECT dedup_outbox_put('orders', 'late-2', '{}') AS late2 \gset
SELECT count(*) FROM dedup_outbox_take('orders', 10);
UPDATE dedup.outbox_batches SET lease_until = now() - interval '1 second';
SELECT count(*) FROM dedup_outbox_take('orders', 10);
SELECT dedup_outbox_ack(ARRAY[:'late2'::uuid]) AS late_ack;
-- an event dead-lettered while its relay was still publishing: its ack
-- takes it out of the dead letters (it was published)
SELECT max_attempts FROM dedup_set_scope('orders', max_attempts => 1);
SELECT dedup_outbox_put('orders', 'late-3', '{}') AS late3 \gset
SELECT count(*) FROM dedup_outbox_take('orders', 10);
UPDATE dedup.outbox_batches SET lease_until = now() - interval '1 second';
SELECT count(*) AS taken_again FROM dedup_outbox_take('orders', 10);
SELECT count(*) AS dead FROM dedup.outbox_dead;
SELECT dedup_outbox_ack(ARRAY[:'late3'::uuid]) AS late_ack;
SELECT count(*) AS dead_after_ack FROM dedup.outbox_dead;
-- a redriven event never goes out while a later one of its aggregate is in
-- flight: it waits, then goes first
SELECT count(*) FROM (VALUES ('m-1'), ('m-2')) AS v(k),
  LATERAL dedup_outbox_put('orders', k, jsonb_build_object('key', k), aggregate_id => 'M') AS p;
SELECT payload->>'key' AS key FROM dedup_outbox_take('orders', 10);
SELECT dedup_outbox_nack(ARRAY(SELECT id FROM in_flight)) AS nacked_to_dead;
SELECT payload->>'key' AS key FROM dedup_outbox_take('orders', 10);
SELECT dedup_outbox_redrive('orders') AS redriven;
SELECT count(*) AS while_m2_in_flight FROM dedup_outbox_take('orders', 10);
SELECT dedup_outbox_ack(ARRAY(SELECT id FROM in_flight)) AS acked_m2;
SELECT payload->>'key' AS key FROM dedup_outbox_take('orders', 10);
SELECT max_attempts FROM dedup_set_scope('orders', max_attempts => 10);
-- a key used again after its event went dead and left the log makes no
-- second event of that id; with another event it is refused
INSERT INTO dedup.outbox_dead (part, seq, id, topic, aggregatetype, aggregateid, type, payload,
                               headers, created_at, attempts)
  SELECT '00000000000000000000000000000000', 1, dedup_outbox_put('dead-topic', 'zombie', '{}'),
         'dead-topic', 'dead-topic', 'zombie', 'dead-topic', '{}', '{}', now(), 1;
DELETE FROM dedup.outbox WHERE topic = 'dead-topic';
SELECT dedup_outbox_put('dead-topic', 'zombie', '{}') IS NOT NULL AS put,
       (SELECT count(*) FROM dedup.outbox WHERE topic = 'dead-topic') AS in_outbox,
       (SELECT count(*) FROM dedup.outbox_dead WHERE topic = 'dead-topic') AS dead;
SELECT regress_try($$SELECT dedup_outbox_put('dead-topic', 'zombie', '{}', type => 'Other')$$);
SELECT (SELECT count(*) FROM dedup.outbox WHERE topic = 'dead-topic') AS in_outbox,
       (SELECT count(*) FROM dedup.outbox_dead WHERE topic = 'dead-topic') AS dead;

-- the batch API: take a batch (one id for all its events), ack it whole
TRUNCATE dedup.outbox, dedup.outbox_topics, dedup.outbox_batches, dedup.outbox_retry, dedup.outbox_held,
         dedup.outbox_dead, dedup.outbox_keys;
SELECT count(*) FROM generate_series(1, 6) AS i,
  LATERAL dedup_outbox_put('orders', 'k-' || i, jsonb_build_object('key', 'k-' || i),
                           aggregate_id => 'agg-' || (i % 3)) AS p;
CREATE TEMP TABLE batch1 AS SELECT * FROM dedup_outbox_take_batch('orders', 2);
SELECT count(DISTINCT batch_id) AS batches, count(*) AS events,
       string_agg(payload->>'key', ' ' ORDER BY payload->>'key') AS keys FROM batch1;
-- a second relay takes the next batch meanwhile: other events, another id
CREATE TEMP TABLE batch2 AS SELECT * FROM dedup_outbox_take_batch('orders', 10);
SELECT count(DISTINCT batch_id) AS batches, (SELECT batch_id FROM batch1 LIMIT 1) <> min(batch_id) AS other_id,
       string_agg(payload->>'key', ' ' ORDER BY payload->>'key') AS keys FROM batch2;
SELECT dedup_outbox_ack_batch((SELECT batch_id FROM batch1 LIMIT 1)) AS acked;
SELECT dedup_outbox_ack_batch((SELECT batch_id FROM batch1 LIMIT 1)) AS acked_again;
-- ack with failures: the others are published, the failed one comes back
-- after retry_delay with the error; its aggregate waits, the others go on
SELECT dedup_outbox_ack_batch((SELECT batch_id FROM batch2 LIMIT 1),
                              failed => ARRAY(SELECT id FROM batch2 WHERE payload->>'key' = 'k-3'),
                              retry_delay => '1 hour', error => 'timeout') AS acked;
SELECT * FROM retry ORDER BY key;
CREATE TEMP TABLE batch3 AS SELECT * FROM dedup_outbox_take_batch('orders', 10);
SELECT payload->>'key' AS key, aggregateid, attempts FROM batch3 ORDER BY 1;
SELECT topic, pending, in_flight, dead FROM dedup_outbox_stats('orders');
-- nack of a batch: all of it back at once
SELECT dedup_outbox_nack_batch((SELECT batch_id FROM batch3 LIMIT 1), error => 'down') AS nacked;
SELECT * FROM retry ORDER BY key;
CREATE TEMP TABLE batch4 AS SELECT * FROM dedup_outbox_take_batch('orders', 10);
SELECT payload->>'key' AS key, attempts FROM batch4 ORDER BY 1;
-- its lease passing: the batch, whole, again, under a new id; the relay
-- that held it before acks and nacks nothing by its old id
UPDATE dedup.outbox_batches SET lease_until = now() - interval '1 second' WHERE busy;
CREATE TEMP TABLE batch5 AS SELECT * FROM dedup_outbox_take_batch('orders', 10);
SELECT payload->>'key' AS key, attempts, batch_id <> (SELECT batch_id FROM batch4 LIMIT 1) AS new_id,
       lease_expires_at > now() AS leased
FROM batch5 ORDER BY 1;
SELECT dedup_outbox_nack_batch((SELECT batch_id FROM batch4 LIMIT 1)) AS late_nack,
       dedup_outbox_ack_batch((SELECT batch_id FROM batch4 LIMIT 1)) AS late_ack;
SELECT dedup_outbox_ack_batch((SELECT batch_id FROM batch5 LIMIT 1)) AS acked;
SELECT count(*) AS in_retry FROM retry WHERE key IN ('k-4', 'k-5');
-- a take in a rolled-back transaction hands nothing out
BEGIN;
SELECT dedup_outbox_put('orders', 'k-7', '{"key": "k-7"}') IS NOT NULL AS put;
COMMIT;
BEGIN;
SELECT count(*) AS taken FROM dedup_outbox_take_batch('orders', 10);
ROLLBACK;
SELECT payload->>'key' AS key, attempts FROM dedup_outbox_take_batch('orders', 10);
-- a take cannot run in a repeatable read or serializable transaction
-- (0A000), even with nothing to hand out
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT regress_try($$SELECT count(*) FROM dedup_outbox_take_batch('orders', 10)$$);
ROLLBACK;
BEGIN ISOLATION LEVEL SERIALIZABLE;
SELECT regress_try($$SELECT count(*) FROM dedup_outbox_take('orders', 10)$$);
ROLLBACK;

-- a hot aggregate (1.1's take_batch): a batch holds consecutive events of
-- one aggregate, in seq order, each with its seq; a failed event sends the
-- later ones of its aggregate in the batch back with it (attempts as
-- before), never another aggregate's; events behind a busy batch of their
-- aggregate wait in one row of outbox_held, none in outbox_retry
TRUNCATE dedup.outbox, dedup.outbox_topics, dedup.outbox_batches, dedup.outbox_retry, dedup.outbox_held,
         dedup.outbox_dead, dedup.outbox_keys;
SELECT count(*) FROM generate_series(1, 8) AS i,
  LATERAL dedup_outbox_put('orders', 'h-' || i, jsonb_build_object('key', 'h-' || i),
                           aggregate_id => CASE WHEN i = 7 THEN 'cold' ELSE 'hot' END) AS p;
CREATE TEMP TABLE hot1 AS SELECT * FROM dedup_outbox_take_batch('orders', 5);
SELECT string_agg(payload->>'key', ' ' ORDER BY seq) AS keys, count(DISTINCT batch_id) AS batches,
       bool_and(seq = (SELECT o.seq FROM dedup.outbox AS o WHERE o.id = hot1.id)) AS seqs_of_log
FROM hot1;
-- a second relay: hot's h-6 and h-8 are held (one row, no event in
-- outbox_retry); cold's h-7 is free
CREATE TEMP TABLE hot2 AS SELECT * FROM dedup_outbox_take_batch('orders', 5);
SELECT string_agg(payload->>'key', ' ' ORDER BY seq) AS keys FROM hot2;
SELECT * FROM held_back ORDER BY aggregateid;
SELECT count(*) AS in_retry FROM dedup.outbox_retry;
SELECT topic, pending, in_flight FROM dedup_outbox_stats('orders');
-- a held event was never handed out: acking it by id is 55000
SELECT regress_try($$SELECT dedup_outbox_ack(ARRAY[dedup_outbox_put('orders', 'h-8', '{"key": "h-8"}', aggregate_id => 'hot')])$$);
-- h-2 fails: h-3, h-4 and h-5 go back with it (hot's later events in the
-- batch, attempts as before), h-1 is published
SELECT dedup_outbox_ack_batch((SELECT batch_id FROM hot1 LIMIT 1),
                              failed => ARRAY(SELECT id FROM hot1 WHERE payload->>'key' = 'h-2'),
                              error => 'refused') AS acked;
SELECT * FROM retry ORDER BY key;
SELECT dedup_outbox_ack_batch((SELECT batch_id FROM hot2 LIMIT 1)) AS acked;
-- hot's events go out again, in order: the four back, then the two held
SELECT payload->>'key' AS key, attempts FROM dedup_outbox_take_batch('orders', 10) ORDER BY seq;
SELECT count(*) AS held_rows FROM dedup.outbox_held;
SELECT dedup_outbox_ack_batch(max(batch_id)) AS acked FROM dedup.outbox_inflight AS b,
  LATERAL (SELECT b.id AS batch_id) AS x;
SELECT topic, pending, in_flight, dead FROM dedup_outbox_stats('orders');
-- the 1.0 take keeps one event of an aggregate a batch
SELECT count(*) FROM generate_series(9, 11) AS i,
  LATERAL dedup_outbox_put('orders', 'h-' || i, jsonb_build_object('key', 'h-' || i), aggregate_id => 'hot') AS p;
SELECT payload->>'key' AS key FROM dedup_outbox_take('orders', 10);
SELECT * FROM held_back ORDER BY aggregateid;

-- the put writes the log directly (heap and indexes, no SPI), as an
-- INSERT would: the defaults of the columns, a large payload (TOASTed)
-- read back whole, the indexes found by both keys; a trigger on the log
-- (which the direct write does not know) sends the put through SPI, and
-- the trigger fires; the rows the two write are alike
TRUNCATE dedup.outbox, dedup.outbox_topics, dedup.outbox_batches, dedup.outbox_retry, dedup.outbox_held,
         dedup.outbox_dead, dedup.outbox_keys;
SELECT dedup_outbox_put('orders', 'direct-1', jsonb_build_object('big', repeat('x', 100000))) AS direct1 \gset
CREATE TEMP TABLE fired (id uuid);
CREATE FUNCTION pg_temp.outbox_fired() RETURNS trigger LANGUAGE plpgsql AS
$$BEGIN INSERT INTO fired VALUES (NEW.id); RETURN NEW; END$$;
CREATE TRIGGER regress_fired AFTER INSERT ON dedup.outbox FOR EACH ROW EXECUTE FUNCTION pg_temp.outbox_fired();
SELECT dedup_outbox_put('orders', 'spi-1', jsonb_build_object('big', repeat('x', 100000))) AS spi1 \gset
DROP TRIGGER regress_fired ON dedup.outbox;
SELECT count(*) AS fired, bool_and(id = :'spi1') AS for_spi1 FROM fired;
SELECT key, o.id = k.id AS id_found, o.topic, o.aggregatetype, o.aggregateid, o.type,
       length(o.payload->>'big') AS payload_len, o.headers, o.created_at BETWEEN now() - interval '1 minute' AND now() AS created_now,
       o.part = '00000000000000000000000000000000' AS part_0,
       (SELECT x.id FROM dedup.outbox AS x WHERE x.topic = o.topic AND x.seq = o.seq) = o.id AS by_seq
FROM (VALUES ('direct-1', :'direct1'::uuid), ('spi-1', :'spi1'::uuid)) AS k(key, id)
JOIN dedup.outbox AS o ON o.id = k.id ORDER BY o.seq;
SELECT (SELECT seq FROM dedup.outbox WHERE id = :'spi1') > (SELECT seq FROM dedup.outbox WHERE id = :'direct1') AS in_order,
       dedup_outbox_put('orders', 'direct-1', jsonb_build_object('big', repeat('x', 100000))) = :'direct1' AS same_id,
       count(*) AS events
FROM dedup.outbox;
-- two puts of one key in one statement: one event
SELECT count(DISTINCT p) AS ids FROM generate_series(1, 2) AS i, LATERAL dedup_outbox_put('orders', 'direct-2', '{}') AS p;
SELECT count(*) AS events FROM dedup.outbox WHERE aggregateid = 'direct-2';

-- errors, and nothing changed by them
TRUNCATE dedup.outbox, dedup.outbox_topics, dedup.outbox_batches, dedup.outbox_retry, dedup.outbox_held,
         dedup.outbox_dead, dedup.outbox_keys;
SELECT dedup_outbox_put('orders', 'err-taken', '{}') IS NOT NULL AS put,
       dedup_outbox_put('orders', 'err-pending', '{}') IS NOT NULL AS put;
SELECT count(*) AS taken FROM dedup_outbox_take('orders', 1);
CREATE TEMP TABLE outbox_before AS
SELECT (SELECT md5(string_agg(o::text, '|' ORDER BY o::text)) FROM dedup.outbox AS o) AS log,
       (SELECT md5(string_agg(b::text, '|' ORDER BY b::text)) FROM dedup.outbox_batches AS b) AS batches,
       (SELECT md5(string_agg(t::text, '|' ORDER BY t::text)) FROM dedup.outbox_topics AS t) AS topics,
       (SELECT count(*) FROM dedup.outbox_retry) AS retry;
SELECT stmt, regress_try(stmt) FROM (VALUES
  ($$SELECT dedup_outbox_put(NULL, 'k', '{}')$$),
  ($$SELECT dedup_outbox_put('', 'k', '{}')$$),
  ($$SELECT dedup_outbox_put(repeat('t', 201), 'k', '{}')$$),
  ($$SELECT dedup_outbox_put('orders', NULL, '{}')$$),
  ($$SELECT dedup_outbox_put('orders', '', '{}')$$),
  ($$SELECT dedup_outbox_put('orders', 'k', NULL)$$),
  ($$SELECT dedup_outbox_put('orders', 'k', '{}', aggregate_id => '')$$),
  ($$SELECT dedup_outbox_put('orders', 'k', '{}', type => '')$$),
  ($$SELECT dedup_outbox_put('orders', 'k', '{}', headers => '[1]')$$),
  ($$SELECT * FROM dedup_outbox_take('orders', 0)$$),
  ($$SELECT * FROM dedup_outbox_take('orders', 10001)$$),
  ($$SELECT * FROM dedup_outbox_take(NULL, 10)$$),
  ($$SELECT * FROM dedup_outbox_take_batch('orders', 0)$$),
  ($$SELECT * FROM dedup_outbox_take_batch(NULL)$$),
  ($$SELECT dedup_outbox_ack(NULL)$$),
  ($$SELECT dedup_outbox_ack(ARRAY[NULL]::uuid[])$$),
  ($$SELECT dedup_outbox_ack(ARRAY['00000000-0000-8000-8000-000000000000'::uuid])$$),
  ($$SELECT dedup_outbox_ack(ARRAY(SELECT id FROM in_flight), attempts => ARRAY[1, 2])$$),
  ($$SELECT dedup_outbox_ack(ARRAY(SELECT id FROM in_flight), attempts => ARRAY[NULL]::int[])$$),
  ($$SELECT dedup_outbox_nack(ARRAY(SELECT id FROM in_flight), '-1 second')$$),
  ($$SELECT dedup_outbox_nack(ARRAY(SELECT id FROM in_flight), NULL)$$),
  ($$SELECT dedup_outbox_ack_batch(NULL)$$),
  ($$SELECT dedup_outbox_ack_batch((SELECT id FROM dedup.outbox_batches), ARRAY[NULL]::uuid[])$$),
  ($$SELECT dedup_outbox_ack_batch((SELECT id FROM dedup.outbox_batches), ARRAY(SELECT id FROM in_flight), '-1 second')$$),
  ($$SELECT dedup_outbox_ack_batch((SELECT id FROM dedup.outbox_batches), retry_delay => NULL)$$),
  ($$SELECT dedup_outbox_nack_batch(NULL)$$),
  ($$SELECT dedup_outbox_nack_batch((SELECT id FROM dedup.outbox_batches), '-1 second')$$),
  ($$SELECT dedup_outbox_redrive(NULL)$$)) AS t(stmt);
SELECT (SELECT md5(string_agg(o::text, '|' ORDER BY o::text)) FROM dedup.outbox AS o) = log AS log_same,
       (SELECT md5(string_agg(b::text, '|' ORDER BY b::text)) FROM dedup.outbox_batches AS b) = batches AS batches_same,
       (SELECT md5(string_agg(t::text, '|' ORDER BY t::text)) FROM dedup.outbox_topics AS t) = topics AS topics_same,
       (SELECT count(*) FROM dedup.outbox_retry) = retry AS retry_same
FROM outbox_before;
-- an ack of an event not handed out yet is 55000; of a batch not handed
-- out, 0
SELECT regress_try($$SELECT dedup_outbox_ack(ARRAY[dedup_outbox_put('orders', 'err-pending', '{}')])$$) AS ack_pending,
       regress_try($$SELECT dedup_outbox_nack(ARRAY[dedup_outbox_put('orders', 'err-pending', '{}')])$$) AS nack_pending,
       dedup_outbox_ack_batch(12345) AS acked_unknown_batch;
SELECT count(*) AS events FROM dedup.outbox;
-- a read-only transaction cannot put (25006)
BEGIN READ ONLY;
SELECT dedup_outbox_put('orders', 'ro', '{}');
ROLLBACK;
SELECT count(*) AS ro_events FROM dedup.outbox WHERE aggregateid = 'ro';

-- the cleanup (kind outbox): published events leave the log once their
-- topic's retention passed; those not yet published or in flight stay,
-- and so do published ones within retention, whose keys they hold
CREATE TEMP TABLE outbox_figures AS SELECT rows_deleted FROM dedup_cleanup_stats() WHERE kind = 'outbox';
SELECT dedup_outbox_put('orders', 'late-put', '{}') IS NOT NULL AS put;
SELECT dedup_outbox_ack(ARRAY(SELECT id FROM in_flight)) AS acked;
SELECT count(*) AS in_flight FROM dedup_outbox_take('orders', 1);
SELECT dedup_outbox_put('orders', 'recent', '{}') IS NOT NULL AS put;
SELECT dedup_outbox_ack_batch(max(batch_id)) AS acked FROM dedup_outbox_take_batch('orders', 1);
UPDATE dedup.outbox SET created_at = now() - interval '2 hours' WHERE aggregateid <> 'recent';
SELECT aggregateid, created_at < now() - interval '1 hour' AS past_retention FROM dedup.outbox ORDER BY seq;
SELECT count(*) AS log_before FROM dedup.outbox;
CALL dedup_cleanup();
SELECT aggregateid FROM dedup.outbox ORDER BY seq;
SELECT s.rows_deleted - f.rows_deleted AS outbox_rows_deleted
FROM dedup_cleanup_stats() s, outbox_figures f WHERE s.kind = 'outbox';
SELECT topic, pending, in_flight, dead FROM dedup_outbox_stats('orders');
-- the trimmed event's key makes a new event, of any payload; the kept
-- one's does not, and refuses another payload
SELECT dedup_outbox_put('orders', 'err-taken', '{"again": true}') = dedup_outbox_put('orders', 'err-taken', '{"again": true}') AS same_id,
       dedup_outbox_put('orders', 'recent', '{}') IS NOT NULL AS put;
SELECT regress_try($$SELECT dedup_outbox_put('orders', 'recent', '{"again": true}')$$);
SELECT aggregateid, payload FROM dedup.outbox WHERE aggregateid IN ('err-taken', 'recent') ORDER BY seq;

-- privileges: producers get put through dedup_grant_usage, relays get
-- take/ack/nack/stats through dedup_grant_relay; redrive stays with the owner
CREATE ROLE regress_dedup_producer;
CREATE ROLE regress_dedup_relay;
SELECT dedup_grant_usage('regress_dedup_producer');
SELECT dedup_grant_relay('regress_dedup_relay');
SELECT r AS role,
       has_function_privilege(r, 'dedup_outbox_put(text, text, jsonb, text, text, jsonb, text)', 'EXECUTE') AS put,
       has_function_privilege(r, 'dedup_outbox_take(text, integer)', 'EXECUTE') AS take,
       has_function_privilege(r, 'dedup_outbox_take_batch(text, integer, interval, interval)', 'EXECUTE') AS take_batch,
       has_function_privilege(r, 'dedup_outbox_extend_batch(bigint, interval)', 'EXECUTE') AS extend_batch,
       has_function_privilege(r, 'dedup_outbox_dead(text, integer)', 'EXECUTE') AS dead,
       has_function_privilege(r, 'dedup_outbox_ack(uuid[], integer[])', 'EXECUTE') AS ack,
       has_function_privilege(r, 'dedup_outbox_ack_batch(bigint, uuid[], interval, text)', 'EXECUTE') AS ack_batch,
       has_function_privilege(r, 'dedup_outbox_redrive(text, uuid[])', 'EXECUTE') AS redrive,
       has_table_privilege(r, 'dedup.outbox', 'SELECT') AS read_table
FROM unnest(ARRAY['public', 'regress_dedup_producer', 'regress_dedup_relay']) AS r;
-- a producer with only EXECUTE puts events (the insert runs as the owner)
SET ROLE regress_dedup_producer;
SELECT dedup_outbox_put('orders', 'by-producer', '{}') IS NOT NULL AS put;
RESET ROLE;
SELECT count(*) AS by_producer FROM dedup.outbox WHERE aggregateid = 'by-producer';
-- a relay takes and acks a batch with only its grant
SET ROLE regress_dedup_relay;
SELECT dedup_outbox_ack_batch(max(batch_id)) > 0 AS relayed FROM dedup_outbox_take_batch('orders');
RESET ROLE;
DROP OWNED BY regress_dedup_producer, regress_dedup_relay;
DROP ROLE regress_dedup_producer, regress_dedup_relay;
TRUNCATE dedup.outbox, dedup.outbox_topics, dedup.outbox_batches, dedup.outbox_retry, dedup.outbox_held,
         dedup.outbox_dead, dedup.outbox_keys;
SELECT dedup_reset_scope('orders') AS reset;

-- a relay granted one topic acks or nacks a batch of another by its id
-- (ids are small and easily guessed) as one not handed out: 0, no error,
-- no topic named, nothing changed; on the fast path (an ack of a batch
-- whole, with no event of outbox_retry) and on the PL/pgSQL one (an ack
-- with failed ids, a nack, a batch with an event of outbox_retry)
CREATE ROLE regress_relay_a;
CREATE ROLE regress_relay_b;
SELECT dedup_grant_relay('regress_relay_a', ARRAY['topic-a']);
SELECT dedup_grant_relay('regress_relay_b', ARRAY['topic-b']);
SELECT dedup_outbox_put('topic-b', 'b-' || i, '{}', aggregate_id => 'b-' || i) IS NOT NULL AS put
FROM generate_series(1, 2) AS i;
SELECT dedup_outbox_put('topic-a', 'a-1', '{}') IS NOT NULL AS put;
SET ROLE regress_relay_b;
SELECT max(batch_id) AS b1 FROM dedup_outbox_take_batch('topic-b', 1) \gset
SELECT max(batch_id) AS b2 FROM dedup_outbox_take_batch('topic-b', 1) \gset
SELECT dedup_outbox_nack_batch(:b2) AS nacked;
SELECT max(batch_id) AS b2 FROM dedup_outbox_take_batch('topic-b', 1) \gset
RESET ROLE;
SELECT topic, busy, events, retried FROM dedup.outbox_inflight ORDER BY id;
CREATE TEMP TABLE foreign_before AS
SELECT (SELECT md5(string_agg(b::text, '|' ORDER BY b::text)) FROM dedup.outbox_batches AS b
        WHERE b.topic = 'topic-b') AS batches,
       (SELECT md5(string_agg(r::text, '|' ORDER BY r::text)) FROM dedup.outbox_retry AS r) AS retry,
       (SELECT count(*) FROM dedup.outbox_dead) AS dead;
SET ROLE regress_relay_a;
SELECT dedup_outbox_ack_batch(:b1) AS fast_ack;
SELECT dedup_outbox_ack_batch(:b1, retry_delay => '1 hour') AS fast_ack_delay;
SELECT dedup_outbox_ack_batch(:b1, failed => ARRAY(SELECT id FROM dedup_outbox_take_batch('topic-a', 1))) AS ack_failed;
SELECT dedup_outbox_nack_batch(:b1, error => 'x') AS nack;
SELECT dedup_outbox_ack_batch(:b2) AS ack_retried;
SELECT dedup_outbox_nack_batch(:b2) AS nack_retried;
RESET ROLE;
SELECT (SELECT md5(string_agg(b::text, '|' ORDER BY b::text)) FROM dedup.outbox_batches AS b
        WHERE b.topic = 'topic-b') = batches AS batches_same,
       (SELECT md5(string_agg(r::text, '|' ORDER BY r::text)) FROM dedup.outbox_retry AS r) = retry AS retry_same,
       (SELECT count(*) FROM dedup.outbox_dead) = dead AS dead_same
FROM foreign_before;
-- topic-b's two batches are handed out as they were, and its relay acks them
SELECT topic, busy, events, retried FROM dedup.outbox_inflight ORDER BY id;
SET ROLE regress_relay_b;
SELECT dedup_outbox_ack_batch(:b1) AS b1_acked, dedup_outbox_ack_batch(:b2) AS b2_acked;
RESET ROLE;
DROP OWNED BY regress_relay_a, regress_relay_b;
DROP ROLE regress_relay_a, regress_relay_b;
TRUNCATE dedup.outbox, dedup.outbox_topics, dedup.outbox_batches, dedup.outbox_retry, dedup.outbox_held,
         dedup.outbox_dead, dedup.outbox_keys;

-- batch rows: a take with nothing to hand out writes nothing (no
-- position, no batch row), for however many topics; a take inserts a row
-- for its batch, its ack appends one; each batch has an id of its own (the
-- counter's), so no id handed out before names a batch handed out after
SELECT count(*) AS taken FROM generate_series(1, 200) AS i, LATERAL dedup_outbox_take_batch('empty-' || i) AS t;
SELECT count(*) AS taken FROM generate_series(1, 200) AS i, LATERAL dedup_outbox_take('empty-' || i) AS t;
SELECT (SELECT count(*) FROM dedup.outbox_topics) AS positions, (SELECT count(*) FROM dedup.outbox_batches) AS batch_rows;
SELECT count(*) FROM generate_series(1, 30) AS i, LATERAL dedup_outbox_put('tenant-' || i, 'e-1', '{}') AS p;
CREATE TEMP TABLE handed (round integer, batch_id bigint, acked integer);
DO $$
DECLARE
    bid bigint;
BEGIN
    FOR i IN 1..30 LOOP
        SELECT max(t.batch_id) INTO bid FROM dedup_outbox_take_batch('tenant-' || i) AS t;
        INSERT INTO handed VALUES (1, bid, dedup_outbox_ack_batch(bid));
    END LOOP;
END
$$;
SELECT count(*) AS batches, count(DISTINCT batch_id) AS ids, sum(acked) AS acked FROM handed;
SELECT count(*) AS batch_rows, count(*) FILTER (WHERE rev = 0) AS handed_out,
       max(id) = (SELECT max(batch_id) FROM handed) AS holds_last_id,
       (SELECT count(*) FROM dedup.outbox_inflight) AS out,
       (SELECT count(*) FROM dedup.outbox_topics) AS positions
FROM dedup.outbox_batches;
-- the topics, positioned, with nothing new: nothing written either
CREATE TEMP TABLE slots_before AS
SELECT (SELECT md5(string_agg(b::text, '|' ORDER BY b::text)) FROM dedup.outbox_batches AS b) AS batches,
       (SELECT md5(string_agg(t::text, '|' ORDER BY t::text)) FROM dedup.outbox_topics AS t) AS topics;
SELECT count(*) AS taken FROM generate_series(1, 30) AS i, LATERAL dedup_outbox_take_batch('tenant-' || i) AS t;
SELECT (SELECT md5(string_agg(b::text, '|' ORDER BY b::text)) FROM dedup.outbox_batches AS b) = batches AS batches_same,
       (SELECT md5(string_agg(t::text, '|' ORDER BY t::text)) FROM dedup.outbox_topics AS t) = topics AS topics_same
FROM slots_before;
-- three batches of three topics handed out at a time
SELECT count(*) FROM generate_series(1, 30) AS i, LATERAL dedup_outbox_put('tenant-' || i, 'e-2', '{}') AS p;
DO $$
DECLARE
    bids bigint[];
BEGIN
    FOR i IN 0..9 LOOP
        bids := '{}';
        FOR j IN 1..3 LOOP
            bids := bids || (SELECT max(t.batch_id) FROM dedup_outbox_take_batch('tenant-' || (3 * i + j)) AS t);
        END LOOP;
        INSERT INTO handed SELECT 2, b, dedup_outbox_ack_batch(b) FROM unnest(bids) AS b;
    END LOOP;
END
$$;
SELECT count(*) AS batches, count(DISTINCT batch_id) AS ids, sum(acked) AS acked FROM handed WHERE round = 2;
SELECT count(*) AS batch_rows, (SELECT count(*) FROM dedup.outbox_inflight) AS out FROM dedup.outbox_batches;
-- every id handed out before acks nothing of a batch handed out after
SELECT dedup_outbox_put('tenant-x', 'e-1', '{}') IS NOT NULL AS put;
CREATE TEMP TABLE held AS SELECT * FROM dedup_outbox_take_batch('tenant-x');
SELECT (SELECT count(*) FROM dedup.outbox_inflight) AS out,
       (SELECT batch_id FROM held) NOT IN (SELECT batch_id FROM handed) AS new_id,
       (SELECT count(*) FROM handed WHERE batch_id < (SELECT max(batch_id) FROM held)) AS ids_before;
SELECT sum(dedup_outbox_ack_batch(batch_id)) AS old_ids_acked,
       sum(dedup_outbox_nack_batch(batch_id)) AS old_ids_nacked FROM handed;
SELECT count(*) AS busy, min(topic) AS topic FROM dedup.outbox_inflight;
SELECT dedup_outbox_ack_batch(batch_id) AS acked FROM held;
TRUNCATE dedup.outbox, dedup.outbox_topics, dedup.outbox_batches, dedup.outbox_retry, dedup.outbox_held,
         dedup.outbox_dead;

-- partitions: one server has one, number 0 (part all zeros), in every row;
-- a batch's id carries the partition's number (times 2^47) and the
-- counter's next number (below 2^47)
SELECT dedup_outbox_put('parts', 'p-' || i, '{}', aggregate_id => 'a-' || i) IS NOT NULL AS put
FROM generate_series(1, 3) AS i;
SELECT setval('dedup.outbox_batch_ids', 41) AS counter;
SELECT batch_id = 42 AS first_batch_id, count(*) AS events
FROM dedup_outbox_take_batch('parts', 2) GROUP BY batch_id;
SELECT batch_id = 43 AS second_batch_id, count(*) AS events
FROM dedup_outbox_take_batch('parts', 2) GROUP BY batch_id;
SELECT (SELECT array_agg(DISTINCT part::text) FROM dedup.outbox) AS log,
       (SELECT array_agg(DISTINCT part::text) FROM dedup.outbox_topics) AS positions,
       (SELECT array_agg(DISTINCT part::text) FROM dedup.outbox_batches) AS batches;
-- an id of another partition, or one no batch can have, acks nothing
SELECT dedup_outbox_ack_batch((1::bigint << 47) + 42) AS other_partition,
       dedup_outbox_ack_batch(-1) AS negative;
TRUNCATE dedup.outbox, dedup.outbox_topics, dedup.outbox_batches, dedup.outbox_retry, dedup.outbox_held,
         dedup.outbox_dead;

-- dedup.outbox_fast_path: on (the default), a take and an ack of a relay
-- keeping up run no PL/pgSQL; off, every one runs the PL/pgSQL functions
-- (the tests run both ways: make installcheck-slow-path).  Either way a
-- take of the exact rest of its topic moves the position past every
-- settled number, as the PL/pgSQL take does (the fast path moved it only
-- past its last event, disagreeing, before)
SET track_functions = 'pl';
SELECT dedup_outbox_put('fast-a', 'a-' || i, '{}') IS NOT NULL AS put FROM generate_series(1, 3) AS i;
SELECT dedup_outbox_put('fast-b', 'b-' || i, '{}') IS NOT NULL AS put FROM generate_series(1, 3) AS i;
SELECT dedup_outbox_put('fast-other', 'o-1', '{}') IS NOT NULL AS put;
SELECT count(*) FROM dedup_outbox_take_batch('fast-a', 1);  -- positions fast-a
SELECT count(*) FROM dedup_outbox_take_batch('fast-b', 1);  -- positions fast-b
SELECT dedup_outbox_ack_batch(batch_id) AS acked FROM dedup.outbox_inflight AS x,
       LATERAL (SELECT x.id) AS b(batch_id);
BEGIN;
SET LOCAL dedup.outbox_fast_path = on;
SELECT coalesce(sum(calls), 0) AS calls0 FROM pg_stat_xact_user_functions
WHERE schemaname = 'dedup' AND funcname = 'outbox_take_batch' \gset
SELECT count(*) AS taken FROM dedup_outbox_take_batch('fast-a', 2);
SELECT coalesce(sum(calls), 0) - :calls0 AS plpgsql_takes FROM pg_stat_xact_user_functions
WHERE schemaname = 'dedup' AND funcname = 'outbox_take_batch';
COMMIT;
BEGIN;
SET LOCAL dedup.outbox_fast_path = off;
SELECT coalesce(sum(calls), 0) AS calls0 FROM pg_stat_xact_user_functions
WHERE schemaname = 'dedup' AND funcname = 'outbox_take_batch' \gset
SELECT count(*) AS taken FROM dedup_outbox_take_batch('fast-b', 2);
SELECT coalesce(sum(calls), 0) - :calls0 AS plpgsql_takes FROM pg_stat_xact_user_functions
WHERE schemaname = 'dedup' AND funcname = 'outbox_take_batch';
COMMIT;
SELECT t.topic, t.next_seq = (SELECT max(seq) + 1 FROM dedup.outbox) AS past_every_settled
FROM positions AS t WHERE t.topic LIKE 'fast-%' ORDER BY t.topic;
BEGIN;
SET LOCAL dedup.outbox_fast_path = off;
SELECT coalesce(sum(calls), 0) AS calls0 FROM pg_stat_xact_user_functions
WHERE schemaname = 'dedup' AND funcname = 'outbox_ack_batch' \gset
SELECT sum(dedup_outbox_ack_batch(batch_id)) AS acked FROM dedup.outbox_inflight AS x,
       LATERAL (SELECT x.id) AS b(batch_id);
SELECT coalesce(sum(calls), 0) - :calls0 AS plpgsql_acks FROM pg_stat_xact_user_functions
WHERE schemaname = 'dedup' AND funcname = 'outbox_ack_batch';
COMMIT;
RESET track_functions;
TRUNCATE dedup.outbox, dedup.outbox_topics, dedup.outbox_batches, dedup.outbox_retry, dedup.outbox_held,
         dedup.outbox_dead;

-- A take and its ack update no row of the relay's state (a held xmin
-- horizon keeps every version of one, and every reader walks them): the
-- take inserts its batch's row, with the topic's position after it, and
-- the ack appends one; dedup.outbox_topics is not written.  A take of
-- another topic leaves the position where it is.
SELECT dedup_outbox_put('versions', 'v-' || i, '{}') IS NOT NULL AS put FROM generate_series(1, 5) AS i;
SELECT count(*) FROM dedup_outbox_take_batch('versions', 1);  -- positions the topic
SELECT dedup_outbox_ack_batch(batch_id) AS acked FROM dedup.outbox_inflight AS x,
       LATERAL (SELECT x.id) AS b(batch_id);
SELECT xmin AS topic_xmin FROM dedup.outbox_topics WHERE topic = 'versions' \gset
BEGIN;
CREATE TEMP TABLE tuples_before ON COMMIT DROP AS
SELECT relname, n_tup_ins, n_tup_upd, n_tup_del FROM pg_stat_xact_user_tables
WHERE schemaname = 'dedup' AND relname IN ('outbox_batches', 'outbox_topics');
SELECT count(*) AS taken FROM dedup_outbox_take_batch('versions', 2);
SELECT dedup_outbox_ack_batch(batch_id) AS acked FROM dedup.outbox_inflight AS x,
       LATERAL (SELECT x.id) AS b(batch_id);
SELECT count(*) AS taken FROM dedup_outbox_take_batch('versions', 2);
SELECT dedup_outbox_ack_batch(batch_id) AS acked FROM dedup.outbox_inflight AS x,
       LATERAL (SELECT x.id) AS b(batch_id);
-- two takes and two acks: four rows inserted, none updated or deleted
SELECT s.relname, s.n_tup_ins - b.n_tup_ins AS inserted, s.n_tup_upd - b.n_tup_upd AS updated,
       s.n_tup_del - b.n_tup_del AS deleted
FROM pg_stat_xact_user_tables AS s JOIN tuples_before AS b USING (relname)
WHERE s.schemaname = 'dedup' ORDER BY s.relname;
COMMIT;
SELECT t.next_seq = (SELECT max(seq) + 1 FROM dedup.outbox) AS past_every_event,
       (SELECT x.xmin = :'topic_xmin' FROM dedup.outbox_topics AS x WHERE x.topic = 'versions')
         AS topic_row_unwritten
FROM positions AS t WHERE t.topic = 'versions';
SELECT dedup_outbox_put('versions-2', 'w-1', '{}') IS NOT NULL AS put;
SELECT count(*) AS taken FROM dedup_outbox_take_batch('versions-2', 1);
SELECT topic, count(*) AS batch_rows FROM dedup.outbox_batches GROUP BY topic ORDER BY topic;
SELECT t.topic, t.next_seq = (SELECT max(seq) + 1 FROM dedup.outbox AS o WHERE o.topic = t.topic)
         AS past_every_event,
       (SELECT next_seq FROM dedup.outbox_topics AS x WHERE x.topic = t.topic) = t.next_seq AS in_topics
FROM positions AS t ORDER BY t.topic;
SELECT count(*) AS taken_again FROM dedup_outbox_take_batch('versions', 10);
TRUNCATE dedup.outbox, dedup.outbox_topics, dedup.outbox_batches, dedup.outbox_retry, dedup.outbox_held,
         dedup.outbox_dead;

-- a per-call lease on take_batch (NULL: the topic's), checked as any
-- lease; the heartbeat of a batch, dedup_outbox_extend_batch: its lease
-- runs again from now while it is handed out under that id (even past its
-- lease, until a take hands it out again), NULL otherwise; on both paths
SELECT max_attempts FROM dedup_set_scope('beat', lease => '1 minute', max_attempts => 2);
SELECT dedup_outbox_put('beat', 'b-' || i, jsonb_build_object('i', i)) IS NOT NULL AS put
FROM generate_series(1, 4) AS i;
SELECT count(*) FROM dedup_outbox_take_batch('beat', 1);  -- positions the topic
SELECT dedup_outbox_ack_batch(batch_id) AS acked FROM dedup.outbox_inflight AS x,
       LATERAL (SELECT x.id) AS b(batch_id);
CREATE TEMP TABLE beat1 AS SELECT * FROM dedup_outbox_take_batch('beat', 1, lease => '10 minutes');
CREATE TEMP TABLE beat2 AS SELECT * FROM dedup_outbox_take_batch('beat', 1);
BEGIN;
SET LOCAL dedup.outbox_fast_path = off;
CREATE TEMP TABLE beat3 AS SELECT * FROM dedup_outbox_take_batch('beat', 1, lease => '2 hours');
COMMIT;
SELECT 'per call' AS lease, lease_expires_at - now() BETWEEN interval '9 minutes' AND interval '10 minutes' AS ok FROM beat1
UNION ALL
SELECT 'topic''s', lease_expires_at - now() BETWEEN interval '50 seconds' AND interval '1 minute' FROM beat2
UNION ALL
SELECT 'per call, PL/pgSQL', lease_expires_at - now() BETWEEN interval '119 minutes' AND interval '2 hours' FROM beat3;
SELECT count(*) AS three_leases FROM dedup.outbox_inflight AS x, beat1, beat2, beat3
WHERE x.lease_until IN (beat1.lease_expires_at, beat2.lease_expires_at, beat3.lease_expires_at);
SELECT regress_try($$SELECT count(*) FROM dedup_outbox_take_batch('beat', 1, lease => '0')$$),
       regress_try($$SELECT count(*) FROM dedup_outbox_take_batch('beat', 1, lease => '-1 minute')$$),
       regress_try($$SELECT count(*) FROM dedup_outbox_take_batch('beat', 1, lease => '200 years')$$);
-- extend: beat2's batch to 30 minutes from now; the topic's lease by default
CREATE FUNCTION pg_temp.runs(until timestamptz, lease interval) RETURNS boolean LANGUAGE sql AS
$$SELECT until > now() + lease - interval '1 minute' AND until <= clock_timestamp() + lease$$;
SELECT pg_temp.runs(dedup_outbox_extend_batch(batch_id, '30 minutes'), '30 minutes') AS extended FROM beat2;
SELECT pg_temp.runs(x.lease_until, '30 minutes') AS stored
FROM dedup.outbox_inflight AS x, beat2 WHERE x.id = beat2.batch_id;
SELECT pg_temp.runs(dedup_outbox_extend_batch(batch_id), '1 minute') AS topics_lease FROM beat1;
-- past its lease but not handed out again: still its batch, extended (a
-- take then has nothing to hand out again)
UPDATE dedup.outbox_batches AS x SET lease_until = now() - interval '1 second'
FROM beat3 WHERE x.id = beat3.batch_id;
SELECT pg_temp.runs(dedup_outbox_extend_batch(batch_id, '5 minutes'), '5 minutes') AS extended_late FROM beat3;
SELECT count(*) AS nothing_to_hand_again FROM dedup_outbox_take_batch('beat', 10);
-- acked, handed out again under a new id (its lease passed), or never
-- handed out: NULL, and nothing changed
SELECT dedup_outbox_ack_batch(batch_id) AS acked FROM beat1;
UPDATE dedup.outbox_batches AS x SET lease_until = now() - interval '1 second'
FROM beat2 WHERE x.id = beat2.batch_id;
CREATE TEMP TABLE beat2b AS SELECT * FROM dedup_outbox_take_batch('beat', 10);
SELECT count(*) AS handed_again, bool_and(b.batch_id <> beat2.batch_id) AS new_id, min(b.attempts) AS attempt
FROM beat2b AS b, beat2;
CREATE TEMP TABLE beat_before AS SELECT md5(string_agg(x::text, '|' ORDER BY x.id, x.rev)) AS batches FROM dedup.outbox_batches AS x;
SELECT dedup_outbox_extend_batch(beat1.batch_id) AS acked_batch, dedup_outbox_extend_batch(beat2.batch_id) AS stale_batch,
       dedup_outbox_extend_batch(12345) AS never, dedup_outbox_extend_batch(-1) AS no_such_id
FROM beat1, beat2;
SELECT regress_try($$SELECT dedup_outbox_extend_batch(NULL)$$),
       regress_try($$SELECT dedup_outbox_extend_batch(1, '0')$$),
       regress_try($$SELECT dedup_outbox_extend_batch(1, '-1 second')$$);
SELECT md5(string_agg(x::text, '|' ORDER BY x.id, x.rev)) = beat_before.batches AS batches_unchanged
FROM dedup.outbox_batches AS x, beat_before GROUP BY beat_before.batches;

-- a relay role: extends batches of its topics only; another topic's batch
-- is answered as one not handed out (NULL), unchanged
CREATE ROLE regress_dedup_beat;
SELECT dedup_grant_relay('regress_dedup_beat', ARRAY['beat-mine']);
SELECT dedup_outbox_put('beat-mine', 'm-1', '{}') IS NOT NULL AS put;
SELECT batch_id AS beat3_id FROM beat3 \gset
SELECT x.lease_until AS beat3_until FROM dedup.outbox_inflight AS x
WHERE x.id = :beat3_id \gset
SET ROLE regress_dedup_beat;
SELECT count(*) AS taken, pg_temp.runs(dedup_outbox_extend_batch(min(batch_id), '3 minutes'), '3 minutes') AS own_topic
FROM dedup_outbox_take_batch('beat-mine', 1);
SELECT dedup_outbox_extend_batch(:beat3_id, '3 hours') AS other_topic;
RESET ROLE;
SELECT x.lease_until = :'beat3_until' AS other_unchanged FROM dedup.outbox_inflight AS x
WHERE x.id = :beat3_id;

-- dead letters for relays: dedup_outbox_dead(topic, max) lists a topic's
-- dead events, first by seq, with attempts and last error, to a role that
-- may relay the topic (42501 otherwise)
SELECT max_attempts FROM dedup_set_scope('beat', max_attempts => 1);
SELECT dedup_outbox_nack_batch(batch_id, error => 'broker said no') AS nacked FROM beat3;
SELECT dedup_outbox_nack_batch(min(batch_id), error => 'timeout') AS nacked FROM beat2b;
SELECT payload, attempts, last_error, died_at <= now() AS died,
       id = dedup_outbox_put('beat', 'b-' || (payload->>'i'), payload) AS same_id
FROM dedup_outbox_dead('beat') ORDER BY seq;
SELECT count(*) AS first_one, min(last_error) AS error FROM dedup_outbox_dead('beat', 1);
SELECT regress_try($$SELECT count(*) FROM dedup_outbox_dead(NULL)$$),
       regress_try($$SELECT count(*) FROM dedup_outbox_dead('beat', 0)$$),
       regress_try($$SELECT count(*) FROM dedup_outbox_dead('beat', NULL)$$),
       regress_try($$SELECT count(*) FROM dedup_outbox_dead('', 10)$$);
SET ROLE regress_dedup_beat;
SELECT regress_try($$SELECT count(*) FROM dedup_outbox_dead('beat')$$);
SELECT count(*) AS own_dead FROM dedup_outbox_dead('beat-mine');
RESET ROLE;
SELECT dedup_revoke_relay('regress_dedup_beat');
DROP ROLE regress_dedup_beat;
SELECT dedup_reset_scope('beat');

-- a take that waits: with nothing to hand out it returns no row once its
-- wait passed (polled; not before); with an event, at once; wait checked
-- as an interval (0 allowed: no wait)
SELECT clock_timestamp() AS t0 \gset
SELECT count(*) AS taken FROM dedup_outbox_take_batch('wait-empty', 10, wait => '300 milliseconds');
SELECT clock_timestamp() - :'t0' >= interval '300 milliseconds' AS waited;
SELECT dedup_outbox_put('wait-full', 'w-1', '{}') IS NOT NULL AS put;
SELECT clock_timestamp() AS t0 \gset
SELECT count(*) AS taken FROM dedup_outbox_take_batch('wait-full', 10, wait => '1 minute');
SELECT clock_timestamp() - :'t0' < interval '30 seconds' AS at_once;
SELECT count(*) AS taken FROM dedup_outbox_take_batch('wait-full', 10, wait => '0');
SELECT regress_try($$SELECT count(*) FROM dedup_outbox_take_batch('wait-full', 10, wait => '-1 second')$$),
       regress_try($$SELECT count(*) FROM dedup_outbox_take_batch('wait-full', 10, wait => '101 years')$$);
TRUNCATE dedup.outbox, dedup.outbox_topics, dedup.outbox_batches, dedup.outbox_retry, dedup.outbox_held,
         dedup.outbox_dead;


-- a take rolled back, then one more in the same session: the backend
-- reads the topic's newest batch from the id it saw last (outbox_fast.c),
-- here the rolled-back batch's, with no row left from there up; it reads
-- again from the start, and hands out the event after the acked one (not
-- the acked one again, as a position read without the newest row would)
SELECT dedup_outbox_put('rb', 'rb-' || i, jsonb_build_object('n', i)) IS NOT NULL AS put
FROM generate_series(1, 2) i;
SELECT batch_id AS rb_batch FROM dedup_outbox_take_batch('rb', 1) \gset
SELECT dedup_outbox_ack_batch(:rb_batch);
BEGIN;
SELECT count(*) AS taken FROM dedup_outbox_take_batch('rb', 1);
ROLLBACK;
SELECT payload FROM dedup_outbox_take_batch('rb', 1);
SELECT count(*) AS taken FROM dedup_outbox_take_batch('rb', 1);
TRUNCATE dedup.outbox, dedup.outbox_topics, dedup.outbox_batches, dedup.outbox_retry, dedup.outbox_held,
         dedup.outbox_dead;

-- the state a take starts from, which both paths read in one statement
-- (dedup.outbox_take_state(), FAST_STATE in outbox_fast.c): events in the
-- log and no position yet; a batch out; an event nacked into outbox_retry
SELECT dedup_outbox_put('st', 'st-' || i, jsonb_build_object('n', i), aggregate_id => 'st') IS NOT NULL AS put
FROM generate_series(1, 2) i;
CREATE TEMP VIEW st_state AS
SELECT s.next_seq IS NOT NULL AS positioned, s.has_retry, s.has_held, s.has_log,
       s.low_id IS NOT NULL AS low, s.newest_id = s.low_id AS newest_is_low
FROM dedup.outbox_take_state((SELECT o.part FROM dedup.outbox AS o WHERE o.topic = 'st' LIMIT 1), 'st') AS s;
SELECT * FROM st_state;
SELECT batch_id AS st_batch, id AS st_id FROM dedup_outbox_take_batch('st', 1) \gset
SELECT * FROM st_state;
SELECT dedup_outbox_nack(ARRAY[:'st_id']::uuid[], retry_delay => '1 hour') AS nacked;
SELECT * FROM st_state;
SELECT dedup_outbox_redrive('st', ARRAY[:'st_id']::uuid[]) IS NOT NULL AS redriven;
TRUNCATE dedup.outbox, dedup.outbox_topics, dedup.outbox_batches, dedup.outbox_retry, dedup.outbox_held,
         dedup.outbox_dead;

-- a batch's rows as both paths write them: its rev 0 row with the low mark
-- of the batches out (dedup.outbox_batch_write(), FAST_WRITE), and the row
-- of a batch out no more, acked whole or nacked (dedup.outbox_batch_append(),
-- FAST_APPEND): its counts, position and low mark, none of its state
SELECT dedup_outbox_put('wr', 'wr-' || i, jsonb_build_object('n', i), aggregate_id => 'wr-' || i) IS NOT NULL AS put
FROM generate_series(1, 2) i;
SELECT batch_id AS wr_first FROM dedup_outbox_take_batch('wr', 1) \gset
SELECT batch_id AS wr_second, id AS wr_id FROM dedup_outbox_take_batch('wr', 1) \gset
SELECT dedup_outbox_ack_batch(:wr_first) AS acked;
SELECT dedup_outbox_nack(ARRAY[:'wr_id']::uuid[], retry_delay => '1 hour') AS nacked;
SELECT b.id = :wr_first AS first, b.rev, b.busy, b.attempt, b.lease_until IS NULL AS no_lease,
       b.first_seq IS NULL AS no_first, b.last_seq IS NULL AS no_last, b.settled, b.extra,
       b.retried, b.events, b.aggregates IS NULL AS no_aggregates, b.members,
       b.next_seq - min(b.next_seq) OVER () AS next_seq_past_first,
       b.low_id = :wr_first AS low_is_first
FROM dedup.outbox_batches AS b WHERE b.topic = 'wr' ORDER BY b.id, b.rev;
-- (internal, the owner's: called with a NULL partition, row or id, both
-- refuse with 22004, nothing written)
SELECT count(*) AS wr_rows FROM dedup.outbox_batches WHERE topic = 'wr' \gset
SELECT regress_try($$SELECT dedup.outbox_batch_write(NULL, b, NULL)
                     FROM dedup.outbox_batches AS b WHERE b.topic = 'wr' AND b.rev = 0 LIMIT 1$$) AS write_no_part,
       regress_try($$SELECT dedup.outbox_batch_write(b.part, NULL, NULL)
                     FROM dedup.outbox_batches AS b WHERE b.topic = 'wr' AND b.rev = 0 LIMIT 1$$) AS write_no_row,
       regress_try($$SELECT dedup.outbox_batch_write(b.part, jsonb_populate_record(b, '{"id": null}'), NULL)
                     FROM dedup.outbox_batches AS b WHERE b.topic = 'wr' AND b.rev = 0 LIMIT 1$$) AS write_no_id;
SELECT regress_try($$SELECT dedup.outbox_batch_append(NULL, b)
                     FROM dedup.outbox_batches AS b WHERE b.topic = 'wr' AND b.rev = 0 LIMIT 1$$) AS append_no_part,
       regress_try($$SELECT dedup.outbox_batch_append(b.part, NULL)
                     FROM dedup.outbox_batches AS b WHERE b.topic = 'wr' AND b.rev = 0 LIMIT 1$$) AS append_no_row,
       regress_try($$SELECT dedup.outbox_batch_append(b.part, jsonb_populate_record(b, '{"rev": null}'))
                     FROM dedup.outbox_batches AS b WHERE b.topic = 'wr' AND b.rev = 0 LIMIT 1$$) AS append_no_rev;
SELECT count(*) - :wr_rows AS rows_written FROM dedup.outbox_batches WHERE topic = 'wr';
TRUNCATE dedup.outbox, dedup.outbox_topics, dedup.outbox_batches, dedup.outbox_retry, dedup.outbox_held,
         dedup.outbox_dead;
