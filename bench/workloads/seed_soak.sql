-- seed under steady load with a short ttl (soak)
\set r random(1, 9223372036854775806)
BEGIN;
INSERT INTO seed_idem (key, expires_at) VALUES ('msg-' || :r, now() + make_interval(secs => :ttl)) ON CONFLICT DO NOTHING;
INSERT INTO orders (message_id, amount) VALUES ('msg-' || :r, 1);
COMMIT;
