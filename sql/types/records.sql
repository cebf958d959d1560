-- The result of dedup_begin() (sql/functions/record.sql): a type of its
-- own, written before the function parts, which the update script from 1.0
-- (which has it, the same) builds in as well.
CREATE TYPE @extschema@.dedup_begin_result AS (
    outcome          text,         -- started | replay | in_progress | mismatch
    status           text,         -- processing | complete (| released: in_progress over a release being written)
    response_code    integer,      -- the stored response, for replay
    response         jsonb,
    attempts         integer,
    lease_expires_at timestamptz,
    first_seen_at    timestamptz
);
COMMENT ON TYPE @extschema@.dedup_begin_result IS 'what dedup_begin() found or did';
