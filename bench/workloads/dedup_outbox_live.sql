-- producers of the live outbox run: the business insert and a put whose
-- payload holds the time of the put (the relay measures from it)
\set r random(1, 9223372036854775806)
BEGIN;
INSERT INTO orders (message_id, amount) VALUES ('msg-' || :r, 1);
SELECT dedup_outbox_put('bench-live', 'msg-' || :r, jsonb_build_object('t', clock_timestamp()),
                        aggregate_id => 'agg-' || :r, type => 'OrderCreated');
COMMIT;
