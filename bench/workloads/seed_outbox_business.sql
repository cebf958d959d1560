-- seed: the business insert and a plain INSERT into a hand-written outbox table
\set r random(1, 9223372036854775806)
BEGIN;
INSERT INTO orders (message_id, amount) VALUES ('msg-' || :r, 1);
INSERT INTO seed_outbox (aggregatetype, aggregateid, type, payload)
VALUES ('orders', 'agg-' || :r, 'OrderCreated', jsonb_build_object('order', 'msg-' || :r));
COMMIT;
