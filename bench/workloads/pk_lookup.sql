-- reference: a plain primary-key lookup of an existing key
\set r random(1, :dupkeys)
SELECT expires_at > now() FROM seed_idem WHERE key = 'dup-' || :r;
