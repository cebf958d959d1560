-- The result of dedup_begin() (sql/functions/record.sql): a type of its
-- own, written before the function parts.  1.0 has it without
-- request_fingerprint, which the update adds (sql/updates/1.0--1.1.pre.sql).
-- Its columns are built-in types only, as those of every row a client
-- reads: a driver reads a row as one value in binary (asyncpg does), and
-- cannot read one that holds a type it has no codec for, as
-- dedup_fingerprint; a fingerprint is its text, 32 hex digits, which
-- dedup_fingerprint_out writes (compare with dedup_fingerprint(x)::text).
CREATE TYPE @extschema@.dedup_begin_result AS (
    outcome          text,         -- started | replay | in_progress | mismatch
    status           text,         -- processing | complete (| released: in_progress over a release being written)
    response_code    integer,      -- the stored response, for replay
    response         jsonb,
    attempts         integer,
    lease_expires_at timestamptz,
    first_seen_at    timestamptz,
    request_fingerprint text       -- of the stored request, 32 hex digits (1.1); on mismatch, the other one
);
COMMENT ON TYPE @extschema@.dedup_begin_result IS 'what dedup_begin() found or did';
