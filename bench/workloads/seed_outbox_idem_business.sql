-- seed, idempotent: the business insert and an INSERT ... ON CONFLICT DO NOTHING on the event's key
\set r random(1, 9223372036854775806)
BEGIN;
INSERT INTO orders (message_id, amount) VALUES ('msg-' || :r, 1);
INSERT INTO seed_outbox_idem (event_key, aggregatetype, aggregateid, type, payload)
VALUES ('msg-' || :r, 'orders', 'agg-' || :r, 'OrderCreated', jsonb_build_object('order', 'msg-' || :r))
ON CONFLICT (event_key) DO NOTHING;
COMMIT;
