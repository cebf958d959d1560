-- dedup: the advance inside the business statement (insert only when it moved)
\set p random(0, 99)
\set r random(1, 9223372036854775806)
BEGIN;
INSERT INTO orders (message_id, amount)
SELECT 'msg-' || :r, 1
WHERE dedup_advance('bench-seq', 'p-' || :p, (extract(epoch FROM clock_timestamp()) * 1000000)::bigint);
COMMIT;
