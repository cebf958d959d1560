-- dedup: a stream's mark advanced in the business transaction (100 streams,
-- sequence numbers from the clock, so each advance moves its stream's mark)
\set p random(0, 99)
\set r random(1, 9223372036854775806)
BEGIN;
SELECT dedup_advance('bench-seq', 'p-' || :p, (extract(epoch FROM clock_timestamp()) * 1000000)::bigint);
INSERT INTO orders (message_id, amount) VALUES ('msg-' || :r, 1);
COMMIT;
