-- A take with a wait in a transaction that already holds its topic's
-- relay lock (an earlier take of the transaction, or of the savepoint's
-- parent) and finds nothing: it keeps the lock and returns no row at once.
-- It let the lock go between polls by LockRelease(), which releases only
-- what the current resource owner holds (the statement's portal, the
-- subtransaction): the earlier statement's hold could not be released, and
-- the loop "while held, release" spun, a WARNING "you don't own a lock of
-- type ExclusiveLock" each turn, never ending (here: the statement_timeout,
-- 57014; with no WARNING sent or logged, not even that: nothing in the loop
-- looks for an interrupt, and only kill -9 ended it), with the lock held,
-- every other relay of the topic waiting.
TRUNCATE dedup.outbox, dedup.outbox_topics, dedup.outbox_batches, dedup.outbox_retry, dedup.outbox_held,
         dedup.outbox_dead, dedup.outbox_keys;
SELECT (dedup_set_scope('wx', lease => '1 minute')).configured AS set;
CREATE TEMP VIEW relay_locks AS
SELECT count(*) AS held FROM pg_catalog.pg_locks AS l
WHERE l.locktype = 'advisory' AND l.pid = pg_catalog.pg_backend_pid() AND l.mode = 'ExclusiveLock'
  AND l.granted;
SET log_min_messages = error;
SET statement_timeout = '5s';
-- an earlier take of the transaction found nothing (wrote nothing)
BEGIN;
SELECT count(*) AS took FROM dedup_outbox_take_batch('wx', 10);
SELECT count(*) AS took FROM dedup_outbox_take_batch('wx', 10, wait => '1 second');
SELECT held FROM relay_locks;
COMMIT;
-- a take in a savepoint, behind a take of its parent that handed a batch out
SELECT dedup_outbox_put('wx', 'k1', '{}', aggregate_id => 'a') IS NOT NULL AS put;
BEGIN;
SELECT count(*) AS took FROM dedup_outbox_take_batch('wx', 10);
SAVEPOINT s;
SELECT count(*) AS took FROM dedup_outbox_take_batch('wx', 10, wait => '1 second');
RELEASE s;
SELECT held FROM relay_locks;
COMMIT;
-- nothing else changed: the one batch out, the event in it
SELECT count(*) AS batches_out FROM dedup.outbox_inflight WHERE topic = 'wx';
SELECT pending, in_flight, dead FROM dedup_outbox_stats('wx');
RESET statement_timeout;
RESET log_min_messages;
DROP VIEW relay_locks;
TRUNCATE dedup.outbox, dedup.outbox_topics, dedup.outbox_batches, dedup.outbox_retry, dedup.outbox_held,
         dedup.outbox_dead, dedup.outbox_keys;
SELECT dedup_reset_scope('wx');
