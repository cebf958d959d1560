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

-- dedup.require_declared_scopes: a write under a scope dedup_set_scope()
-- never declared is refused (22023, naming it), as when a key is passed
-- where the scope goes; nothing is written, not even the scope's
-- counters; reads of it find nothing; a declared scope works
SET dedup.require_declared_scopes = on;
SELECT configured AS declared FROM dedup_set_scope('payments-consumer');
CREATE TEMP TABLE counted AS
  SELECT (SELECT count(*) FROM dedup_scope_stats()) AS n, (SELECT count(*) FROM dedup.claims) AS claims,
         (SELECT count(*) FROM dedup.outbox) AS events, (SELECT count(*) FROM dedup.streams) AS streams;
SELECT regress_try($$SELECT dedup_claim('m-1', 'payments-consumer')$$) AS swapped;
SELECT regress_try($$SELECT * FROM dedup_claim_batch('m-1', ARRAY['a'])$$) AS batch;
SELECT regress_try($$SELECT * FROM dedup_begin('m-1', 'k')$$) AS begin;
SELECT regress_try($$SELECT dedup_outbox_put('m-1', 'k', '{}')$$) AS put;
SELECT regress_try($$SELECT dedup_advance('m-1', 'p', 1)$$) AS advance;
SELECT count(*) = (SELECT claims FROM counted) AS no_claims,
       (SELECT count(*) FROM dedup.outbox) = (SELECT events FROM counted) AS no_events,
       (SELECT count(*) FROM dedup.streams) = (SELECT streams FROM counted) AS no_streams,
       (SELECT count(*) FROM dedup_scope_stats()) = (SELECT n FROM counted) AS no_counters
FROM dedup.claims;
SELECT dedup_seen('m-1', 'payments-consumer') AS read_finds_nothing;
SELECT dedup_claim('payments-consumer', 'm-1') AS declared_scope_claims;
RESET dedup.require_declared_scopes;
SELECT dedup_claim('m-1', 'payments-consumer') AS off_again;
SELECT dedup_reset_scope('payments-consumer') AS reset;
-- a quoted literal alone is read as a fingerprint: the hint says how to
-- fingerprint it instead
SELECT dedup_fingerprint('hello');

TRUNCATE dedup.claims;

-- dedup_scope shows every setting dedup_set_scope (the owner's) shows, to
-- a role granted usage of the scope: sequence_mode, history and its
-- false_positive_rate too (NULL without a history; a history's in
-- history.sql); reading writes nothing
SELECT sequence_mode, history, false_positive_rate
FROM dedup_set_scope('shown', sequence_mode => 'strict');
SELECT scope, sequence_mode, history, false_positive_rate FROM dedup_scope('plain');
CREATE ROLE regress_scope_reader;
SELECT dedup_grant_usage('regress_scope_reader', ARRAY['shown']);
CREATE TEMP TABLE scopes_before AS SELECT * FROM dedup.scopes;
SET ROLE regress_scope_reader;
SELECT scope, ttl, configured, sequence_mode, history, false_positive_rate FROM dedup_scope('shown');
RESET ROLE;
SELECT (SELECT count(*) FROM dedup.scopes) = (SELECT count(*) FROM scopes_before) AS scopes_same,
       NOT EXISTS (SELECT * FROM dedup.scopes EXCEPT SELECT * FROM scopes_before) AS rows_same;
SELECT dedup_revoke_usage('regress_scope_reader', ARRAY['shown']);
DROP OWNED BY regress_scope_reader;
DROP ROLE regress_scope_reader;
SELECT dedup_reset_scope('shown');
