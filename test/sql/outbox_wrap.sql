-- A batch's id is its partition, its slot and the slot's generation (31
-- bits): after 2^31 - 1 hand-outs of one slot its generation would come
-- back to a value an id handed out before holds, and a relay that held that
-- id across the wrap would ack, nack or extend another batch.  A slot whose
-- generation reached the last value is never given another batch: a new
-- batch goes to another slot, a batch handed out again to a fresh one, so
-- that no id handed out before names a batch handed out after.  The wrap
-- is set by hand (UPDATE dedup.outbox_batches), as 2^31 hand-outs would.
TRUNCATE dedup.outbox, dedup.outbox_topics, dedup.outbox_batches, dedup.outbox_retry, dedup.outbox_held,
         dedup.outbox_dead, dedup.outbox_keys;
SELECT (dedup_set_scope('wrap', lease => '1 minute')).configured AS set;
-- the relay's tables, as text, to show that a call changed nothing
CREATE TEMP VIEW relay_state AS
SELECT (SELECT md5(coalesce(string_agg(b::text, '|' ORDER BY b.slot), '')) FROM dedup.outbox_batches AS b) AS batches,
       (SELECT md5(coalesce(string_agg(t::text, '|' ORDER BY t.topic), '')) FROM dedup.outbox_topics AS t) AS topics,
       (SELECT count(*) FROM dedup.outbox_retry) AS retry,
       (SELECT count(*) FROM dedup.outbox_dead) AS dead;

-- 1. A new batch.  A relay takes a batch (slot 1, generation 1) and holds
-- its id; the batch is acked (by it, or by another relay after a re-hand)
SELECT dedup_outbox_put('wrap', 'w-1', '{"n": 1}') IS NOT NULL AS put;
SELECT max(batch_id) AS old_id FROM dedup_outbox_take_batch('wrap', 10) \gset
SELECT slot, generation, busy FROM dedup.outbox_batches ORDER BY slot;
SELECT dedup_outbox_ack_batch(:old_id) AS acked;
-- 2^31 - 2 hand-outs of slot 1 later: its generation at the last value
UPDATE dedup.outbox_batches SET generation = 2147483647 WHERE slot = 1;
-- the next batch goes to a new slot, under an id never handed out
SELECT dedup_outbox_put('wrap', 'w-2', '{"n": 2}') IS NOT NULL AS put;
SELECT max(batch_id) AS new_id, count(*) AS events FROM dedup_outbox_take_batch('wrap', 10) \gset
SELECT :new_id <> :old_id AS new_id_differs, :events AS events;
SELECT slot, generation, busy FROM dedup.outbox_batches ORDER BY slot;
-- the id held across the wrap names no batch: ack, nack and heartbeat
-- answer as for a batch not handed out (0, 0, NULL), and change nothing
CREATE TEMP TABLE before AS SELECT * FROM relay_state;
SELECT dedup_outbox_ack_batch(:old_id) AS acked;
SELECT dedup_outbox_nack_batch(:old_id) AS nacked;
SELECT dedup_outbox_extend_batch(:old_id) AS extended;
SELECT r = b AS unchanged FROM relay_state AS r, before AS b;
DROP TABLE before;
-- the new batch is its relay's: acked by its id
SELECT dedup_outbox_ack_batch(:new_id) AS acked;
-- slot 1 is never handed out again: two batches at once take slots 2 and 3
SELECT count(*) AS put FROM (VALUES ('w-3'), ('w-4')) AS v(k),
  LATERAL dedup_outbox_put('wrap', k, '{}', aggregate_id => k) AS p;
SELECT count(*) AS taken FROM dedup_outbox_take_batch('wrap', 1);
SELECT count(*) AS taken FROM dedup_outbox_take_batch('wrap', 1);
SELECT slot, generation, busy FROM dedup.outbox_batches ORDER BY slot;

-- 2. A batch handed out again.  Slot 1 handed out at generation 1 (its id
-- held by a relay), acked; its generation set to the one before the last;
-- the next batch there is handed out at the last one, and its lease passes
TRUNCATE dedup.outbox, dedup.outbox_topics, dedup.outbox_batches, dedup.outbox_retry, dedup.outbox_held,
         dedup.outbox_dead, dedup.outbox_keys;
SELECT dedup_outbox_put('wrap', 'r-1', '{"n": 1}') IS NOT NULL AS put;
SELECT max(batch_id) AS first_id FROM dedup_outbox_take_batch('wrap', 10) \gset
SELECT dedup_outbox_ack_batch(:first_id) AS acked;
UPDATE dedup.outbox_batches SET generation = 2147483646 WHERE slot = 1;
SELECT dedup_outbox_put('wrap', 'r-2', '{"n": 2}') IS NOT NULL AS put;
SELECT max(batch_id) AS last_id FROM dedup_outbox_take_batch('wrap', 10) \gset
SELECT slot, generation, busy FROM dedup.outbox_batches ORDER BY slot;
UPDATE dedup.outbox_batches SET lease_until = now() - interval '1 second' WHERE busy;
-- handed out again, whole, under an id neither relay held before
SELECT max(batch_id) AS again_id, count(*) AS events, max(attempts) AS attempts,
       string_agg(payload->>'n', ',') AS events_of
FROM dedup_outbox_take_batch('wrap', 10) \gset
SELECT :again_id <> :first_id AS not_first_id, :again_id <> :last_id AS not_last_id,
       :events AS events, :attempts AS attempts, :'events_of' AS events_of;
SELECT slot, generation, busy, attempt FROM dedup.outbox_batches ORDER BY slot;
-- neither old id names it: nothing changes
CREATE TEMP TABLE before AS SELECT * FROM relay_state;
SELECT dedup_outbox_ack_batch(:first_id) AS acked_first, dedup_outbox_ack_batch(:last_id) AS acked_last;
SELECT dedup_outbox_nack_batch(:first_id) AS nacked_first, dedup_outbox_nack_batch(:last_id) AS nacked_last;
SELECT dedup_outbox_extend_batch(:first_id) AS extended_first, dedup_outbox_extend_batch(:last_id) AS extended_last;
SELECT r = b AS unchanged FROM relay_state AS r, before AS b;
DROP TABLE before;
SELECT dedup_outbox_ack_batch(:again_id) AS acked;
SELECT slot, generation, busy FROM dedup.outbox_batches ORDER BY slot;
DROP VIEW relay_state;
TRUNCATE dedup.outbox, dedup.outbox_topics, dedup.outbox_batches, dedup.outbox_retry, dedup.outbox_held,
         dedup.outbox_dead, dedup.outbox_keys;
SELECT dedup_reset_scope('wrap') AS reset;
