-- A history's generations in shared memory outlive DROP EXTENSION dedup:
-- after CREATE EXTENSION, generations are numbered from 1 again, and a new
-- generation 1 folded with as many keys as the dropped one must not be
-- answered from the dropped one's bits (false negatives), nor a key of the
-- dropped extension from them.
SET dedup.cleanup_pause = 0;
-- the same history in both extensions: 1,000 keys (:prefix1 to 1000)
-- claimed, their bucket aged (a pass opens the next, switches, seals it),
-- its rows expired, and folded into generation 1 by the next pass
\set fold 'SELECT count(*) AS claimed FROM dedup_claim_batch(''h'', ARRAY(SELECT :''prefix'' || g FROM generate_series(1, 1000) g)); UPDATE dedup.buckets SET opened_at = opened_at - interval ''7 hours'' WHERE state = ''c''; CALL dedup_cleanup(); CALL regress_expire_sealed(); CALL dedup_cleanup();'

-- an extension of this test's own (a first pass lists its bucket 0)
DROP EXTENSION dedup;
CREATE EXTENSION dedup;
CALL dedup_cleanup();
SELECT scope FROM dedup_set_scope('h', ttl => '1 hour', history => '1 day', false_positive_rate => 0.01);
\set prefix old-
:fold
SELECT generation, keys FROM dedup.history_generations;
-- read into shared memory by this look-up: every folded key answered
SELECT count(*) FILTER (WHERE dedup_seen('h', 'old-' || g) = 'history') AS old_seen
FROM generate_series(1, 1000) g;

-- dropped and created again by a transaction that does not free the
-- filters of the dropped extension as it commits (a prepared one: as a
-- standby replays it)
BEGIN;
DROP EXTENSION dedup;
CREATE EXTENSION dedup;
PREPARE TRANSACTION 'history_recreate';
COMMIT PREPARED 'history_recreate';
CALL dedup_cleanup();
SELECT scope FROM dedup_set_scope('h', ttl => '1 hour', history => '1 day', false_positive_rate => 0.01);
\set prefix new-
:fold
-- the same number and keys as the dropped generation
SELECT generation, keys FROM dedup.history_generations;
-- no false negative: every key of the new generation answered, and claimed
-- as a duplicate
SELECT count(*) FILTER (WHERE dedup_seen('h', 'new-' || g) = 'history') AS new_seen
FROM generate_series(1, 1000) g;
SELECT count(*) AS claimed_again
FROM dedup_claim_batch('h', ARRAY(SELECT 'new-' || g FROM generate_series(1, 1000) g));
-- the dropped extension's keys are new (up to the rate, 0.01: a few)
SELECT count(*) FILTER (WHERE dedup_seen('h', 'old-' || g) = 'history') < 30 AS old_forgotten
FROM generate_series(1, 1000) g;

-- DROP EXTENSION frees the filters of its database as it commits: the
-- generation just read
SET client_min_messages = debug1;
DROP EXTENSION dedup;
RESET client_min_messages;
CREATE EXTENSION dedup;
