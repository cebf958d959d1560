-- The time buckets of dedup.claims (bucket.c).  Claims and records are
-- written into the current bucket, a table that inherits from dedup.claims,
-- so that new keys land in a small, recent index; older buckets are only
-- read, and a bucket goes whole (DROP TABLE) once every row in it has
-- expired.  Bucket 0 is dedup.claims itself: the only bucket until the
-- cleanup first opens another, and what a database updated from 1.0 keeps
-- its claims in; once its rows have expired it is emptied with TRUNCATE
-- ONLY and leaves the list.  An empty table stands for bucket 0, current
-- (a new database); the cleanup's first pass lists it.
--
-- state: 'n' next (created, read by every call, written by none yet),
-- 'c' current (the one written), 'x' closed (written no more, its
-- latest expiry not yet known), 's' sealed (max_expires_at known),
-- 'r' retired (every row expired: read by no call, dropped next).
CREATE TABLE dedup.buckets (
    bucket         integer PRIMARY KEY CHECK (bucket >= 0),
    relid          regclass NOT NULL UNIQUE,
    state          "char" NOT NULL CHECK (state IN ('n', 'c', 'x', 's', 'r')),
    opened_at      timestamptz NOT NULL,
    closed_at      timestamptz,
    max_expires_at timestamptz,
    claims         bigint,
    records        bigint
);
COMMENT ON TABLE dedup.buckets IS 'the time buckets of dedup.claims: the table of each, its state, and once closed the latest expiry of its rows';
CREATE UNIQUE INDEX buckets_one_current ON dedup.buckets ((true)) WHERE state = 'c';
SELECT pg_catalog.pg_extension_config_dump('dedup.buckets', '');
