-- The result of dedup_begin() (sql/functions/record.sql): a type of its
-- own, written before the function parts.  1.0 has it without
-- request_fingerprint, which the update adds (sql/updates/1.0--1.1.pre.sql).
CREATE TYPE @extschema@.dedup_begin_result AS (
    outcome          text,         -- started | replay | in_progress | mismatch
    status           text,         -- processing | complete (| released: in_progress over a release being written)
    response_code    integer,      -- the stored response, for replay
    response         jsonb,
    attempts         integer,
    lease_expires_at timestamptz,
    first_seen_at    timestamptz,
    request_fingerprint @extschema@.dedup_fingerprint  -- of the stored request (1.1); on mismatch, the other one
);
COMMENT ON TYPE @extschema@.dedup_begin_result IS 'what dedup_begin() found or did';
