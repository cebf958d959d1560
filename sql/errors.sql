-- Bad input to the claim and scope functions: each case asserts the SQLSTATE
-- and message, and that nothing was written.

CREATE TEMP TABLE cases (n serial, stmt text);
INSERT INTO cases (stmt) VALUES
  -- NULLs: null_value_not_allowed (22004)
  ($$SELECT dedup_claim(NULL, 'k')$$),
  ($$SELECT dedup_claim('s', NULL::text)$$),
  ($$SELECT dedup_claim('s', NULL::bytea)$$),
  ($$SELECT dedup_claim('s', NULL::uuid)$$),
  ($$SELECT dedup_claim('s', NULL::dedup_fingerprint)$$),
  ($$SELECT dedup_claim('s', 'k', nowait => NULL)$$),
  ($$SELECT * FROM dedup_claim_batch(NULL, ARRAY['k'])$$),
  ($$SELECT * FROM dedup_claim_batch('s', NULL::text[])$$),
  ($$SELECT * FROM dedup_claim_batch('s', ARRAY['a', NULL, 'b'])$$),
  ($$SELECT * FROM dedup_scope(NULL)$$),
  ($$SELECT * FROM dedup_set_scope(NULL, '1h')$$),
  ($$SELECT dedup_reset_scope(NULL)$$),
  ($$SELECT dedup_grant_usage(NULL)$$),
  ($$SELECT dedup_grant_relay(NULL)$$),
  -- empty scope or key: invalid_parameter_value (22023)
  ($$SELECT dedup_claim('', 'k')$$),
  ($$SELECT dedup_claim('s', '')$$),
  ($$SELECT dedup_claim('s', ''::bytea)$$),
  ($$SELECT * FROM dedup_claim_batch('s', ARRAY['a', '', 'b'])$$),
  ($$SELECT * FROM dedup_claim_batch('', ARRAY['a'])$$),
  ($$SELECT * FROM dedup_set_scope('', '1h')$$),
  -- ttl, lease, retention must be > 0 and at most 100 years (22023)
  ($$SELECT dedup_claim('s', 'k', ttl => '0')$$),
  ($$SELECT dedup_claim('s', 'k', ttl => '-1 hour')$$),
  ($$SELECT dedup_claim('s', 'k', ttl => '1 day -25 hours')$$),
  ($$SELECT dedup_claim('s', 'k', ttl => '101 years')$$),
  ($$SELECT dedup_claim('s', 'k', ttl => '36001 days')$$),
  ($$SELECT dedup_claim('s', 'k', ttl => '1000000 hours')$$),
  ($$SELECT * FROM dedup_claim_batch('s', ARRAY['a'], ttl => '0')$$),
  ($$SELECT * FROM dedup_set_scope('s', ttl => '0')$$),
  ($$SELECT * FROM dedup_set_scope('s', lease => '-1 second')$$),
  ($$SELECT * FROM dedup_set_scope('s', retention => '200 years')$$),
  ($$SELECT * FROM dedup_set_scope('s', ttl => '1 hour', lease => '0')$$),
  -- absurd sizes
  ($$SELECT dedup_claim(repeat('s', 201), 'k')$$),
  ($$SELECT * FROM dedup_set_scope(repeat('s', 201), '1h')$$),
  ($$SELECT count(*) FROM dedup_claim_batch('s', ARRAY(SELECT i::text FROM generate_series(1, 100001) i))$$),
  ($$SELECT * FROM dedup_claim_batch('s', ARRAY[['a'], ['b']])$$),
  -- bad GUC values
  ($$SET dedup.default_ttl = 0$$),
  ($$SET dedup.default_ttl = '-1h'$$),
  ($$SET dedup.no_such_setting = 1$$),
  -- a read-only transaction
  ($$SET TRANSACTION READ ONLY; SELECT dedup_claim('s', 'k')$$);

-- wrapped in a transaction per case so that SET TRANSACTION works
SELECT n, stmt, regress_try(stmt) AS result FROM cases ORDER BY n;

-- nothing was written by any of them
SELECT count(*) AS claims FROM dedup.claims;
SELECT count(*) AS scopes FROM dedup.scopes;

-- the read-only checks apply outside the wrapper too
BEGIN READ ONLY;
SELECT dedup_claim('s', 'k');
ROLLBACK;
BEGIN READ ONLY;
SELECT * FROM dedup_claim_batch('s', ARRAY['k']);
ROLLBACK;
BEGIN READ ONLY;
SELECT * FROM dedup_set_scope('s', '1h');
ROLLBACK;
-- a call in an aborted transaction is refused by PostgreSQL itself (25P02)
BEGIN;
SELECT 1/0;
SELECT dedup_claim('s', 'k');
ROLLBACK;
-- functions refuse to run without the extension's tables (42P01)
BEGIN;
ALTER TABLE dedup.claims RENAME TO claims_moved;
SELECT regress_try($$SELECT dedup_claim('s', 'k')$$);
ROLLBACK;
-- privileges: nothing that writes is executable by PUBLIC
CREATE ROLE regress_dedup_nobody NOLOGIN;
SET ROLE regress_dedup_nobody;
SELECT regress_try($$SELECT dedup_claim('s', 'k')$$);
SELECT regress_try($$SELECT * FROM dedup_claim_batch('s', ARRAY['k'])$$);
SELECT regress_try($$SELECT * FROM dedup_set_scope('s', '1h')$$);
SELECT regress_try($$SELECT dedup_reset_scope('s')$$);
SELECT regress_try($$SELECT * FROM dedup_scope('s')$$);
SELECT regress_try($$SELECT dedup_grant_usage('regress_dedup_nobody')$$);
SELECT regress_try($$SELECT count(*) FROM dedup.claims$$);
SELECT regress_try($$SELECT count(*) FROM dedup.scopes$$);
-- the pure fingerprint functions are for everyone
SELECT dedup_fingerprint('abc'::text) IS NOT NULL AS fingerprint_for_all;
RESET ROLE;
DROP ROLE regress_dedup_nobody;

-- a malformed list of cleanup databases is refused (22023) and nothing is
-- written to postgresql.auto.conf
\set VERBOSITY sqlstate
ALTER SYSTEM SET dedup.cleanup_databases = 'app, "unterminated';
\set VERBOSITY default
SELECT count(*) AS written FROM pg_file_settings WHERE name = 'dedup.cleanup_databases';

SELECT count(*) AS claims FROM dedup.claims;
SELECT count(*) AS scopes FROM dedup.scopes;
