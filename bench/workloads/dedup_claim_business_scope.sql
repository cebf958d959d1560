-- dedup: dedup_claim in the business transaction, on the scope given with -D scope=NAME
\set r random(1, 9223372036854775806)
BEGIN;
SELECT dedup_claim(:scope, 'msg-' || :r);
INSERT INTO orders (message_id, amount) VALUES ('msg-' || :r, 1);
COMMIT;
