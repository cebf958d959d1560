-- Sequence marks (stream.c): one row per (scope, stream), keyed by a
-- fingerprint of both, holding the producer's epoch and the last sequence
-- number applied.  An advance updates the row in place; no indexed column
-- changes, so it is a HOT update, and the columns that change (expires_at,
-- mark) sit together so that its WAL record holds little more than them.
-- A row expires the scope's retention after its last advance, and the
-- cleanup deletes it.  mark is NULL after a new epoch, before its first
-- advance.
CREATE TABLE dedup.streams (
    key        @extschema@.dedup_fingerprint NOT NULL,
    expires_at timestamptz NOT NULL,
    epoch      bigint CHECK (epoch >= 0),
    mark       bigint CHECK (mark >= 0),
    scope      text COLLATE "C" NOT NULL,
    stream     text COLLATE "C" NOT NULL,
    CONSTRAINT streams_pkey PRIMARY KEY (key)
) USING heap WITH (fillfactor = 70);
COMMENT ON TABLE dedup.streams IS 'per (scope, stream): the producer epoch and the last sequence number applied (the mark), and their expiry';
SELECT pg_catalog.pg_extension_config_dump('dedup.streams', '');
