-- seed: claim of an existing key with ON CONFLICT DO NOTHING plus a SELECT of its expiry
\set r random(1, :dupkeys)
WITH ins AS (
  INSERT INTO seed_idem (key, expires_at) VALUES ('dup-' || :r, now() + interval '1 day')
  ON CONFLICT DO NOTHING RETURNING 1)
SELECT EXISTS (SELECT 1 FROM ins) AS inserted,
       (SELECT expires_at > now() FROM seed_idem WHERE key = 'dup-' || :r) AS live;
