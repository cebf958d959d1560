-- dedup: the business insert and an idempotent outbox put
\set r random(1, 9223372036854775806)
BEGIN;
INSERT INTO orders (message_id, amount) VALUES ('msg-' || :r, 1);
SELECT dedup_outbox_put('bench-orders', 'msg-' || :r, jsonb_build_object('order', 'msg-' || :r),
                        aggregate_id => 'agg-' || :r, type => 'OrderCreated');
COMMIT;
