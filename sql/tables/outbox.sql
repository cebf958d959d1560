-- The transactional outbox.  Events not yet published live in
-- dedup.outbox, with the columns Debezium's Outbox Event Router reads (id,
-- aggregatetype, aggregateid, type, payload) and the relay's own state;
-- an acked event is deleted.  seq is the hand-out order; within an
-- aggregate it is commit order (dedup_outbox_put serializes the producers
-- of one aggregate).  Nothing the relay changes (status, attempts,
-- visible_at, last_error) is indexed, so taking an event is a HOT update.
-- A pending event is available from visible_at; a taken one is leased
-- until visible_at.
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
    status        "char" NOT NULL DEFAULT 'p',     -- 'p' pending, 't' taken
    attempts      integer NOT NULL DEFAULT 0,
    visible_at    timestamptz NOT NULL DEFAULT pg_catalog.now(),
    last_error    text,
    CONSTRAINT outbox_pkey PRIMARY KEY (id)
) USING heap WITH (fillfactor = 50, autovacuum_vacuum_scale_factor = 0.02);
CREATE INDEX outbox_topic_seq ON dedup.outbox (topic, seq);
CREATE INDEX outbox_aggregate_seq ON dedup.outbox (topic, aggregateid, seq);
COMMENT ON TABLE dedup.outbox IS 'outbox events not yet published (Debezium Outbox Event Router columns plus the relay''s state)';

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
    CONSTRAINT outbox_dead_pkey PRIMARY KEY (id)
) USING heap;
CREATE INDEX outbox_dead_topic_seq ON dedup.outbox_dead (topic, seq);
COMMENT ON TABLE dedup.outbox_dead IS 'dead-lettered outbox events; dedup_outbox_redrive() puts them back';

-- The (topic, key) of every event put within its topic's retention, so that
-- a retried producer transaction never publishes twice.  The same columns
-- as dedup.claims: the claim path and the cleanup serve both.
CREATE TABLE dedup.outbox_keys (
    key        @extschema@.dedup_fingerprint NOT NULL,
    expires_at timestamptz NOT NULL,
    record     dedup.record_state,
    CONSTRAINT outbox_keys_pkey PRIMARY KEY (key)
) USING heap WITH (autovacuum_vacuum_scale_factor = 0.02);
COMMENT ON TABLE dedup.outbox_keys IS 'keys of outbox events put within their topic''s retention';

SELECT pg_catalog.pg_extension_config_dump('dedup.outbox', '');
SELECT pg_catalog.pg_extension_config_dump('dedup.outbox_seq_seq', '');
SELECT pg_catalog.pg_extension_config_dump('dedup.outbox_dead', '');
SELECT pg_catalog.pg_extension_config_dump('dedup.outbox_keys', '');
