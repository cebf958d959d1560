-- The transactional outbox (sql/functions/outbox.sql has its design).
--
-- dedup.outbox is the log: one row per event put, appended and never
-- updated, with the columns Debezium's Outbox Event Router reads (id,
-- aggregatetype, aggregateid, type, payload).  seq is the order of the
-- log; within an aggregate it is commit order (dedup_outbox_put serializes
-- the producers of one aggregate).  The primary key on the id makes a put
-- idempotent: an event stays in the log for its topic's retention, and
-- until published.  (topic, seq) is the relay's read path.
--
-- Partitions.  Every table of the relay has the column part, the
-- partition of the outbox the row belongs to: a partition is a log of its
-- own, with its own positions, batches, retries and dead letters.  On one
-- server the outbox is one partition (part is all zeros), and the keys
-- below are those of that one; dedup_distribute() puts part first in each
-- primary key and unique index (Citus wants its distribution column in
-- them).  On a Citus cluster, each shard of dedup.claims is
-- one, and an event goes to that of its aggregate (outbox.c).  A
-- partition's part is the fingerprint of its number: 4 bytes, big-endian,
-- then zeros.
CREATE TABLE dedup.outbox (
    seq           bigint GENERATED ALWAYS AS IDENTITY,
    id            uuid NOT NULL,
    topic         text COLLATE "C" NOT NULL,
    aggregatetype text NOT NULL,
    aggregateid   text NOT NULL,
    type          text NOT NULL,
    payload       jsonb,
    headers       jsonb NOT NULL DEFAULT '{}',
    created_at    timestamptz NOT NULL DEFAULT pg_catalog.now(),
    part          @extschema@.dedup_fingerprint NOT NULL,
    CONSTRAINT outbox_pkey PRIMARY KEY (id)
) USING heap WITH (autovacuum_vacuum_scale_factor = 0.02);
CREATE UNIQUE INDEX outbox_topic_seq ON dedup.outbox (topic, seq);
COMMENT ON TABLE dedup.outbox IS 'the outbox''s log of events, appended by dedup_outbox_put() (Debezium Outbox Event Router columns); published events leave it with the cleanup once their topic''s retention passed';

-- Events that failed max_attempts times, until redriven.
CREATE TABLE dedup.outbox_dead (
    seq           bigint NOT NULL,
    id            uuid NOT NULL,
    topic         text COLLATE "C" NOT NULL,
    aggregatetype text NOT NULL,
    aggregateid   text NOT NULL,
    type          text NOT NULL,
    payload       jsonb,
    headers       jsonb NOT NULL,
    created_at    timestamptz NOT NULL,
    attempts      integer NOT NULL,
    last_error    text,
    died_at       timestamptz NOT NULL DEFAULT pg_catalog.now(),
    part          @extschema@.dedup_fingerprint NOT NULL,
    CONSTRAINT outbox_dead_pkey PRIMARY KEY (id)
) USING heap;
CREATE INDEX outbox_dead_topic_seq ON dedup.outbox_dead (topic, seq);
COMMENT ON TABLE dedup.outbox_dead IS 'dead-lettered outbox events; dedup_outbox_redrive() puts them back';

-- The (topic, key) of every event put by 1.0 within its topic's retention,
-- so that a producer transaction retried across the update never publishes
-- twice (1.1 keeps an event's key as its id in the log; a database created
-- at 1.1 leaves this table empty).  The same columns as dedup.claims: the
-- claim path and the cleanup serve both.
CREATE TABLE dedup.outbox_keys (
    key        @extschema@.dedup_fingerprint NOT NULL,
    expires_at timestamptz NOT NULL,
    record     dedup.record_state,
    CONSTRAINT outbox_keys_pkey PRIMARY KEY (key)
) USING heap WITH (autovacuum_vacuum_scale_factor = 0.02);
COMMENT ON TABLE dedup.outbox_keys IS 'keys of outbox events put by dedup 1.0, kept until their topic''s retention passes';

SELECT pg_catalog.pg_extension_config_dump('dedup.outbox', '');
SELECT pg_catalog.pg_extension_config_dump('dedup.outbox_seq_seq', '');
SELECT pg_catalog.pg_extension_config_dump('dedup.outbox_dead', '');
SELECT pg_catalog.pg_extension_config_dump('dedup.outbox_keys', '');
