-- A batch's id is its partition's number times 2^47 plus a number from the
-- node's counter of batches (dedup.outbox_batch_ids), drawn anew by every
-- take that hands a batch out, or out again: no id is given to two
-- batches, so a relay that held an id
-- across any number of hand-outs never acks, nacks or extends another
-- batch by it (1.1's first ids were a slot and its generation, 31 bits,
-- and a slot at the last generation was retired).  The counter at its end
-- fails the take (2200H), writing nothing.
TRUNCATE dedup.outbox, dedup.outbox_topics, dedup.outbox_batches, dedup.outbox_retry, dedup.outbox_held,
         dedup.outbox_dead, dedup.outbox_keys;
SELECT (dedup_set_scope('wrap', lease => '1 minute')).configured AS set;
-- the relay's tables, as text, to show that a call changed nothing
CREATE TEMP VIEW relay_state AS
SELECT (SELECT md5(coalesce(string_agg(b::text, '|' ORDER BY b.id, b.rev), '')) FROM dedup.outbox_batches AS b) AS batches,
       (SELECT md5(coalesce(string_agg(t::text, '|' ORDER BY t.topic), '')) FROM dedup.outbox_topics AS t) AS topics,
       (SELECT count(*) FROM dedup.outbox_retry) AS retry,
       (SELECT count(*) FROM dedup.outbox_dead) AS dead,
       (SELECT last_value FROM dedup.outbox_batch_ids) AS counter;

-- 1. A batch after another.  A relay takes a batch and holds its id; the
-- batch is acked (a row appended); the next batch is another row, under a
-- new id
SELECT dedup_outbox_put('wrap', 'w-1', '{"n": 1}') IS NOT NULL AS put;
SELECT max(batch_id) AS old_id FROM dedup_outbox_take_batch('wrap', 10) \gset
SELECT rev, id = :old_id AS holds_old_id, busy FROM dedup.outbox_batches ORDER BY id, rev;
-- its id: partition 0's (one server's), a counter's number from 1
SELECT :old_id >> 47 AS partition, :old_id & (2^47 - 1)::bigint > 0 AS counted;
SELECT dedup_outbox_ack_batch(:old_id) AS acked;
SELECT dedup_outbox_put('wrap', 'w-2', '{"n": 2}') IS NOT NULL AS put;
SELECT max(batch_id) AS new_id, count(*) AS events FROM dedup_outbox_take_batch('wrap', 10) \gset
SELECT :new_id > :old_id AS new_id_later, :events AS events;
SELECT rev, id = :new_id AS holds_new_id, busy FROM dedup.outbox_batches ORDER BY id, rev;
-- the old id names no batch: ack, nack and heartbeat answer as for a
-- batch not handed out (0, 0, NULL), and change nothing
CREATE TEMP TABLE before AS SELECT * FROM relay_state;
SELECT dedup_outbox_ack_batch(:old_id) AS acked;
SELECT dedup_outbox_nack_batch(:old_id) AS nacked;
SELECT dedup_outbox_extend_batch(:old_id) AS extended;
SELECT r = b AS unchanged FROM relay_state AS r, before AS b;
DROP TABLE before;
-- nor do ids no batch can have (0, its counter's part 0)
SELECT dedup.outbox_batch_valid(0) AS zero, dedup.outbox_batch_valid(1::bigint << 47) AS counter_zero,
       dedup.outbox_batch_valid(:new_id) AS new_id;
-- the new batch is its relay's: acked by its id
SELECT dedup_outbox_ack_batch(:new_id) AS acked;

-- 2. A batch handed out again: under an id neither relay held before
SELECT dedup_outbox_put('wrap', 'r-1', '{"n": 3}') IS NOT NULL AS put;
SELECT max(batch_id) AS first_id FROM dedup_outbox_take_batch('wrap', 10) \gset
UPDATE dedup.outbox_batches SET lease_until = now() - interval '1 second' WHERE busy;
SELECT max(batch_id) AS again_id, count(*) AS events, max(attempts) AS attempts,
       string_agg(payload->>'n', ',') AS events_of
FROM dedup_outbox_take_batch('wrap', 10) \gset
SELECT :again_id > :first_id AS again_id_later, :again_id > :new_id AS not_an_old_id,
       :events AS events, :attempts AS attempts, :'events_of' AS events_of;
SELECT id = :again_id AS holds_again_id, busy, attempt FROM dedup.outbox_inflight ORDER BY id;
CREATE TEMP TABLE before AS SELECT * FROM relay_state;
SELECT dedup_outbox_ack_batch(:first_id) AS acked_first, dedup_outbox_nack_batch(:first_id) AS nacked_first,
       dedup_outbox_extend_batch(:first_id) AS extended_first;
SELECT r = b AS unchanged FROM relay_state AS r, before AS b;
DROP TABLE before;
SELECT dedup_outbox_ack_batch(:again_id) AS acked;

-- 3. The counter at its end (2^47 - 1 batches handed out on this node): the
-- next take fails (2200H) and writes nothing, on either path
SELECT dedup_outbox_put('wrap', 'e-1', '{"n": 4}') IS NOT NULL AS put;
SELECT setval('dedup.outbox_batch_ids', (2^47 - 1)::bigint) AS counter;
CREATE TEMP TABLE before AS SELECT * FROM relay_state;
DO $$
BEGIN
    PERFORM dedup_outbox_take_batch('wrap', 10);
EXCEPTION WHEN sequence_generator_limit_exceeded THEN
    RAISE NOTICE 'take: %', SQLSTATE;
END
$$;
SELECT r = b AS unchanged FROM relay_state AS r, before AS b;
DROP TABLE before;
SELECT setval('dedup.outbox_batch_ids', 1000) AS counter;
SELECT count(*) AS taken FROM dedup_outbox_take_batch('wrap', 10);
DROP VIEW relay_state;
TRUNCATE dedup.outbox, dedup.outbox_topics, dedup.outbox_batches, dedup.outbox_retry, dedup.outbox_held,
         dedup.outbox_dead, dedup.outbox_keys;
SELECT dedup_reset_scope('wrap') AS reset;
