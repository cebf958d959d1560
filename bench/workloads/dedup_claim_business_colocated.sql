-- dedup on a Citus cluster: dedup_claim in the business transaction, the
-- business row co-located with the claim (distributed by dedup_key)
\set r random(1, 9223372036854775806)
BEGIN;
SELECT dedup_claim('bench', 'msg-' || :r);
INSERT INTO orders (key, message_id, amount) VALUES (dedup_key('bench', 'msg-' || :r), 'msg-' || :r, 1);
COMMIT;
