-- Per-scope call counters (dedup_scope_stats; the test server preloads
-- dedup): each call counts as it was answered, in its scope, committed or
-- not; a call that fails counts nothing.
CREATE FUNCTION pg_temp.counted(s text) RETURNS TABLE (claims bigint, duplicates bigint,
    records_started bigint, records_replayed bigint, records_completed bigint,
    records_released bigint, events_put bigint, events_taken bigint, events_acked bigint,
    events_nacked bigint)
LANGUAGE sql AS $$
  SELECT coalesce(c.claims, 0), coalesce(c.duplicates, 0), coalesce(c.records_started, 0),
         coalesce(c.records_replayed, 0), coalesce(c.records_completed, 0),
         coalesce(c.records_released, 0), coalesce(c.events_put, 0), coalesce(c.events_taken, 0),
         coalesce(c.events_acked, 0), coalesce(c.events_nacked, 0)
  FROM (SELECT 1) AS one LEFT JOIN dedup_scope_stats() AS c ON c.scope = s
$$;

-- claims: new, duplicate, in a batch (each distinct key once), rolled back
SELECT dedup_claim('stats-claims', 'a'), dedup_claim('stats-claims', 'a'), dedup_claim('stats-claims', 'b');
SELECT count(*) FROM dedup_claim_batch('stats-claims', ARRAY['a', 'c', 'd', 'd']);
BEGIN;
SELECT dedup_claim('stats-claims', 'rolled-back');
ROLLBACK;
-- a call that fails (22023) is not counted
SELECT regress_try($$SELECT dedup_claim('stats-claims', 'x', ttl => '-1 second')$$) AS bad_ttl;
SELECT * FROM pg_temp.counted('stats-claims');

-- records: started twice (one after a release), replayed, completed, released
SELECT (dedup_begin('stats-records', 'k')).outcome;
SELECT dedup_release('stats-records', 'k');
SELECT (dedup_begin('stats-records', 'k')).outcome;
SELECT dedup_complete('stats-records', 'k', 200, '{}', attempt => 2);
SELECT (dedup_begin('stats-records', 'k')).outcome;
SELECT (dedup_begin('stats-records', 'k', '{"other": true}')).outcome;
SELECT claims, records_started, records_replayed, records_completed, records_released
FROM pg_temp.counted('stats-records');

-- the outbox: puts (a repeated key is not a new event), takes, acks, nacks
SELECT count(*) FROM generate_series(1, 4) i, LATERAL dedup_outbox_put('stats-topic', 'e-' || i, '{}');
SELECT dedup_outbox_put('stats-topic', 'e-1', '{}') IS NOT NULL AS put_again;
CREATE TEMP TABLE stats_taken AS SELECT id FROM dedup_outbox_take('stats-topic', 3);
SELECT count(*) AS taken FROM stats_taken;
SELECT dedup_outbox_ack(ARRAY(SELECT id FROM stats_taken ORDER BY id LIMIT 2)) AS acked;
SELECT dedup_outbox_nack(ARRAY(SELECT id FROM stats_taken ORDER BY id OFFSET 2), '1 hour') AS nacked;
SELECT dedup_outbox_ack(ARRAY(SELECT id FROM stats_taken ORDER BY id LIMIT 2)) AS acked_again;
SELECT events_put, events_taken, events_acked, events_nacked, claims
FROM pg_temp.counted('stats-topic');
-- an ack or a nack by ids that fails counts nothing, though it settled an
-- event before it found the unknown id (42704, after the settle)
SELECT dedup_outbox_put('stats-failed', 'f-1', '{}') IS NOT NULL AS put;
CREATE TEMP TABLE stats_failed AS SELECT id FROM dedup_outbox_take('stats-failed', 10);
SELECT regress_try($$SELECT dedup_outbox_ack(ARRAY(SELECT id FROM stats_failed)
                     || 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'::uuid)$$) AS ack;
SELECT regress_try($$SELECT dedup_outbox_nack(ARRAY(SELECT id FROM stats_failed)
                     || 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'::uuid)$$) AS nack;
SELECT events_put, events_taken, events_acked, events_nacked
FROM pg_temp.counted('stats-failed');
-- (the event is still taken: acked now, and counted)
SELECT dedup_outbox_ack(ARRAY(SELECT id FROM stats_failed)) AS acked;
SELECT events_put, events_taken, events_acked, events_nacked
FROM pg_temp.counted('stats-failed');

-- the view has the same rows for this database, and more with all databases
SELECT count(*) AS view_rows FROM dedup_scope_stats v
  JOIN dedup_scope_stats() f USING (datname, scope, claims, duplicates, events_put)
WHERE scope LIKE 'stats-%';
SELECT (SELECT count(*) FROM dedup_scope_stats(true)) >= (SELECT count(*) FROM dedup_scope_stats()) AS all_databases;
SELECT count(*) AS null_arg FROM dedup_scope_stats(NULL);
-- monitoring roles may read the counters; PUBLIC may not
SELECT has_function_privilege('pg_monitor', 'dedup_scope_stats(boolean)', 'EXECUTE') AS monitor_fn,
       has_table_privilege('pg_monitor', 'dedup_scope_stats', 'SELECT') AS monitor_view,
       has_function_privilege('public', 'dedup_scope_stats(boolean)', 'EXECUTE') AS public_fn,
       has_function_privilege('public', 'dedup.scope_count(text, text, bigint)', 'EXECUTE') AS public_count;

-- a full table: scopes counted once the server has 4,032 count in their
-- database's row for other scopes (scope NULL); none is lost
SELECT count(*) FROM generate_series(1, 4100) i, LATERAL dedup_claim('stats-many-' || i, 'k');
SELECT count(*) FILTER (WHERE scope IS NOT NULL) <= 4032 AS bounded,
       count(*) FILTER (WHERE scope IS NULL) AS other_rows,
       (SELECT claims FROM dedup_scope_stats() WHERE scope IS NULL)
         + count(*) FILTER (WHERE scope LIKE 'stats-many-%') AS many_claims
FROM dedup_scope_stats(true);
TRUNCATE dedup.claims, dedup.outbox, dedup.outbox_keys;
