-- dedup: dedup_claim in the business transaction
\set r random(1, 9223372036854775806)
BEGIN;
SELECT dedup_claim('bench', 'msg-' || :r);
INSERT INTO orders (message_id, amount) VALUES ('msg-' || :r, 1);
COMMIT;
