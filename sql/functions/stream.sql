-------------------------------------------------------------------------
-- Sequence marks: per-stream high-water marks with producer epochs
-------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION @extschema@.dedup_advance(scope text, stream text, seq bigint,
    epoch bigint DEFAULT NULL, nowait boolean DEFAULT false)
RETURNS boolean
AS 'MODULE_PATHNAME' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.dedup_advance(text, text, bigint, bigint, boolean) IS
    'advance a stream''s mark to seq, the last one applied, in the current transaction: true when seq is beyond the mark, false for a duplicate; an older epoch is fenced';

CREATE OR REPLACE FUNCTION @extschema@.dedup_advance_batch(scope text, streams text[], seqs bigint[],
    epochs bigint[] DEFAULT NULL, nowait boolean DEFAULT false)
RETURNS SETOF text
AS 'MODULE_PATHNAME' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.dedup_advance_batch(text, text[], bigint[], bigint[], boolean) IS
    'advance many streams of a scope in the current transaction; returns the streams that moved';

CREATE OR REPLACE FUNCTION @extschema@.dedup_new_epoch(scope text, stream text)
RETURNS bigint
AS 'MODULE_PATHNAME' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.dedup_new_epoch(text, text) IS
    'take a new producer epoch for a stream (the old one is fenced once this commits); returns it';

CREATE OR REPLACE FUNCTION @extschema@.dedup_new_epoch_batch(scope text, streams text[])
RETURNS bigint
AS 'MODULE_PATHNAME' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.dedup_new_epoch_batch(text, text[]) IS
    'take one new producer epoch for many streams (a producer''s partitions), newer than each one''s; the old ones are fenced once this commits; returns it';

CREATE OR REPLACE FUNCTION @extschema@.dedup_position(scope text, stream text,
    OUT mark bigint, OUT epoch bigint, OUT expires_at timestamptz)
RETURNS SETOF record
AS 'MODULE_PATHNAME' LANGUAGE C STABLE;
COMMENT ON FUNCTION @extschema@.dedup_position(text, text) IS
    'a stream''s mark and epoch, without changing them; no row for a stream never advanced or expired';

CREATE OR REPLACE FUNCTION @extschema@.dedup_streams(scope text,
    OUT stream text, OUT mark bigint, OUT epoch bigint, OUT expires_at timestamptz)
RETURNS SETOF record
AS 'MODULE_PATHNAME' LANGUAGE C STABLE;
COMMENT ON FUNCTION @extschema@.dedup_streams(text) IS
    'every live stream of a scope with its mark and epoch';
