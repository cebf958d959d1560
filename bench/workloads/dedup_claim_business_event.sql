-- dedup: dedup_claim, the business row and its event (dedup_outbox_put, the
-- aggregate the claimed key) in one transaction, on one server
\set r random(1, 9223372036854775806)
BEGIN;
SELECT dedup_claim('bench', 'msg-' || :r);
INSERT INTO orders (message_id, amount) VALUES ('msg-' || :r, 1);
SELECT dedup_outbox_put('bench', 'msg-' || :r, jsonb_build_object('order', 'msg-' || :r), aggregate_id => 'msg-' || :r);
COMMIT;
