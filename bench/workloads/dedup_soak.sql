-- dedup under steady load with a short ttl (soak)
\set r random(1, 9223372036854775806)
BEGIN;
SELECT dedup_claim('bench-soak', 'msg-' || :r, ttl => make_interval(secs => :ttl));
INSERT INTO orders (message_id, amount) VALUES ('msg-' || :r, 1);
COMMIT;
