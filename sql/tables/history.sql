-- The history tier of a scope (history.c): what its expired claims leave
-- behind.  A scope with a history (dedup.scopes.history, the window, and
-- false_positive_rate) has a history_id, written into each of its claims
-- (dedup.claims.history); when the cleanup retires a time bucket, it folds
-- the fingerprints of the bucket's claims of such scopes into the scope's
-- open generation, a blocked Bloom filter, in the same transaction.
--
-- A generation takes the folds of one slice of time (as long as the
-- window), and goes whole once its slice ended a window ago: a fold at
-- time t is remembered until at least t + window.  Its bits are kept in
-- chunks of 63 blocks of 128 bytes (one row a chunk, about one page); a
-- chunk no fold has touched has no row.  A generation's rate of false
-- positives is half the scope's (less after a slice that grew), so that
-- the two slices a look-up reads add up to the scope's rate; a generation
-- that fills before its slice ends is followed by another of twice its keys
-- and a lower rate (a scalable Bloom filter).
CREATE SEQUENCE dedup.history_ids AS integer;
COMMENT ON SEQUENCE dedup.history_ids IS 'the history_id of a scope that is given a history';
SELECT pg_catalog.pg_extension_config_dump('dedup.history_ids', '');

CREATE TABLE dedup.history_generations (
    generation bigint PRIMARY KEY,
    history_id integer NOT NULL,
    opened_at  timestamptz NOT NULL,
    slice_end  timestamptz NOT NULL,
    rate       double precision NOT NULL CHECK (rate > 0 AND rate < 1),
    k          integer NOT NULL CHECK (k BETWEEN 1 AND 13),
    nblocks    integer NOT NULL CHECK (nblocks > 0),
    capacity   bigint NOT NULL CHECK (capacity > 0),
    keys       bigint NOT NULL DEFAULT 0 CHECK (keys >= 0),
    -- on a Citus cluster, the shard whose keys it holds (the part of its
    -- outbox partition, which hashes into it): dedup_distribute() makes it
    -- the distribution column; NULL on one server
    part       @extschema@.dedup_fingerprint
) USING heap;
COMMENT ON TABLE dedup.history_generations IS 'the generations of the scopes'' histories: each a blocked Bloom filter of the claims folded during its slice';
CREATE SEQUENCE dedup.history_generations_seq OWNED BY dedup.history_generations.generation;
ALTER TABLE dedup.history_generations
    ALTER COLUMN generation SET DEFAULT pg_catalog.nextval('dedup.history_generations_seq');
SELECT pg_catalog.pg_extension_config_dump('dedup.history_generations', '');
SELECT pg_catalog.pg_extension_config_dump('dedup.history_generations_seq', '');

CREATE TABLE dedup.history_blocks (
    generation bigint NOT NULL,
    chunk      integer NOT NULL CHECK (chunk >= 0),
    bits       bytea NOT NULL,
    part       @extschema@.dedup_fingerprint,     -- as history_generations.part
    CONSTRAINT history_blocks_pkey PRIMARY KEY (generation, chunk)
) USING heap;
ALTER TABLE dedup.history_blocks ALTER COLUMN bits SET STORAGE PLAIN;
COMMENT ON TABLE dedup.history_blocks IS 'the bits of the history generations, a chunk of 8064 bytes a row';
SELECT pg_catalog.pg_extension_config_dump('dedup.history_blocks', '');
