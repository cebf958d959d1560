-- baseline: the business transaction alone (one INSERT into orders)
\set r random(1, 9223372036854775806)
BEGIN;
INSERT INTO orders (message_id, amount) VALUES ('msg-' || :r, 1);
COMMIT;
