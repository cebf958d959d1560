-- dedup: the claim inside the business statement (insert only when new)
\set r random(1, 9223372036854775806)
BEGIN;
INSERT INTO orders (message_id, amount)
SELECT 'msg-' || :r, 1 WHERE dedup_claim('bench', 'msg-' || :r);
COMMIT;
