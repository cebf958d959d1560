-- seed: the ON CONFLICT DO NOTHING claim inside the business statement (insert only when new)
\set r random(1, 9223372036854775806)
BEGIN;
WITH claim AS (
  INSERT INTO seed_idem (key, expires_at) VALUES ('msg-' || :r, now() + interval '1 day')
  ON CONFLICT DO NOTHING RETURNING key)
INSERT INTO orders (message_id, amount) SELECT key, 1 FROM claim;
COMMIT;
