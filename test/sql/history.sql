-- The history tier: a scope with a history remembers its expired claims in
-- blocked Bloom filters, folded by the cleanup when their bucket retires.
-- Time is moved by hand, as in the buckets test: a bucket is aged by its
-- opened_at, its rows expired by setting their expiry and its
-- max_expires_at in the past, and a generation's slice ended by moving its
-- slice_end.
SET dedup.cleanup_pause = 0;
CALL regress_reset_buckets();
CALL dedup_cleanup();
-- the stored fingerprint of a key within a scope (fingerprint.c's encoding)
CREATE FUNCTION pg_temp.key_fp(scope text, key text) RETURNS dedup_fingerprint
LANGUAGE sql IMMUTABLE AS $$
  SELECT encode(substring(sha256('dedup/v1/claim'::bytea || '\x00'::bytea
                || int4send(octet_length(convert_to(scope, 'UTF8')))
                || convert_to(scope, 'UTF8') || convert_to(key, 'UTF8')) FROM 1 FOR 16), 'hex')::dedup_fingerprint
$$;
CREATE TEMP VIEW generations AS
  SELECT history_id, rate, k, capacity, keys,
         slice_end > clock_timestamp() AS open,
         (SELECT count(*) FROM dedup.history_blocks b WHERE b.generation = g.generation) AS chunks
  FROM dedup.history_generations g ORDER BY generation;

-- settings: a window, and a rate that defaults to 0.001
SELECT scope, history, false_positive_rate FROM dedup_set_scope('h', ttl => '1 hour', history => '1 day');
SELECT scope, history, false_positive_rate FROM dedup_set_scope('h', false_positive_rate => 0.01);
SELECT history_id IS NOT NULL AS has_id FROM dedup.scopes WHERE scope = 'h';
-- dedup_scope, which roles granted usage read, shows them too
SELECT scope, history, false_positive_rate FROM dedup_scope('h');
SELECT scope, history, false_positive_rate FROM dedup_set_scope('plain', ttl => '1 hour');
-- bad settings change nothing (22023)
CREATE TEMP TABLE scopes_before AS SELECT * FROM dedup.scopes;
\set VERBOSITY sqlstate
SELECT dedup_set_scope('h', false_positive_rate => 0.5);
SELECT dedup_set_scope('h', false_positive_rate => 0.00001);
SELECT dedup_set_scope('h', false_positive_rate => 'NaN');
SELECT dedup_set_scope('plain', false_positive_rate => 0.01);
SELECT dedup_set_scope('h', history => '0', false_positive_rate => 0.01);
SELECT dedup_set_scope('h', history => '-1 day');
SELECT dedup_set_scope('h', history => '200 years');
\set VERBOSITY default
SELECT count(*) AS changed FROM (TABLE dedup.scopes EXCEPT TABLE scopes_before) c;

-- claims of a scope with a history carry its id; records and other scopes' claims do not
SELECT dedup_claim('h', 'a'), dedup_claim('h', 'b'), dedup_claim('plain', 'a');
SELECT outcome FROM dedup_begin('h', 'record-1');
SELECT count(*) FILTER (WHERE history IS NOT NULL) AS with_history,
       count(*) FILTER (WHERE history IS NULL) AS without FROM dedup.claims;
-- live: exact
SELECT dedup_seen('h', 'a') AS a, dedup_seen('h', 'zzz') AS zzz, dedup_claim('h', 'a') AS claim_a;

-- a claim that expired less than a window ago is still a duplicate, before
-- any fold: the exact row answers, as "history"
UPDATE dedup.claims SET expires_at = clock_timestamp() - interval '1 hour'
WHERE record IS NULL AND history IS NOT NULL;
SELECT dedup_seen('h', 'a') AS a, dedup_claim('h', 'a') AS claim_a,
       dedup_claim_batch('h', ARRAY['a', 'b', 'c']) AS batch;
-- one that expired a window ago or more is new again, replaced in place
UPDATE dedup.claims SET expires_at = clock_timestamp() - interval '2 days'
WHERE record IS NULL AND history IS NOT NULL AND expires_at < clock_timestamp() - interval '30 minutes';
SELECT dedup_seen('h', 'a') AS a, dedup_claim('h', 'a') AS claim_a;
-- a scope without a history: an expired claim is new again
UPDATE dedup.claims SET expires_at = clock_timestamp() - interval '1 hour' WHERE history IS NULL AND record IS NULL;
SELECT dedup_seen('plain', 'a') AS a, dedup_claim('plain', 'a') AS claim_a;

-- the per-row cleanup of the current bucket leaves the expired claims of a
-- history scope to their bucket (they are folded when it goes); it deletes others
SELECT dedup_claim('plain', 'gone'), dedup_claim('h', 'stays');
UPDATE dedup.claims SET expires_at = clock_timestamp() - interval '1 minute'
WHERE key IN (pg_temp.key_fp('plain', 'gone'), pg_temp.key_fp('h', 'stays'));
CALL dedup_cleanup();
SELECT dedup_seen('plain', 'gone') AS gone, dedup_seen('h', 'stays') AS stays;

-- a claim that rolls back never reaches the history
BEGIN;
SELECT dedup_claim('h', 'rolled-back');
ROLLBACK;
-- 1,000 more claims, then the bucket closes, seals and retires: its claims
-- are folded into a new generation in the same transaction
SELECT count(*) FROM dedup_claim_batch('h', ARRAY(SELECT 'k' || g FROM generate_series(1, 1000) g));
-- (the current bucket aged: a pass opens the next, switches, seals this one)
UPDATE dedup.buckets SET opened_at = opened_at - interval '7 hours' WHERE state = 'c';
CALL dedup_cleanup();
CALL regress_expire_sealed();
SELECT state, claims FROM dedup.buckets ORDER BY bucket;
CALL dedup_cleanup();
SELECT state, claims FROM dedup.buckets ORDER BY bucket;
-- one generation, of half the scope's rate, whose slice is the window,
-- sized for the keys of the fold (at least 1,024), not for the folds a
-- window holds (1 day over the 7 hours the bucket was open: 3,443 keys, a
-- burst taken for a rate); its keys are the bucket's claims
-- (1,000, and a, b, c and stays, all expired 10 minutes ago by then), not
-- the record, nor the claim that rolled back
SELECT * FROM generations;
SELECT slice_end - opened_at AS slice FROM dedup.history_generations;
SELECT count(*) FILTER (WHERE dedup_seen('h', 'k' || g) = 'history') AS folded_seen
FROM generate_series(1, 1000) g;
SELECT dedup_seen('h', 'b') AS b, dedup_seen('h', 'stays') AS stays,
       dedup_seen('h', 'rolled-back') AS rolled_back, dedup_seen('h', 'a') AS a;
-- the bucket is gone: duplicates are answered by the history alone
CALL dedup_cleanup();
SELECT count(*) AS buckets FROM dedup.buckets;
SELECT count(*) AS claimed FROM dedup_claim_batch('h', ARRAY(SELECT 'k' || g FROM generate_series(1, 1000) g));
SELECT dedup_claim('h', 'k1') AS k1, dedup_claim('h', 'rolled-back') AS rolled_back;
-- 10,000 keys never claimed: few false positives (the rate is 0.005 a generation)
SELECT count(*) FILTER (WHERE dedup_seen('h', 'never-' || g) = 'history') < 150 AS few_false_positives
FROM generate_series(1, 10000) g;
-- dedup_history lists the generation
SELECT keys, k, false_positive_rate, expires_at = slice_end + interval '1 day' AS expires_a_window_after
FROM dedup_history('h');
SELECT count(*) AS none FROM dedup_history('plain');

-- a second fold goes into the same generation while its slice lasts and
-- it has room (1,004 keys of 1,024)
SELECT count(*) FROM dedup_claim_batch('h', ARRAY(SELECT 'm' || g FROM generate_series(1, 10) g));
-- (the current bucket aged: a pass opens the next, switches, seals this one)
UPDATE dedup.buckets SET opened_at = opened_at - interval '7 hours' WHERE state = 'c';
CALL dedup_cleanup();
CALL regress_expire_sealed();
CALL dedup_cleanup();
SELECT count(*) AS generations, sum(keys) AS keys FROM dedup.history_generations;
SELECT count(*) FILTER (WHERE dedup_seen('h', 'm' || g) = 'history') AS folded_seen
FROM generate_series(1, 10) g;
-- a third, that would overfill it, opens another generation in the slice:
-- twice the keys, a quarter of the rate (the slice's rates add up to 0.00625,
-- at most 3/4 of the scope's)
SELECT count(*) FROM dedup_claim_batch('h', ARRAY(SELECT 'o' || g FROM generate_series(1, 500) g));
-- (the current bucket aged: a pass opens the next, switches, seals this one)
UPDATE dedup.buckets SET opened_at = opened_at - interval '7 hours' WHERE state = 'c';
CALL dedup_cleanup();
CALL regress_expire_sealed();
CALL dedup_cleanup();
SELECT * FROM generations;
SELECT count(*) FILTER (WHERE dedup_seen('h', 'o' || g) = 'history') AS folded_seen
FROM generate_series(1, 500) g;
-- once its slice ended, the next fold opens a generation sized by what it
-- took, at what its rates leave of the scope's (0.01 - 0.00625), as both
-- slices are read until the first goes
UPDATE dedup.history_generations SET slice_end = (SELECT clock_timestamp() - interval '1 minute');
SELECT count(*) FROM dedup_claim_batch('h', ARRAY(SELECT 'n' || g FROM generate_series(1, 100) g));
-- (the current bucket aged: a pass opens the next, switches, seals this one)
UPDATE dedup.buckets SET opened_at = opened_at - interval '7 hours' WHERE state = 'c';
CALL dedup_cleanup();
CALL regress_expire_sealed();
CALL dedup_cleanup();
SELECT * FROM generations;
-- a slice's generations go whole once it ended a window ago: their rows and their chunks
UPDATE dedup.history_generations SET slice_end = (SELECT clock_timestamp() - interval '1 day 1 minute')
WHERE slice_end = (SELECT min(slice_end) FROM dedup.history_generations);
CALL dedup_cleanup();
SELECT * FROM generations;
SELECT count(*) FILTER (WHERE dedup_seen('h', 'k' || g) = 'history') < 10 AS k_forgotten,
       count(*) FILTER (WHERE dedup_seen('h', 'n' || g) = 'history') AS n_seen
FROM generate_series(1, 100) g;
-- two buckets retired by one pass fold into one generation, one after the
-- other in the same transaction: the second fold keeps the first's bits
SELECT count(*) FROM dedup_claim_batch('h', ARRAY(SELECT 'p' || g FROM generate_series(1, 300) g));
-- (the current bucket aged: a pass opens the next, switches, seals this one)
UPDATE dedup.buckets SET opened_at = opened_at - interval '7 hours' WHERE state = 'c';
CALL dedup_cleanup();
SELECT count(*) FROM dedup_claim_batch('h', ARRAY(SELECT 'q' || g FROM generate_series(1, 300) g));
UPDATE dedup.buckets SET opened_at = opened_at - interval '7 hours' WHERE state = 'c';
CALL dedup_cleanup();
SELECT count(*) AS sealed FROM dedup.buckets WHERE state = 's';
CALL regress_expire_sealed();
CALL dedup_cleanup();
SELECT count(*) AS sealed FROM dedup.buckets WHERE state = 's';
SELECT count(*) FILTER (WHERE dedup_seen('h', 'p' || g) = 'history') AS p_seen,
       count(*) FILTER (WHERE dedup_seen('h', 'q' || g) = 'history') AS q_seen
FROM generate_series(1, 300) g;

-- a record begun over a claim that expired within the window replays it as
-- complete (it counts as a live claim would), and leaves the claim to be folded
SELECT dedup_claim('h', 'claimed-then-begun');
UPDATE dedup.claims SET expires_at = clock_timestamp() - interval '1 minute'
WHERE key = pg_temp.key_fp('h', 'claimed-then-begun');
SELECT outcome, status, response FROM dedup_begin('h', 'claimed-then-begun');
SELECT record IS NULL AS still_a_claim, history IS NOT NULL AS carries_history
FROM dedup.claims WHERE key = pg_temp.key_fp('h', 'claimed-then-begun');

-- a scope whose history is taken away loses its generations at the next pass
SELECT scope, history, false_positive_rate FROM dedup_set_scope('h', history => '0');
SELECT count(*) AS claims_with_history FROM dedup.claims WHERE history IS NOT NULL;
CALL dedup_cleanup();
SELECT count(*) AS generations FROM dedup.history_generations;
SELECT count(*) AS chunks FROM dedup.history_blocks;
SELECT dedup_seen('h', 'n1') AS n1;
SELECT dedup_reset_scope('h'), dedup_reset_scope('plain');

-- a history's first fold is the burst of a backlog, not a rate: 200,000
-- claims of a scope remembering 30 days over buckets of 6 hours (120 folds a
-- window) cost at most 8 bytes a key on disk and 16 of WAL at a rate of
-- 0.001 (sized for a window of such folds, 254 and 256: 3 times the claims
-- it replaces), and the rate holds over 100,000 keys never claimed
SELECT scope, history, false_positive_rate
FROM dedup_set_scope('burst', ttl => '1 second', history => '30 days', false_positive_rate => 0.001);
SELECT count(*) AS claimed FROM generate_series(0, 19) b,
  LATERAL dedup_claim_batch('burst', ARRAY(SELECT 'burst-' || (b * 10000 + g) FROM generate_series(1, 10000) g));
-- (the current bucket open for 6 hours: a pass opens the next, switches, seals this one)
UPDATE dedup.buckets SET opened_at = opened_at - interval '6 hours' WHERE state = 'c';
CALL dedup_cleanup();
SELECT pg_sleep(1.1);
CHECKPOINT;
SELECT pg_current_wal_lsn() AS wal_before,
       pg_total_relation_size('dedup.history_generations')
       + pg_total_relation_size('dedup.history_blocks') AS disk_before \gset
CALL dedup_cleanup();
SELECT sum(keys) AS folded,
       (pg_total_relation_size('dedup.history_generations') + pg_total_relation_size('dedup.history_blocks')
        - :disk_before)::numeric / sum(keys) <= 8 AS disk_8_bytes_a_key,
       pg_wal_lsn_diff(pg_current_wal_lsn(), :'wal_before') / sum(keys) <= 16 AS wal_16_bytes_a_key
FROM dedup.history_generations;
SELECT count(*) AS generations, min(capacity) AS capacity, min(rate) AS rate
FROM dedup.history_generations;
SELECT count(*) FILTER (WHERE dedup_seen('burst', 'burst-' || g) = 'history') AS folded_seen,
       count(*) FILTER (WHERE dedup_seen('burst', 'never-' || g) = 'history') <= 100 AS rate_kept
FROM generate_series(1, 100000) g;
SELECT dedup_reset_scope('burst');
