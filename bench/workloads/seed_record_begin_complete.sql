-- seed (Stripe style): begin with ON CONFLICT DO UPDATE ... RETURNING, then complete with an UPDATE (two transactions)
\set r random(1, 9223372036854775806)
INSERT INTO seed_stripe (key, status, expires_at) VALUES ('req-' || :r, 'processing', now() + interval '1 day')
ON CONFLICT (key) DO UPDATE SET status = seed_stripe.status
RETURNING (xmax = 0) AS inserted, status, response;
UPDATE seed_stripe SET status = 'complete', response = '{"id": 1, "status": "succeeded"}'
WHERE key = 'req-' || :r AND status = 'processing';
