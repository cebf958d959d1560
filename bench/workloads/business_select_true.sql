-- the floor of any extra statement: the business transaction with a SELECT true
\set r random(1, 9223372036854775806)
BEGIN;
SELECT true;
INSERT INTO orders (message_id, amount) VALUES ('msg-' || :r, 1);
COMMIT;
