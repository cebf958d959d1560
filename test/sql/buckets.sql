-- The time buckets of dedup.claims: the cleanup opens the next bucket every
-- dedup.bucket_interval, switches to it, seals the old one, and drops it
-- whole once every row in it has expired.  Calls read every bucket, newest
-- first, and write the current one.  Time is moved by hand here: a bucket
-- is aged by its opened_at, and a sealed bucket's rows expired by setting
-- their expiry and its max_expires_at in the past, as the clock would.
SET dedup.cleanup_pause = 0;
-- start from a database with no buckets (earlier tests ran the cleanup)
CALL regress_reset_buckets();
-- the stored fingerprint of a key within a scope (fingerprint.c's encoding)
CREATE FUNCTION pg_temp.key_fp(scope text, key text) RETURNS dedup_fingerprint
LANGUAGE sql IMMUTABLE AS $$
  SELECT encode(substring(sha256('dedup/v1/claim'::bytea || '\x00'::bytea
                || int4send(octet_length(convert_to(scope, 'UTF8')))
                || convert_to(scope, 'UTF8') || convert_to(key, 'UTF8')) FROM 1 FOR 16), 'hex')::dedup_fingerprint
$$;
CREATE TEMP VIEW buckets AS
  SELECT bucket, relid, state, claims, records FROM dedup.buckets ORDER BY bucket;
CREATE TEMP VIEW rows_by_bucket AS
  SELECT tableoid::regclass AS bucket, count(*) AS rows,
         count(*) FILTER (WHERE expires_at > clock_timestamp()) AS live
  FROM dedup.claims GROUP BY 1 ORDER BY 1;

-- a new database: dedup.claims is bucket 0, current; the first pass lists it
SELECT count(*) AS listed FROM dedup.buckets;
CALL dedup_cleanup();
SELECT * FROM buckets;
-- bucket 0 is younger than dedup.bucket_interval (6 hours): a pass keeps it
CALL dedup_cleanup();
SELECT * FROM buckets;

-- three claims, a record in progress, and a claim that has expired
SELECT count(*) FROM dedup_claim_batch('b', ARRAY['a', 'b', 'c']);
SELECT outcome FROM dedup_begin('b-api', 'r1', lease => '1 hour');
SELECT dedup_claim('b', 'old');
UPDATE dedup.claims SET expires_at = clock_timestamp() - interval '1 minute'
WHERE key = pg_temp.key_fp('b', 'old');

-- a switch whose steps run in one transaction waits for the next pass: a
-- call that began before the next bucket was listed might not read it
BEGIN;
UPDATE dedup.buckets SET opened_at = opened_at - interval '7 hours';
SELECT deleted, next_position FROM dedup_cleanup_batch(3::bigint << 32);
SELECT deleted, next_position FROM dedup_cleanup_batch((3::bigint << 32) + 1);
SELECT * FROM buckets;
COMMIT;
-- the next pass switches to bucket 1 and seals bucket 0: its latest expiry
-- is that of its rows (the record's lease plus its ttl); nothing is deleted,
-- not even the expired claim: bucket 0 being due for the switch, its first
-- stage leaves it to go with the bucket
CALL dedup_cleanup();
SELECT * FROM buckets;
SELECT max_expires_at = (SELECT max(expires_at) FROM ONLY dedup.claims) AS sealed_at_latest_expiry
FROM dedup.buckets WHERE bucket = 0;
SELECT pg_catalog.pg_describe_object(classid, objid, 0) AS bucket, deptype
FROM pg_depend WHERE refclassid = 'pg_extension'::regclass
  AND objid = 'dedup.claims_1'::regclass;

-- keys of bucket 0 are still duplicates; new keys go into bucket 1; the
-- expired key is new again, its new row in bucket 1
SELECT dedup_claim('b', 'a') AS a, dedup_claim('b', 'd') AS d, dedup_claim('b', 'old') AS old;
SELECT dedup_claim_batch('b', ARRAY['b', 'e', 'd']) AS batch;
SELECT * FROM rows_by_bucket;
-- the record completes: its new version goes into bucket 1, and the one in
-- bucket 0 is deleted, so that bucket 0 can go once its rows have expired
SELECT dedup_complete('b-api', 'r1', 200, '{"ok": true}', attempt => 1);
SELECT tableoid::regclass AS bucket, (record).status FROM dedup.claims
WHERE key = pg_temp.key_fp('b-api', 'r1');
SELECT outcome, response FROM dedup_begin('b-api', 'r1');
SELECT * FROM rows_by_bucket;

-- bucket 0's rows expire: the next pass retires it and empties it (it is
-- dedup.claims itself: TRUNCATE ONLY), counting the rows it held then
-- (the record moved out of it) as deleted
CREATE TEMP TABLE figures_before AS
  SELECT kind, rows_deleted FROM dedup_cleanup_stats();
UPDATE ONLY dedup.claims SET expires_at = clock_timestamp() - interval '1 second';
UPDATE dedup.buckets SET max_expires_at = clock_timestamp() - interval '1 second' WHERE bucket = 0;
CALL dedup_cleanup();
SELECT * FROM buckets;
SELECT s.kind, s.rows_deleted - b.rows_deleted AS deleted
FROM dedup_cleanup_stats() s JOIN figures_before b USING (kind) ORDER BY kind;
SELECT * FROM rows_by_bucket;
-- what was in bucket 0 is gone (a and c new again); bucket 1's keys stay
SELECT dedup_claim_batch('b', ARRAY['a', 'c', 'd', 'old']) AS batch;

-- a second switch: bucket 2 current, bucket 1 sealed and read
UPDATE dedup.buckets SET opened_at = opened_at - interval '7 hours' WHERE state = 'c';
CALL dedup_cleanup();
SELECT * FROM buckets;
SELECT dedup_claim('b', 'e') AS e, dedup_claim('b', 'f') AS f;
SELECT * FROM rows_by_bucket;
-- a sealed bucket has a filter of its keys in shared memory (dedup is
-- preloaded here): a new key the filter rules out does not read the bucket,
-- a key it holds does.  2,000 more keys in bucket 2, then sealed as bucket 3
-- opens; 1,000 new keys read bucket 2's index a handful of times at most
-- (the filter's false positives), its own keys every time.
SELECT count(*) FROM dedup_claim_batch('f', ARRAY(SELECT 'in-2-' || g FROM generate_series(1, 2000) g));
UPDATE dedup.buckets SET opened_at = opened_at - interval '7 hours' WHERE state = 'c';
CALL dedup_cleanup();
SELECT * FROM buckets;
-- (the backend's counts of index scans include its earlier transactions'
-- until they are reported: differences are counted)
BEGIN;
SELECT pg_stat_get_xact_numscans('dedup.claims_2_pkey'::regclass) AS scans \gset
SELECT count(*) AS new FROM dedup_claim_batch('f', ARRAY(SELECT 'new-' || g FROM generate_series(1, 1000) g));
SELECT pg_stat_get_xact_numscans('dedup.claims_2_pkey'::regclass) - :scans < 10 AS few_reads_of_bucket_2;
SELECT pg_stat_get_xact_numscans('dedup.claims_2_pkey'::regclass) AS scans \gset
SELECT count(*) AS new FROM dedup_claim_batch('f', ARRAY(SELECT 'in-2-' || g FROM generate_series(1, 1000) g));
SELECT pg_stat_get_xact_numscans('dedup.claims_2_pkey'::regclass) - :scans >= 1000 AS bucket_2_read_for_its_keys;
ROLLBACK;
-- bucket 1 expires and is dropped whole
UPDATE dedup.claims_1 SET expires_at = clock_timestamp() - interval '1 second';
UPDATE dedup.buckets SET max_expires_at = clock_timestamp() - interval '1 second' WHERE bucket = 1;
CALL dedup_cleanup();
SELECT * FROM buckets;
SELECT to_regclass('dedup.claims_1') AS bucket_1;
SELECT dedup_claim('b', 'e') AS e, dedup_claim('b', 'f') AS f;

-- a batch that rolls back drops nothing
UPDATE dedup.buckets SET opened_at = opened_at - interval '7 hours' WHERE state = 'c';
CALL dedup_cleanup();
UPDATE dedup.claims_2 SET expires_at = clock_timestamp() - interval '1 second';
UPDATE dedup.buckets SET max_expires_at = clock_timestamp() - interval '1 second' WHERE bucket = 2;
BEGIN;
SELECT deleted FROM dedup_cleanup_batch((3::bigint << 32) + 3);
SELECT deleted FROM dedup_cleanup_batch((3::bigint << 32) + 4);
SELECT * FROM buckets;
ROLLBACK;
SELECT * FROM buckets;
SELECT to_regclass('dedup.claims_2') AS bucket_2;
-- a step past the last ends the pass and does nothing
SELECT deleted, next_position FROM dedup_cleanup_batch((3::bigint << 32) + 9);
SELECT * FROM buckets;

-- the list at its limit, 128 rows with the retired buckets that wait for
-- their drop (their tables held by a long transaction): the open step opens
-- no bucket, with a warning, and calls go on; a longer list (a database the
-- cleanup fell behind in before this limit) is read whole, and calls go on
BEGIN;
INSERT INTO dedup.buckets (bucket, relid, state, opened_at)
  SELECT 1000 + g, (4000000000 + g)::oid::regclass, 'r', now()
  FROM generate_series(1, 128 - (SELECT count(*) FROM dedup.buckets)) g;
UPDATE dedup.buckets SET opened_at = opened_at - interval '7 hours' WHERE state = 'c';
SELECT deleted, next_position FROM dedup_cleanup_batch(3::bigint << 32);
SELECT count(*) AS listed, count(*) FILTER (WHERE state = 'n') AS opened FROM dedup.buckets;
-- (every call reads the list again)
ALTER TABLE dedup.buckets ALTER COLUMN claims SET STATISTICS 100;
SELECT dedup_claim('b', 'at-limit') AS claimed, dedup_claim('b', 'at-limit') AS again;
INSERT INTO dedup.buckets (bucket, relid, state, opened_at)
  SELECT 2000 + g, (4000001000 + g)::oid::regclass, 'r', now() FROM generate_series(1, 100) g;
ALTER TABLE dedup.buckets ALTER COLUMN claims SET STATISTICS 200;
SELECT dedup_claim('b', 'past-limit') AS claimed, dedup_seen('b', 'at-limit') AS seen;
SELECT deleted, next_position FROM dedup_cleanup_batch(3::bigint << 32);
SELECT count(*) AS listed, count(*) FILTER (WHERE state = 'n') AS opened FROM dedup.buckets;
ROLLBACK;

-- the list of buckets gone while buckets exist: calls refuse (42P01)
-- rather than miss the buckets
BEGIN;
ALTER TABLE dedup.buckets RENAME TO buckets_moved;
SELECT regress_try($$SELECT dedup_claim('b', 'x')$$);
ROLLBACK;
-- a bucket's primary key gone: calls refuse (42P01), naming the bucket
BEGIN;
ALTER INDEX dedup.claims_3_pkey RENAME TO claims_3_moved;
SELECT regress_try($$SELECT dedup_claim('b', 'x')$$);
ROLLBACK;
SELECT count(*) AS claimed_x FROM dedup.claims WHERE key = pg_temp.key_fp('b', 'x');
-- a step that cannot get a lock in time (lock_timeout; the worker's is
-- 100 ms) is left to the next pass, and the pass goes on with the next
-- steps and stages: here a prepared transaction holds the current bucket's
-- table, and the switch would wait for it to end
UPDATE dedup.buckets SET opened_at = opened_at - interval '7 hours' WHERE state = 'c';
SELECT deleted, next_position FROM dedup_cleanup_batch(3::bigint << 32);
BEGIN;
SELECT pg_catalog.format('LOCK TABLE %s IN ROW EXCLUSIVE MODE', relid)
FROM dedup.buckets WHERE state = 'c' \gexec
PREPARE TRANSACTION 'dedup_holds_current';
SET lock_timeout = '50ms';
SELECT deleted, next_position FROM dedup_cleanup_batch((3::bigint << 32) + 1);
SELECT * FROM buckets;
CALL dedup_cleanup();
SELECT * FROM buckets;
SELECT dedup_claim('b', 'while-held') AS claimed;
RESET lock_timeout;
ROLLBACK PREPARED 'dedup_holds_current';
-- the next pass switches
CALL dedup_cleanup();
SELECT * FROM buckets;
SELECT dedup_claim('b', 'while-held') AS again;

-- The drop counts the rows a bucket held without reading a bucket of more
-- than 10,000 rows: it counts those it held when sealed
CALL regress_reset_buckets();
CALL dedup_cleanup();
SELECT count(*) FROM generate_series(0, 10) b,
  LATERAL dedup_claim_batch('big', ARRAY(SELECT 'k-' || (b * 1000 + g) FROM generate_series(1, 1000) g));
UPDATE dedup.buckets SET opened_at = opened_at - interval '7 hours' WHERE state = 'c';
CALL dedup_cleanup();
SELECT * FROM buckets;
UPDATE dedup.buckets SET max_expires_at = clock_timestamp() - interval '1 second' WHERE bucket = 0;
SELECT deleted FROM dedup_cleanup_batch((3::bigint << 32) + 3);
BEGIN;
SELECT pg_stat_get_xact_tuples_returned('dedup.claims'::regclass) AS read \gset
SELECT deleted FROM dedup_cleanup_batch((3::bigint << 32) + 4);
SELECT pg_stat_get_xact_tuples_returned('dedup.claims'::regclass) - :read AS rows_read_by_the_drop;
COMMIT;
SELECT * FROM buckets;

-- Switch by size: once the current bucket's primary key reaches
-- dedup.bucket_max_size (default -1: a sixteenth of shared_buffers), the
-- next pass switches, however young the bucket.  Here 64kB: a few thousand
-- keys.  The current bucket, young and small, stays through a pass
SHOW dedup.bucket_max_size;
CALL regress_reset_buckets();
CALL dedup_cleanup();
SET dedup.bucket_max_size = '64kB';
SELECT count(*) FROM dedup_claim_batch('size', ARRAY(SELECT 'k-' || g FROM generate_series(1, 100) g));
CALL dedup_cleanup();
SELECT * FROM buckets;
-- 4,000 keys more make its index over 64kB: the pass switches to bucket 1;
-- the pass's first stage deletes none of the rows that expired in it (one
-- here): they go with the bucket, dropped whole
SELECT count(*) FROM dedup_claim_batch('size', ARRAY(SELECT 'more-' || g FROM generate_series(1, 4000) g));
UPDATE dedup.claims SET expires_at = clock_timestamp() - interval '1 minute'
WHERE key = pg_temp.key_fp('size', 'k-1');
SELECT pg_relation_size('dedup.claims_pkey') >= 65536 AS index_over_64kb;
SELECT deleted FROM dedup_cleanup_batch(0);
CALL dedup_cleanup();
SELECT * FROM buckets;
SELECT * FROM rows_by_bucket;
SELECT dedup_claim('size', 'k-2') AS k2, dedup_claim('size', 'k-1') AS k1_expired;
-- 0 switches by time only: the full bucket 1 stays
SELECT count(*) FROM dedup_claim_batch('size', ARRAY(SELECT 'one-' || g FROM generate_series(1, 4000) g));
SET dedup.bucket_max_size = 0;
CALL dedup_cleanup();
SELECT * FROM buckets;
-- by size only while fewer than 32 buckets hold live rows: with 31 more
-- listed (as sealed), the full bucket 1 stays; without, the next opens
SET dedup.bucket_max_size = '64kB';
BEGIN;
INSERT INTO dedup.buckets (bucket, relid, state, opened_at, closed_at, max_expires_at, claims, records)
  SELECT 1000 + g, (4000000000 + g)::oid::regclass, 's', now(), now(), now() + interval '1 day', 0, 0
  FROM generate_series(1, 31) g;
SELECT deleted, next_position FROM dedup_cleanup_batch(3::bigint << 32);
SELECT count(*) AS listed, count(*) FILTER (WHERE state = 'n') AS opened FROM dedup.buckets;
ROLLBACK;
BEGIN;
SELECT deleted, next_position FROM dedup_cleanup_batch(3::bigint << 32);
SELECT count(*) AS listed, count(*) FILTER (WHERE state = 'n') AS opened FROM dedup.buckets;
ROLLBACK;
-- (a size out of range: test/sql/setting_ranges.sql)
RESET dedup.bucket_max_size;

-- dedup.bucket_interval: 0 (the default) follows the ttls written into the
-- current bucket: a quarter of the shortest, at least the longest over 32,
-- within 1 second and 6 hours (more for the longest, below).  After a
-- switch, claims of ttl 1 hour: 15 minutes; a bucket 10 minutes old
-- stays, 20 minutes old switches
SHOW dedup.bucket_interval;
CALL regress_reset_buckets();
CALL dedup_cleanup();
UPDATE dedup.buckets SET opened_at = opened_at - interval '7 hours' WHERE state = 'c';
CALL dedup_cleanup();
SELECT bucket, state FROM buckets;
SELECT dedup_claim('ttl', 'h1', ttl => '1 hour');
UPDATE dedup.buckets SET opened_at = opened_at - interval '10 minutes' WHERE state = 'c';
CALL dedup_cleanup();
SELECT bucket, state FROM buckets;
UPDATE dedup.buckets SET opened_at = opened_at - interval '10 minutes' WHERE state = 'c';
CALL dedup_cleanup();
SELECT bucket, state FROM buckets;
-- claims of ttl 1 hour and 1 day in bucket 2: 45 minutes (1 day over 32),
-- not 15, so that a day of claims keeps to 32 buckets
SELECT dedup_claim('ttl', 'h2', ttl => '1 hour'), dedup_claim('ttl', 'd2', ttl => '1 day');
-- ttls this far apart keep no expired row for the bucket's drop; but the
-- cleanup's row deletes read the current bucket only once a row in it may
-- have expired: here in an hour, from the earliest expiry written into it
-- since its switch (noted in shared memory); none is read before
SELECT relid AS current_bucket FROM dedup.buckets WHERE state = 'c' \gset
BEGIN;
SELECT pg_stat_get_xact_tuples_returned(:'current_bucket'::regclass) AS read \gset
SELECT deleted FROM dedup_cleanup_batch(0);
SELECT pg_stat_get_xact_tuples_returned(:'current_bucket'::regclass) - :read AS rows_read;
COMMIT;
UPDATE dedup.buckets SET opened_at = opened_at - interval '30 minutes' WHERE state = 'c';
CALL dedup_cleanup();
SELECT bucket, state FROM buckets;
UPDATE dedup.buckets SET opened_at = opened_at - interval '20 minutes' WHERE state = 'c';
CALL dedup_cleanup();
SELECT bucket, state FROM buckets;
-- claims of 1- and 5-second ttls (one a batch): a bucket of 1 second, the
-- least; their rows go with their buckets, none deleted one by one (s1
-- expires by the clock: the cleanup knows when rows of the current bucket
-- may have expired, from the expiries written into it, and does not look
-- before, the next test)
SELECT dedup_claim('ttl', 's1', ttl => '1 second');
SELECT count(*) FROM dedup_claim_batch('ttl', ARRAY['s2'], ttl => '5 seconds');
SELECT pg_sleep(1.1);
UPDATE dedup.buckets SET opened_at = opened_at - interval '1 second' WHERE state = 'c';
SELECT deleted FROM dedup_cleanup_batch(0);
-- but only for two passes (dedup.cleanup_interval: 1 minute here): a bucket
-- due for more, its switch failing meanwhile (a transaction on it outlasts
-- the wait), has its expired rows deleted one by one
SHOW dedup.cleanup_interval;
UPDATE dedup.buckets SET opened_at = opened_at - interval '3 minutes' WHERE state = 'c';
SELECT deleted FROM dedup_cleanup_batch(0);
CALL dedup_cleanup();
SELECT bucket, state FROM buckets;
SELECT * FROM rows_by_bucket;
-- a bucket that got no claim since the switch: 6 hours
UPDATE dedup.buckets SET opened_at = opened_at - interval '5 hours' WHERE state = 'c';
CALL dedup_cleanup();
SELECT bucket, state FROM buckets;
-- a fixed interval ignores the ttls: 1 day here
SET dedup.bucket_interval = '1d';
SELECT dedup_claim('ttl', 's3', ttl => '2 seconds');
CALL dedup_cleanup();
SELECT bucket, state FROM buckets;
UPDATE dedup.buckets SET opened_at = opened_at - interval '20 hours' WHERE state = 'c';
CALL dedup_cleanup();
SELECT bucket, state FROM buckets;
RESET dedup.bucket_interval;
-- a longest ttl over 8 days (32 times 6 hours): its 32nd, past 6 hours, so
-- that its claims keep to 32 buckets.  10 days: 7.5 hours; a bucket 7 hours
-- old stays, 8 hours old switches
UPDATE dedup.buckets SET opened_at = opened_at - interval '7 hours' WHERE state = 'c';
CALL dedup_cleanup();
SELECT bucket, state FROM buckets;
SELECT dedup_claim('ttl', 'd10', ttl => '10 days');
UPDATE dedup.buckets SET opened_at = opened_at - interval '7 hours' WHERE state = 'c';
CALL dedup_cleanup();
SELECT bucket, state FROM buckets;
UPDATE dedup.buckets SET opened_at = opened_at - interval '1 hour' WHERE state = 'c';
CALL dedup_cleanup();
SELECT bucket, state FROM buckets;
-- at least 0 seconds (test/sql/setting_ranges.sql), set by superusers
SHOW dedup.bucket_interval;
RESET dedup.cleanup_pause;
-- dedup.buckets edited by hand so that it lists no current bucket: a
-- documented 55000 for a claim and a look-up (not an internal
-- XX000), nothing written; the list as it was once the row is back
SELECT bucket AS cur FROM dedup.buckets WHERE state = 'c' \gset
SELECT count(*) AS nclaims FROM dedup.claims \gset
UPDATE dedup.buckets SET state = 'x' WHERE bucket = :cur;
\set VERBOSITY sqlstate
SELECT dedup_claim('nocur', 'k1');
SELECT dedup_lookup('nocur', 'k1');
\set VERBOSITY default
SELECT dedup_claim('nocur', 'k1');
SELECT count(*) = :nclaims AS nothing_written FROM dedup.claims;
UPDATE dedup.buckets SET state = 'c' WHERE bucket = :cur;
SELECT dedup_claim('nocur', 'k1'), dedup_claim('nocur', 'k1');
-- the tests after this one start from one empty bucket
CALL regress_reset_buckets();
