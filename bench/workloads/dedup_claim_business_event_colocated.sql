-- dedup on a Citus cluster: dedup_claim, the business row and its event,
-- all three in the shard of dedup_key('bench', the key): the claim's, the
-- business row's (distributed by it) and the event's partition (its
-- aggregate is the key, its topic the scope)
\set r random(1, 9223372036854775806)
BEGIN;
SELECT dedup_claim('bench', 'msg-' || :r);
INSERT INTO orders (key, message_id, amount) VALUES (dedup_key('bench', 'msg-' || :r), 'msg-' || :r, 1);
SELECT dedup_outbox_put('bench', 'msg-' || :r, jsonb_build_object('order', 'msg-' || :r), aggregate_id => 'msg-' || :r);
COMMIT;
