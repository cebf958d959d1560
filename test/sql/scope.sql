-- Scope settings: defaults from GUCs, per-scope rows, set/get/reset.

-- a scope with no row uses the GUC defaults
SELECT * FROM dedup_scope('orders');
SET dedup.default_ttl = '2h';
SET dedup.default_lease = '30s';
SET dedup.default_retention = '3d';
SELECT * FROM dedup_scope('orders');
RESET dedup.default_ttl;
RESET dedup.default_lease;
RESET dedup.default_retention;

-- setting one value keeps the others at their defaults
SELECT * FROM dedup_set_scope('orders', ttl => '15 minutes');
-- NULL leaves a setting as it is
SELECT * FROM dedup_set_scope('orders', lease => '1 minute');
SELECT * FROM dedup_set_scope('orders', NULL, NULL, '1 day');
SELECT * FROM dedup_scope('orders');
SELECT scope, ttl, lease, retention FROM dedup.scopes ORDER BY scope;
-- the GUC default applies where the scope leaves a setting NULL... here none
SET dedup.default_ttl = '5h';
SELECT ttl FROM dedup_scope('orders');
RESET dedup.default_ttl;

-- a claim without a ttl uses the scope's ttl, then the default
SELECT dedup_claim('orders', 'o-1');
SELECT dedup_claim('elsewhere', 'o-1');
SELECT (SELECT expires_at - clock_timestamp() FROM dedup.claims
        WHERE key = (SELECT key FROM dedup.claims ORDER BY expires_at LIMIT 1))
       BETWEEN interval '14 minutes' AND interval '15 minutes' AS scope_ttl_used;
SELECT (SELECT max(expires_at) - clock_timestamp() FROM dedup.claims)
       BETWEEN interval '23 hours 59 minutes' AND interval '1 day' AS default_ttl_used;
-- an explicit ttl wins over both
SELECT dedup_claim('orders', 'o-2', ttl => '10 seconds');
SELECT count(*) AS short_lived FROM dedup.claims
WHERE expires_at - clock_timestamp() BETWEEN interval '0' AND interval '10 seconds';

-- scope names are case- and byte-exact
SELECT configured FROM dedup_scope('Orders');

-- reset forgets the row
SELECT dedup_reset_scope('orders');
SELECT dedup_reset_scope('orders');
SELECT * FROM dedup_scope('orders');
SELECT count(*) FROM dedup.scopes;

-- a setting change is seen by the next claim in the same transaction
BEGIN;
SELECT ttl FROM dedup_set_scope('tx-scope', ttl => '1 minute');
SELECT dedup_claim('tx-scope', 'k');
SELECT count(*) AS one_minute FROM dedup.claims
WHERE expires_at - clock_timestamp() BETWEEN interval '50 seconds' AND interval '1 minute';
ROLLBACK;
SELECT configured FROM dedup_scope('tx-scope');

TRUNCATE dedup.claims;
