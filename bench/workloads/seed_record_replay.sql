-- seed (Stripe style): a retried request finds the completed key and its response
\set r random(1, :dupkeys)
INSERT INTO seed_stripe (key, status, expires_at) VALUES ('dup-' || :r, 'processing', now() + interval '1 day')
ON CONFLICT (key) DO UPDATE SET status = seed_stripe.status
RETURNING (xmax = 0) AS inserted, status, response;
