-- The state of an idempotency record (dedup_begin ... dedup_complete).
CREATE TYPE dedup.record_state AS (
    status        "char",          -- 'p' processing, 'c' complete, 'r' released
    attempts      integer,
    lease_until   timestamptz,
    request       @extschema@.dedup_fingerprint,
    response_code integer,
    response      jsonb,
    first_seen    timestamptz,
    completed_at  timestamptz,
    taken_over    boolean,         -- begun again while a holder's lease had passed
    ttl           interval         -- given to dedup_begin: the stay after lease or completion
);

-- Claims and idempotency records: one row per live (scope, key), keyed by
-- a fingerprint of both.  A plain claim is a record that completed with its
-- transaction and stored nothing: its record is NULL.  Three columns (the
-- NULL one costs nothing: the null bitmap fits the header's padding) and one
-- unique index keep a new claim to one heap record and one btree record of
-- WAL; expired rows are found by the cleanup's sequential pass, so no index
-- on expires_at is paid for by every claim.  For a processing record,
-- expires_at is the end of its lease plus the scope's ttl.  The cleanup
-- leaves dead rows behind, so vacuum comes after 2% of them, not 20%.
CREATE TABLE dedup.claims (
    key        @extschema@.dedup_fingerprint NOT NULL,
    expires_at timestamptz NOT NULL,
    record     dedup.record_state,
    history    integer,          -- the history_id of the claim's scope, if it has one
    CONSTRAINT claims_pkey PRIMARY KEY (key)
) USING heap WITH (autovacuum_vacuum_scale_factor = 0.02);
COMMENT ON TABLE dedup.claims IS 'claimed keys and idempotency records (fingerprint of scope and key) and their expiry';
SELECT pg_catalog.pg_extension_config_dump('dedup.claims', '');
