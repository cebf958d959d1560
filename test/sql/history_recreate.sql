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

-- a DROP EXTENSION rolled back with its savepoint frees nothing as the
-- transaction commits (nor one under a savepoint released into one rolled
-- back): the generation stays in shared memory, answered from there, and
-- the drop below frees it
SET client_min_messages = debug1;
BEGIN;
SAVEPOINT s;
DROP EXTENSION dedup;
ROLLBACK TO SAVEPOINT s;
COMMIT;
BEGIN;
SAVEPOINT outer_s;
SAVEPOINT inner_s;
DROP EXTENSION dedup;
RELEASE SAVEPOINT inner_s;
ROLLBACK TO SAVEPOINT outer_s;
COMMIT;
RESET client_min_messages;
SELECT count(*) FILTER (WHERE dedup_seen('h', 'new-' || g) = 'history') AS new_seen
FROM generate_series(1, 1000) g;

-- DROP EXTENSION frees the filters of its database as it commits: the
-- generation just read; a drop in a savepoint released counts as the
-- transaction's
SET client_min_messages = debug1;
BEGIN;
SAVEPOINT s;
DROP EXTENSION dedup;
RELEASE SAVEPOINT s;
COMMIT;
RESET client_min_messages;
CREATE EXTENSION dedup;

-- The scopes' counters (dedup_scope_stats) are the extension's: after
-- DROP EXTENSION and CREATE EXTENSION a scope of the same name starts from
-- zero, in this database's rows and in every database's; a drop rolled
-- back with its savepoint keeps them.  (Once the server's table of scopes
-- is full, after the scopestats test, the scope counts in its database's
-- row of other scopes, shown with a NULL scope: both are read.)
SELECT count(*) AS claimed FROM dedup_claim_batch('counted', ARRAY['a', 'b']);
SELECT dedup_claim('counted', 'a') AS again;
SELECT count(*) AS rows, sum(claims) AS claims, sum(duplicates) AS duplicates
FROM dedup_scope_stats() WHERE coalesce(scope, 'counted') = 'counted';
DROP EXTENSION dedup;
CREATE EXTENSION dedup;
SELECT count(*) AS old_rows FROM dedup_scope_stats() WHERE coalesce(scope, 'counted') = 'counted';
SELECT count(*) AS old_rows_all FROM dedup_scope_stats(true)
WHERE datname = current_database() AND coalesce(scope, 'counted') = 'counted';
SELECT dedup_claim('counted', 'a') AS new_claim;
SELECT count(*) AS rows, sum(claims) AS claims, sum(duplicates) AS duplicates
FROM dedup_scope_stats() WHERE coalesce(scope, 'counted') = 'counted';
SELECT count(*) AS rows, sum(claims) AS claims, sum(duplicates) AS duplicates
FROM dedup_scope_stats(true) WHERE datname = current_database() AND coalesce(scope, 'counted') = 'counted';
BEGIN;
SAVEPOINT s;
DROP EXTENSION dedup;
ROLLBACK TO SAVEPOINT s;
COMMIT;
SELECT dedup_claim('counted', 'a') AS duplicate;
SELECT count(*) AS rows, sum(claims) AS claims, sum(duplicates) AS duplicates
FROM dedup_scope_stats(true) WHERE datname = current_database() AND coalesce(scope, 'counted') = 'counted';
-- dropped, not created again: no row of this database (read through a
-- function of the library's own, the extension's being gone)
DROP EXTENSION dedup;
CREATE FUNCTION pg_temp.scope_stats(all_databases boolean,
    OUT datname name, OUT scope text, OUT claims bigint, OUT duplicates bigint,
    OUT records_started bigint, OUT records_replayed bigint, OUT records_completed bigint,
    OUT records_released bigint, OUT events_put bigint, OUT events_taken bigint,
    OUT events_acked bigint, OUT events_nacked bigint)
RETURNS SETOF record LANGUAGE C STRICT AS '$libdir/dedup', 'dedup_scope_stats';
SELECT count(*) AS rows_here FROM pg_temp.scope_stats(false);
SELECT count(*) AS rows_here_all FROM pg_temp.scope_stats(true) WHERE datname = current_database();
CREATE EXTENSION dedup;
SELECT count(*) AS rows_after_create FROM dedup_scope_stats();
-- dropped and created again in one transaction: the new extension's
-- counts, made in that transaction, stay as it commits
BEGIN;
DROP EXTENSION dedup;
CREATE EXTENSION dedup;
SELECT dedup_claim('counted', 'b') AS new_claim, dedup_claim('counted', 'b') AS duplicate;
COMMIT;
SELECT count(*) AS rows, sum(claims) AS claims, sum(duplicates) AS duplicates
FROM dedup_scope_stats() WHERE coalesce(scope, 'counted') = 'counted';
