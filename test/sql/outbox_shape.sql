-- dedup_outbox_put writes its row as an INSERT would write it.  It writes
-- the log directly only while dedup.outbox is the shape dedup created
-- (said at DEBUG1 when a backend takes its verdict, once per change of the
-- table); a table its owner changed is written through an INSERT, which
-- refuses what it refuses (the same SQLSTATE as a plain INSERT of the row,
-- nothing written) and stores what it stores.  Each change is undone
-- before the next.
TRUNCATE dedup.outbox, dedup.outbox_topics, dedup.outbox_batches, dedup.outbox_retry, dedup.outbox_held,
         dedup.outbox_dead, dedup.outbox_keys;
SELECT (dedup_set_scope('shape', retention => '1 hour')).configured AS set;
-- a plain INSERT of the row a put of (key, payload, aggregate id) writes
CREATE FUNCTION pg_temp.insert_row(key text, payload jsonb, aggregate_id text DEFAULT NULL)
RETURNS text LANGUAGE sql AS $$
SELECT regress_try(format(
    'INSERT INTO dedup.outbox (id, topic, aggregatetype, aggregateid, type, payload, part)'
    ' VALUES (gen_random_uuid(), %L, %L, %L, %L, %L, %L)',
    'shape', 'shape', coalesce(aggregate_id, key), 'shape', payload,
    '00000000000000000000000000000000'))
$$;
-- the events of the topic (a function: a view would pin the columns' types)
CREATE FUNCTION pg_temp.shape_events()
RETURNS TABLE (aggregateid text, payload text, headers jsonb) LANGUAGE sql AS $$
SELECT o.aggregateid::text, o.payload::text, o.headers
FROM dedup.outbox AS o WHERE o.topic = 'shape' ORDER BY o.seq
$$;

-- dedup's own shape: written directly
SET client_min_messages = debug1;
SELECT dedup_outbox_put('shape', 'k-1', '{"n": 1}') IS NOT NULL AS put;
RESET client_min_messages;
SELECT * FROM pg_temp.shape_events();
DELETE FROM dedup.outbox;

-- a CHECK constraint of the owner's: 23514, as for an INSERT
ALTER TABLE dedup.outbox ADD CONSTRAINT shape_check CHECK (payload ? 'n');
SET client_min_messages = debug1;
SELECT regress_try($$SELECT dedup_outbox_put('shape', 'k-1', '{"m": 1}')$$) AS put;
RESET client_min_messages;
SELECT pg_temp.insert_row('k-1', '{"m": 1}') AS plain_insert;
SELECT count(*) AS events FROM dedup.outbox;
SELECT dedup_outbox_put('shape', 'k-1', '{"n": 1}') IS NOT NULL AS put_that_passes;
SELECT * FROM pg_temp.shape_events();
DELETE FROM dedup.outbox;
ALTER TABLE dedup.outbox DROP CONSTRAINT shape_check;

-- an exclusion constraint: 23P01 (its index is not only a unique one)
ALTER TABLE dedup.outbox ADD CONSTRAINT shape_exclude EXCLUDE USING btree (aggregateid WITH =);
SET client_min_messages = debug1;
SELECT dedup_outbox_put('shape', 'k-1', '{"n": 1}', aggregate_id => 'a-1') IS NOT NULL AS put;
RESET client_min_messages;
SELECT regress_try($$SELECT dedup_outbox_put('shape', 'k-2', '{"n": 2}', aggregate_id => 'a-1')$$) AS put;
SELECT pg_temp.insert_row('k-2', '{"n": 2}', 'a-1') AS plain_insert;
SELECT * FROM pg_temp.shape_events();
DELETE FROM dedup.outbox;
ALTER TABLE dedup.outbox DROP CONSTRAINT shape_exclude;

-- a unique index with a predicate: 23505
CREATE UNIQUE INDEX shape_partial ON dedup.outbox (aggregateid) WHERE payload ? 'once';
SET client_min_messages = debug1;
SELECT dedup_outbox_put('shape', 'k-1', '{"once": 1}', aggregate_id => 'a-1') IS NOT NULL AS put;
RESET client_min_messages;
SELECT regress_try($$SELECT dedup_outbox_put('shape', 'k-2', '{"once": 2}', aggregate_id => 'a-1')$$) AS put;
SELECT pg_temp.insert_row('k-2', '{"once": 2}', 'a-1') AS plain_insert;
SELECT * FROM pg_temp.shape_events();
DELETE FROM dedup.outbox;
DROP INDEX dedup.shape_partial;

-- a domain with a check, as a column's type: 23514
CREATE DOMAIN pg_temp.shape_type AS text CHECK (VALUE ~ '^[A-Z]');
ALTER TABLE dedup.outbox ALTER COLUMN type TYPE pg_temp.shape_type;
SET client_min_messages = debug1;
SELECT regress_try($$SELECT dedup_outbox_put('shape', 'k-1', '{"n": 1}')$$) AS put;
RESET client_min_messages;
SELECT pg_temp.insert_row('k-1', '{"n": 1}') AS plain_insert;
SELECT count(*) AS events FROM dedup.outbox;
SELECT dedup_outbox_put('shape', 'k-1', '{"n": 1}', type => 'Shaped') IS NOT NULL AS put_that_passes;
SELECT type FROM dedup.outbox;
DELETE FROM dedup.outbox;
ALTER TABLE dedup.outbox ALTER COLUMN type TYPE text;
DROP DOMAIN pg_temp.shape_type;

-- varchar(n) on a text column: 22001
ALTER TABLE dedup.outbox ALTER COLUMN aggregateid TYPE varchar(8);
SET client_min_messages = debug1;
SELECT regress_try($$SELECT dedup_outbox_put('shape', 'k-1', '{"n": 1}', aggregate_id => 'aggregate-1')$$) AS put;
RESET client_min_messages;
SELECT pg_temp.insert_row('k-1', '{"n": 1}', 'aggregate-1') AS plain_insert;
SELECT count(*) AS events FROM dedup.outbox;
SELECT dedup_outbox_put('shape', 'k-1', '{"n": 1}', aggregate_id => 'agg-1') IS NOT NULL AS put_that_passes;
SELECT * FROM pg_temp.shape_events();
DELETE FROM dedup.outbox;
ALTER TABLE dedup.outbox ALTER COLUMN aggregateid TYPE text;

-- ON INSERT rules: one that also writes elsewhere, one that writes
-- nothing instead (the put returns its id, as the INSERT succeeds)
CREATE TABLE shape_audit (id uuid, aggregateid text);
CREATE RULE shape_also AS ON INSERT TO dedup.outbox
    DO ALSO INSERT INTO shape_audit VALUES (NEW.id, NEW.aggregateid);
SET client_min_messages = debug1;
SELECT dedup_outbox_put('shape', 'k-1', '{"n": 1}') AS id1 \gset
RESET client_min_messages;
SELECT pg_temp.insert_row('k-2', '{"n": 2}') AS plain_insert;
SELECT a.id = :'id1' AS audited_put, a.aggregateid FROM shape_audit AS a ORDER BY a.aggregateid;
SELECT * FROM pg_temp.shape_events();
DELETE FROM dedup.outbox;
DROP RULE shape_also ON dedup.outbox;
CREATE RULE shape_instead AS ON INSERT TO dedup.outbox DO INSTEAD NOTHING;
SELECT dedup_outbox_put('shape', 'k-1', '{"n": 1}') = :'id1' AS put;
SELECT pg_temp.insert_row('k-2', '{"n": 2}') AS plain_insert;
SELECT count(*) AS events FROM dedup.outbox;
DROP RULE shape_instead ON dedup.outbox;
-- the rule gone, the put writes its event again
SELECT dedup_outbox_put('shape', 'k-1', '{"n": 1}') = :'id1' AS put;
SELECT * FROM pg_temp.shape_events();
DELETE FROM dedup.outbox;
DROP TABLE shape_audit;

-- payload json: the event's JSON, as an INSERT casts it; the same event
-- put again is found, another payload refused (22023)
ALTER TABLE dedup.outbox ALTER COLUMN payload TYPE json;
SET client_min_messages = debug1;
SELECT dedup_outbox_put('shape', 'k-1', '{"n":  1, "a": [1, 2]}') AS id1 \gset
RESET client_min_messages;
SELECT * FROM pg_temp.shape_events();
SELECT dedup_outbox_put('shape', 'k-1', '{"a": [1, 2], "n": 1}') = :'id1' AS same_event;
SELECT regress_try($$SELECT dedup_outbox_put('shape', 'k-1', '{"n": 2}')$$) AS other_payload;
SELECT count(*) AS events FROM dedup.outbox;
DELETE FROM dedup.outbox;
ALTER TABLE dedup.outbox ALTER COLUMN payload TYPE jsonb;

-- created_at's default changed: the put writes that default
ALTER TABLE dedup.outbox ALTER COLUMN created_at SET DEFAULT '2001-02-03 04:05:06+00';
SET client_min_messages = debug1;
SELECT dedup_outbox_put('shape', 'k-1', '{"n": 1}') IS NOT NULL AS put;
RESET client_min_messages;
SELECT created_at = '2001-02-03 04:05:06+00' AS the_default FROM dedup.outbox;
DELETE FROM dedup.outbox;
ALTER TABLE dedup.outbox ALTER COLUMN created_at SET DEFAULT pg_catalog.now();

-- an index of the owner's on a plain column: written directly, and filled
CREATE INDEX shape_aggregate ON dedup.outbox (aggregateid);
SET client_min_messages = debug1;
SELECT dedup_outbox_put('shape', 'k-1', '{"n": 1}', aggregate_id => 'a-1') IS NOT NULL AS put;
RESET client_min_messages;
BEGIN;
SET LOCAL enable_seqscan = off;
SET LOCAL enable_bitmapscan = off;
EXPLAIN (COSTS OFF) SELECT payload FROM dedup.outbox WHERE aggregateid = 'a-1';
SELECT payload FROM dedup.outbox WHERE aggregateid = 'a-1';
COMMIT;
DELETE FROM dedup.outbox;
DROP INDEX dedup.shape_aggregate;

-- dedup's shape again: written directly, as the table was at the start,
-- created_at now()
BEGIN;
SET LOCAL client_min_messages = debug1;
SELECT dedup_outbox_put('shape', 'k-1', '{"n": 1}') IS NOT NULL AS put;
SELECT created_at = now() AS created_now FROM dedup.outbox;
COMMIT;
SELECT * FROM pg_temp.shape_events();
DELETE FROM dedup.outbox;
SELECT dedup_reset_scope('shape') AS reset;
