-- seed: hand-written dedup table, INSERT ... ON CONFLICT DO NOTHING, then the business insert
\set r random(1, 9223372036854775806)
BEGIN;
INSERT INTO seed_idem (key, expires_at) VALUES ('msg-' || :r, now() + interval '1 day') ON CONFLICT DO NOTHING;
INSERT INTO orders (message_id, amount) VALUES ('msg-' || :r, 1);
COMMIT;
