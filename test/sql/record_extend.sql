-- dedup_extend: a record's heartbeat.  The holder of an attempt extends its
-- lease (and the record's expiry with it); a stale attempt, a record not
-- processing, or bad input is refused with its SQLSTATE, changing nothing.
TRUNCATE dedup.claims;
\pset null '(null)'
CREATE FUNCTION pg_temp.end_lease() RETURNS void LANGUAGE sql AS $$
  UPDATE dedup.claims SET record.lease_until = clock_timestamp() - interval '1 second'
  WHERE (record).status = 'p'
$$;
SELECT scope, lease, ttl FROM dedup_set_scope('hb', lease => '2 minutes', ttl => '1 hour');

-- the holder extends its lease: from the time of the call, the record's
-- expiry a ttl after the new end; the result is the new end
SELECT outcome, attempts FROM dedup_begin('hb', 'job-1', lease => '1 minute');
SELECT dedup_extend('hb', 'job-1', 1, '10 minutes') AS new_end \gset
SELECT :'new_end'::timestamptz = lease_expires_at AS returns_the_lease_end,
       lease_expires_at - now() BETWEEN interval '9 minutes 59 seconds' AND interval '10 minutes 1 second' AS ten_minutes_on,
       expires_at - lease_expires_at AS expiry_after_lease, status, attempts
FROM dedup_lookup('hb', 'job-1');
-- without a lease, the scope's
SELECT dedup_extend('hb', 'job-1', 1) - now() BETWEEN interval '1 minute 59 seconds' AND interval '2 minutes 1 second' AS scope_lease;
-- a shorter lease shortens it: the lease ends at the time of the call + lease
SELECT dedup_extend('hb', 'job-1', 1, '5 seconds') - now() < interval '6 seconds' AS shortened;
-- while extended, another begin is in progress, and nothing is taken over
SELECT dedup_extend('hb', 'job-1', 1, '10 minutes') IS NOT NULL AS extended;
SELECT outcome, attempts FROM dedup_begin('hb', 'job-1');
-- a lease that passed, taken over by nobody: its holder may still extend it
SELECT pg_temp.end_lease();
SELECT dedup_extend('hb', 'job-1', 1, '10 minutes') > now() AS revived;
SELECT outcome, attempts FROM dedup_begin('hb', 'job-1');
-- the holder completes as usual after heartbeats
SELECT dedup_complete('hb', 'job-1', 200, '{"ok": true}', attempt => 1);
SELECT status, attempts, response FROM dedup_lookup('hb', 'job-1');

-- every kind of key
SELECT outcome FROM dedup_begin('hb', 77);
SELECT dedup_extend('hb', 77, 1, '1 hour') > now() + interval '59 minutes' AS bigint_key;
SELECT dedup_extend('hb', '77', 1, '1 hour') > now() + interval '59 minutes' AS same_key_as_text;
SELECT outcome FROM dedup_begin('hb', 'c0ffee00-0000-4000-8000-000000000001'::uuid);
SELECT dedup_extend('hb', 'C0FFEE00-0000-4000-8000-000000000001'::uuid, 1) IS NOT NULL AS uuid_key;
SELECT outcome FROM dedup_begin('hb', '\xbeef'::bytea);
SELECT dedup_extend('hb', '\xbeef'::bytea, 1) IS NOT NULL AS bytea_key;
SELECT outcome FROM dedup_begin('hb', dedup_fingerprint('f'::text));
SELECT dedup_extend('hb', dedup_fingerprint('f'::text), 1) IS NOT NULL AS fingerprint_key;

-- refusals, each changing nothing
SELECT outcome FROM dedup_begin('hb', 'job-2', lease => '1 minute');
SELECT pg_temp.end_lease();
SELECT outcome, attempts FROM dedup_begin('hb', 'job-2', lease => '1 minute');   -- taken over: attempt 2
SELECT dedup_claim('hb', 'plain');
SELECT outcome FROM dedup_begin('hb', 'job-3');
SELECT dedup_release('hb', 'job-3', attempt => 1);
CREATE TEMP TABLE before AS SELECT key, expires_at, record FROM dedup.claims;
-- the stale attempt: another took the key over
SELECT regress_try($$SELECT dedup_extend('hb', 'job-2', 1, '1 hour')$$);
-- an attempt the record never had
SELECT regress_try($$SELECT dedup_extend('hb', 'job-2', 3)$$);
-- complete, a plain claim, released, never begun
SELECT regress_try($$SELECT dedup_extend('hb', 'job-1', 1)$$);
SELECT regress_try($$SELECT dedup_extend('hb', 'plain', 1)$$);
SELECT regress_try($$SELECT dedup_extend('hb', 'job-3', 1)$$);
SELECT regress_try($$SELECT dedup_extend('hb', 'never', 1)$$);
-- bad input
SELECT regress_try($$SELECT dedup_extend('hb', 'job-2', NULL)$$);
SELECT regress_try($$SELECT dedup_extend('hb', 'job-2', 0)$$);
SELECT regress_try($$SELECT dedup_extend('hb', 'job-2', 2, '-1 minute')$$);
SELECT regress_try($$SELECT dedup_extend('hb', 'job-2', 2, '0 seconds')$$);
SELECT regress_try($$SELECT dedup_extend('hb', NULL::text, 2)$$);
SELECT regress_try($$SELECT dedup_extend('hb', '', 2)$$);
SELECT regress_try($$SELECT dedup_extend('', 'job-2', 2)$$);
SELECT (SELECT count(*) FROM (SELECT key, expires_at, record FROM dedup.claims EXCEPT SELECT * FROM before) AS d)
     + (SELECT count(*) FROM (SELECT * FROM before EXCEPT SELECT key, expires_at, record FROM dedup.claims) AS d) AS rows_changed;
-- the holder of attempt 2 extends it
SELECT dedup_extend('hb', 'job-2', 2, '1 hour') > now() + interval '59 minutes' AS holder_extends;
-- an expired record (lease and ttl passed) has no record to extend
UPDATE dedup.claims SET expires_at = clock_timestamp() - interval '1 second';
SELECT regress_try($$SELECT dedup_extend('hb', 'job-2', 2)$$);
DROP TABLE before;
SELECT dedup_reset_scope('hb');
TRUNCATE dedup.claims;
