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
  -- ttl, lease, retention: no negative part, > 0, at most 100 years (22023)
  ($$SELECT dedup_claim('s', 'k', ttl => '0')$$),
  ($$SELECT dedup_claim('s', 'k', ttl => '-1 hour')$$),
  ($$SELECT dedup_claim('s', 'k', ttl => '1 day -25 hours')$$),
  ($$SELECT dedup_claim('s', 'k', ttl => '101 years')$$),
  ($$SELECT dedup_claim('s', 'k', ttl => '36526 days')$$),
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
  -- bad GUC values (those out of their range: test/sql/setting_ranges.sql)
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
-- functions refuse to run without the extension's tables (42P01); the
-- buckets of dedup.claims, once listed (by the cleanup's first step), are
-- found by OID, so that claims go on when a bucket is renamed
SELECT deleted FROM dedup_cleanup_batch(3::bigint << 32);
BEGIN;
ALTER TABLE dedup.claims RENAME TO claims_moved;
SELECT regress_try($$SELECT dedup_claim('s', 'k')$$);
ROLLBACK;
BEGIN;
ALTER TABLE dedup.scopes RENAME TO scopes_moved;
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

-- Bad input to the record, outbox and cleanup functions, and calls in a
-- read-only transaction: each case asserts the SQLSTATE and message, and
-- the state below is unchanged after all of them.
SELECT outcome FROM dedup_begin('rs', 'done');
SELECT dedup_complete('rs', 'done', 200, '{"kept": true}');
SELECT outcome, attempts FROM dedup_begin('rs', 'busy', lease => '1 hour');
SELECT dedup_outbox_put('t', 'e-1', '{"n": 1}') IS NOT NULL AS put;
CREATE TEMP TABLE before AS
SELECT (SELECT count(*) FROM dedup.claims) AS claims,
       (SELECT count(*) FROM dedup.scopes) AS scopes,
       (SELECT count(*) FROM dedup.outbox) AS outbox,
       (SELECT count(*) FROM dedup.outbox_dead) AS dead,
       (SELECT count(*) FROM dedup.outbox_keys) AS outbox_keys,
       (SELECT md5(string_agg(c::text, '|' ORDER BY c::text)) FROM dedup.claims AS c) AS claims_md5,
       (SELECT md5(string_agg(o::text, '|' ORDER BY o::text)) FROM dedup.outbox AS o) AS outbox_md5;

CREATE TEMP TABLE cases2 (n serial, stmt text);
INSERT INTO cases2 (stmt) VALUES
  -- records: NULLs (22004), empty or bad values (22023), bad jsonb (22P02)
  ($$SELECT dedup_begin(NULL, 'k')$$),
  ($$SELECT dedup_begin('rs', NULL)$$),
  ($$SELECT dedup_begin('', 'k')$$),
  ($$SELECT dedup_begin('rs', '')$$),
  ($$SELECT dedup_begin('rs', 'k', lease => '0')$$),
  ($$SELECT dedup_begin('rs', 'k', lease => '-1 second')$$),
  ($$SELECT dedup_begin('rs', 'k', '{"a":')$$),
  ($$SELECT dedup_complete(NULL, 'busy', 200)$$),
  ($$SELECT dedup_complete('rs', 'busy', 200, attempt => 0)$$),
  ($$SELECT dedup_release('rs', NULL)$$),
  ($$SELECT * FROM dedup_lookup(NULL, 'k')$$),
  -- the history's look-ups: NULLs (22004), empty (22023), too long (22001)
  ($$SELECT dedup_seen(NULL, 'k')$$),
  ($$SELECT dedup_seen('rs', NULL::text)$$),
  ($$SELECT dedup_seen('', 'k')$$),
  ($$SELECT dedup_seen('rs', '')$$),
  ($$SELECT count(*) FROM dedup_history('')$$),
  ($$SELECT count(*) FROM dedup_history(repeat('s', 201))$$),
  -- stored forms, and the cluster's functions on one server: empty (22023),
  -- too long (22001), no Citus (55000), not one of dedup's functions
  -- (42501), arguments missing (22023) or NULL (22004)
  ($$SELECT dedup_key('', 'k')$$),
  ($$SELECT dedup_key('rs', '')$$),
  ($$SELECT dedup_stream_key(repeat('s', 201), 'st')$$),
  ($$SELECT dedup_stream_key('rs', '')$$),
  ($$SELECT dedup_distribute()$$),
  ($$SELECT dedup.call_on_shard(dedup_key('rs', 'k'), 'pg_catalog.now()', '{}')$$),
  ($$SELECT dedup.call_on_shard(dedup_key('rs', 'k'), 'dedup_claim(text,text,interval,boolean)', '{rs,k}')$$),
  ($$SELECT dedup.call_on_shard(dedup_key('rs', 'k'), NULL, '{}')$$),
  -- records: wrong-state transitions (42704, 55000, 55006)
  ($$SELECT dedup_complete('rs', 'never-begun', 200)$$),
  ($$SELECT dedup_release('rs', 'never-begun')$$),
  ($$SELECT dedup_complete('rs', 'done', 200)$$),
  ($$SELECT dedup_release('rs', 'done')$$),
  ($$SELECT dedup_complete('rs', 'busy', 200, attempt => 2)$$),
  ($$SELECT dedup_release('rs', 'busy', attempt => 7)$$),
  -- outbox put: NULLs, empty values, bad headers, bad jsonb
  ($$SELECT dedup_outbox_put(NULL, 'k', '{}')$$),
  ($$SELECT dedup_outbox_put('t', 'k', NULL)$$),
  ($$SELECT dedup_outbox_put('', 'k', '{}')$$),
  ($$SELECT dedup_outbox_put('t', '', '{}')$$),
  ($$SELECT dedup_outbox_put('t', 'k', '{}', aggregate_id => '')$$),
  ($$SELECT dedup_outbox_put('t', 'k', '{}', type => '')$$),
  ($$SELECT dedup_outbox_put('t', 'k', '{}', aggregate_type => '')$$),
  ($$SELECT dedup_outbox_put('t', 'k', '{}', headers => '[1, 2]')$$),
  ($$SELECT dedup_outbox_put('t', 'k', '{"unterminated": ')$$),
  -- the relay: NULLs, batch sizes, unknown and not-taken events, arrays
  ($$SELECT count(*) FROM dedup_outbox_take(NULL)$$),
  ($$SELECT count(*) FROM dedup_outbox_take('t', 0)$$),
  ($$SELECT count(*) FROM dedup_outbox_take('t', 10001)$$),
  ($$SELECT count(*) FROM dedup_outbox_take_batch(NULL)$$),
  ($$SELECT count(*) FROM dedup_outbox_take_batch('t', 10001)$$),
  -- a wait past a minute (22023): a waiting take holds its snapshot
  ($$SELECT count(*) FROM dedup_outbox_take_batch('t', 10, wait => '61 seconds')$$),
  ($$SELECT count(*) FROM dedup_outbox_take_batch('t', 10, wait => '1 day')$$),
  -- a topic past the scope limit, refused before any look-up (22001): the
  -- fast take once copied it into a fixed buffer and crashed the server
  ($$SELECT count(*) FROM dedup_outbox_take(repeat('x', 300), 10)$$),
  ($$SELECT count(*) FROM dedup_outbox_take_batch(repeat('x', 300), 10)$$),
  ($$SELECT count(*) FROM dedup_outbox_take_batch(repeat('x', 100000), 10)$$),
  ($$SELECT dedup_outbox_ack_batch(NULL)$$),
  ($$SELECT dedup_outbox_ack_batch(1, ARRAY['a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'::uuid], '-1 second')$$),
  ($$SELECT dedup_outbox_nack_batch(NULL)$$),
  ($$SELECT dedup_outbox_nack_batch(1, NULL)$$),
  ($$SELECT dedup_outbox_ack(NULL)$$),
  ($$SELECT dedup_outbox_ack(ARRAY['a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'::uuid])$$),
  ($$SELECT dedup_outbox_ack(ARRAY[dedup_outbox_put('t', 'e-1', '{"n": 1}')])$$),
  ($$SELECT dedup_outbox_ack(ARRAY[dedup_outbox_put('t', 'e-1', '{"n": 1}')], ARRAY[1, 2])$$),
  ($$SELECT dedup_outbox_nack(NULL)$$),
  ($$SELECT dedup_outbox_nack(ARRAY[dedup_outbox_put('t', 'e-1', '{"n": 1}')], '-1 second')$$),
  ($$SELECT dedup_outbox_nack(ARRAY[dedup_outbox_put('t', 'e-1', '{"n": 1}')])$$),
  ($$SELECT dedup_outbox_redrive(NULL)$$),
  -- outbox put: a key put before with another event (22023, naming what
  -- differs); the same event again is no error (below)
  ($$SELECT dedup_outbox_put('t', 'e-1', '{"n": 2}')$$),
  ($$SELECT dedup_outbox_put('t', 'e-1', '{}')$$),
  ($$SELECT dedup_outbox_put('t', 'e-1', '{"n": 1}', aggregate_id => 'other')$$),
  ($$SELECT dedup_outbox_put('t', 'e-1', '{"n": 1}', type => 'OrderShipped')$$),
  ($$SELECT dedup_outbox_put('t', 'e-1', '{"n": 1}', headers => '{"trace": "x"}')$$),
  ($$SELECT dedup_outbox_put('t', 'e-1', '{"n": 1}', aggregate_type => 'Order')$$),
  -- cleanup
  ($$SELECT * FROM dedup_cleanup_batch(0, 0)$$),
  ($$SELECT * FROM dedup_cleanup_batch(-1)$$),
  ($$SELECT * FROM dedup_cleanup_batch(0, -5)$$),
  -- every writing function in a read-only transaction (25006)
  ($$SET TRANSACTION READ ONLY; SELECT dedup_begin('rs', 'k')$$),
  ($$SET TRANSACTION READ ONLY; SELECT dedup_complete('rs', 'busy', 200)$$),
  ($$SET TRANSACTION READ ONLY; SELECT dedup_release('rs', 'busy')$$),
  ($$SET TRANSACTION READ ONLY; SELECT dedup_reset_scope('s')$$),
  ($$SET TRANSACTION READ ONLY; SELECT dedup_outbox_put('t', 'k', '{}')$$),
  ($$SET TRANSACTION READ ONLY; SELECT count(*) FROM dedup_outbox_take('t')$$),
  ($$SET TRANSACTION READ ONLY; SELECT dedup_outbox_ack(ARRAY['a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'::uuid])$$),
  ($$SET TRANSACTION READ ONLY; SELECT dedup_outbox_nack(ARRAY['a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'::uuid])$$),
  ($$SET TRANSACTION READ ONLY; SELECT dedup_outbox_redrive('t')$$),
  ($$SET TRANSACTION READ ONLY; SELECT count(*) FROM dedup_outbox_take_batch('t')$$),
  ($$SET TRANSACTION READ ONLY; SELECT dedup_outbox_ack_batch(1)$$),
  ($$SET TRANSACTION READ ONLY; SELECT dedup_outbox_nack_batch(1)$$),
  ($$SET TRANSACTION READ ONLY; SELECT * FROM dedup_cleanup_batch()$$);
SELECT n, stmt, regress_try(stmt) AS result FROM cases2 ORDER BY n;

-- nothing changed: the same rows, the records and the event as they were
SELECT (SELECT count(*) FROM dedup.claims) = claims AS claims_same,
       (SELECT count(*) FROM dedup.scopes) = scopes AS scopes_same,
       (SELECT count(*) FROM dedup.outbox) = outbox AS outbox_same,
       (SELECT count(*) FROM dedup.outbox_dead) = dead AS dead_same,
       (SELECT count(*) FROM dedup.outbox_keys) = outbox_keys AS outbox_keys_same,
       (SELECT md5(string_agg(c::text, '|' ORDER BY c::text)) FROM dedup.claims AS c) = claims_md5 AS claims_rows_same,
       (SELECT md5(string_agg(o::text, '|' ORDER BY o::text)) FROM dedup.outbox AS o) = outbox_md5 AS outbox_rows_same
FROM before;
SELECT status, attempts, response FROM dedup_lookup('rs', 'done');
SELECT status, attempts FROM dedup_lookup('rs', 'busy');
SELECT pending, in_flight, dead FROM dedup_outbox_stats('t');
SELECT count(*) AS cases FROM cases2;
-- the same event again, its defaults given or not, is its id, unchanged
SELECT dedup_outbox_put('t', 'e-1', '{"n": 1}') = dedup_outbox_put('t', 'e-1', '{"n": 1}', aggregate_id => 'e-1',
       type => 't', headers => '{}', aggregate_type => 't') AS same_id,
       (SELECT count(*) FROM dedup.outbox) = outbox AS outbox_same,
       (SELECT md5(string_agg(o::text, '|' ORDER BY o::text)) FROM dedup.outbox AS o) = outbox_md5 AS outbox_rows_same
FROM before;

-- Every writing function reached in a parallel worker (through a user
-- function wrongly marked PARALLEL SAFE, forced into a worker) is refused
-- with 25000 by dedup itself, before it reads a scope (1.0 reached
-- PostgreSQL's snapshot manager first there: XX000); reading functions
-- work.  (A worker cannot catch errors, so each call is a statement.)
CREATE FUNCTION regress_parallel(stmt text) RETURNS text LANGUAGE plpgsql PARALLEL SAFE AS $$
BEGIN
    EXECUTE stmt;
    RETURN 'no error';
END
$$;
CREATE TEMP TABLE parallel_before AS
SELECT (SELECT md5(string_agg(c::text, '|' ORDER BY c::text)) FROM dedup.claims AS c) AS claims_md5,
       (SELECT md5(string_agg(o::text, '|' ORDER BY o::text)) FROM dedup.outbox AS o) AS outbox_md5;
-- force_parallel_mode, named debug_parallel_query from 16 on: whichever
-- this server has, and it is on (else no call below reaches a worker)
SELECT name AS parallel_setting FROM pg_settings
WHERE name IN ('force_parallel_mode', 'debug_parallel_query') \gset
SET :parallel_setting = on;
SELECT current_setting(:'parallel_setting') AS parallel_forced;
\set VERBOSITY sqlstate
SELECT regress_parallel($$SELECT dedup_claim('par', 'k')$$);
\set VERBOSITY terse
\set SHOW_CONTEXT never
SELECT regress_parallel($$SELECT dedup_claim('par', 'k')$$);
SELECT regress_parallel($$SELECT count(*) FROM dedup_claim_batch('par', ARRAY['k'])$$);
SELECT regress_parallel($$SELECT dedup_begin('par', 'k')$$);
SELECT regress_parallel($$SELECT dedup_complete('par', 'k', 200)$$);
SELECT regress_parallel($$SELECT dedup_release('par', 'k')$$);
SELECT regress_parallel($$SELECT dedup_outbox_put('par', 'k', '{}')$$);
SELECT regress_parallel($$SELECT count(*) FROM dedup_outbox_take('par')$$);
SELECT regress_parallel($$SELECT dedup_outbox_ack(ARRAY['a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'::uuid])$$);
SELECT regress_parallel($$SELECT dedup_outbox_nack(ARRAY['a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'::uuid])$$);
SELECT regress_parallel($$SELECT count(*) FROM dedup_lookup('par', 'k')$$);
SELECT regress_parallel($$SELECT ttl FROM dedup_scope('par')$$);
SELECT regress_parallel($$SELECT pending FROM dedup_outbox_stats('par')$$);
RESET :parallel_setting;
\set VERBOSITY default
\set SHOW_CONTEXT errors
SELECT (SELECT md5(string_agg(c::text, '|' ORDER BY c::text)) FROM dedup.claims AS c) = claims_md5 AS claims_same,
       (SELECT md5(string_agg(o::text, '|' ORDER BY o::text)) FROM dedup.outbox AS o) = outbox_md5 AS outbox_same
FROM parallel_before;
DROP FUNCTION regress_parallel(text);

-- nowait given in the ttl position matches no function (an overload taking
-- it would make dedup_claim('p', 'k', '1 hour') ambiguous): the hint names
-- the fix, which works; nothing was claimed by the slips
SELECT count(*) AS claims FROM dedup.claims \gset
SELECT dedup_claim('slip', 'k', true);
SELECT dedup_claim('slip', 'k', true, false);
SELECT count(*) FROM dedup_claim_batch('slip', ARRAY['k'], true);
SELECT public.dedup_claim('slip', 'k'::text, false);
-- other calls that match nothing keep PostgreSQL's hint
SELECT dedup_claim('slip', 'k', 1);
-- and so do a user's own functions of the same name: a call of one,
-- schema-qualified, that matches none of them, and a call by name with no
-- dedup function on the search_path, which cannot be the slip
CREATE SCHEMA regress_own;
CREATE FUNCTION regress_own.dedup_claim(scope text, key text, flag boolean) RETURNS boolean
LANGUAGE sql AS 'SELECT flag';
CREATE FUNCTION regress_own.dedup_claim_batch(scope text, keys text[], flag boolean) RETURNS boolean
LANGUAGE sql AS 'SELECT flag';
SELECT regress_own.dedup_claim('slip', 'k', true) AS own_matches;
SELECT regress_own.dedup_claim(1, 'k', true);
SELECT regress_own.dedup_claim_batch(1, ARRAY['k'], true);
SET search_path = regress_own;
SELECT dedup_claim(1, 'k', true);
RESET search_path;
-- the slip, schema-qualified with dedup's schema, still gets the fix
SELECT public.dedup_claim_batch('slip', ARRAY['k'], true);
DROP SCHEMA regress_own CASCADE;
SELECT count(*) - :claims AS claimed_by_slips FROM dedup.claims;
SELECT dedup_claim('slip', 'k', nowait => true) AS the_fix;
-- and the ttl by position, as a literal, still resolves
SELECT dedup_claim('slip', 'k2', '1 hour') AS ttl_by_position;
