-------------------------------------------------------------------------
-- Transactional outbox: the relay's public functions
-- Each is a C entry of its own (src/outbox_relay.c).
-------------------------------------------------------------------------
-- The relay's public functions.  Each runs the function of the same name in
-- schema dedup (above) as the owner of the outbox, passing the role that
-- called it, which must have the relay privilege on every topic the call
-- touches (42501 otherwise, before anything is written), and the partition
-- it works in: its C entry (src/outbox_relay.c) switches to the owner as
-- PostgreSQL does for SECURITY DEFINER, but keeps the caller's identity for the
-- check.  A batch id names no topic: an ack or nack of a batch of a topic
-- the caller may not relay answers as for a batch not handed out (0),
-- naming nothing and writing nothing.
CREATE OR REPLACE FUNCTION @extschema@.dedup_outbox_take_batch(topic text, batch_size integer DEFAULT 100,
    lease interval DEFAULT NULL, wait interval DEFAULT NULL)
RETURNS TABLE (batch_id bigint, id uuid, aggregatetype text, aggregateid text, type text,
               payload jsonb, headers jsonb, attempts integer, created_at timestamptz,
               lease_expires_at timestamptz, seq bigint)
AS 'MODULE_PATHNAME', 'dedup_outbox_take_batch' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.dedup_outbox_take_batch(text, integer, interval, interval) IS
    'hand out a batch of up to batch_size events of a topic under one lease (lease, or the topic''s), several of an aggregate in seq order, waiting up to wait for one when there is none; ack it with dedup_outbox_ack_batch(batch_id); a batch not acked comes back after its lease';

CREATE OR REPLACE FUNCTION @extschema@.dedup_outbox_extend_batch(batch_id bigint, lease interval DEFAULT NULL)
RETURNS timestamptz
AS 'MODULE_PATHNAME', 'dedup_outbox_extend_batch' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.dedup_outbox_extend_batch(bigint, interval) IS
    'the heartbeat of a batch still handed out: its lease runs lease (or the topic''s) from now; returns the new end, or NULL for a batch not handed out under that id';

CREATE OR REPLACE FUNCTION @extschema@.dedup_outbox_dead(topic text, max integer DEFAULT 100)
RETURNS TABLE (id uuid, seq bigint, aggregatetype text, aggregateid text, type text,
               payload jsonb, headers jsonb, created_at timestamptz, attempts integer,
               last_error text, died_at timestamptz)
AS 'MODULE_PATHNAME', 'dedup_outbox_dead' LANGUAGE C STABLE;
COMMENT ON FUNCTION @extschema@.dedup_outbox_dead(text, integer) IS
    'the dead events of a topic, first max by seq, with their attempts and last error; for its relays';

CREATE OR REPLACE FUNCTION @extschema@.dedup_outbox_ack_batch(batch_id bigint, failed uuid[] DEFAULT NULL,
    retry_delay interval DEFAULT '0', error text DEFAULT NULL)
RETURNS integer
AS 'MODULE_PATHNAME', 'dedup_outbox_ack_batch' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.dedup_outbox_ack_batch(bigint, uuid[], interval, text) IS
    'the batch was published but for the events in failed, which come back after retry_delay (or go dead at the topic''s max_attempts); returns how many were acked (0 for a batch acked before)';

CREATE OR REPLACE FUNCTION @extschema@.dedup_outbox_nack_batch(batch_id bigint,
    retry_delay interval DEFAULT '0', error text DEFAULT NULL)
RETURNS integer
AS 'MODULE_PATHNAME', 'dedup_outbox_nack_batch' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.dedup_outbox_nack_batch(bigint, interval, text) IS
    'no event of the batch was published: all come back after retry_delay, or go dead at the topic''s max_attempts';

CREATE OR REPLACE FUNCTION @extschema@.dedup_outbox_take(topic text, batch_size integer DEFAULT 100)
RETURNS TABLE (id uuid, aggregatetype text, aggregateid text, type text, payload jsonb,
               headers jsonb, attempts integer, created_at timestamptz,
               lease_expires_at timestamptz)
AS 'MODULE_PATHNAME', 'dedup_outbox_take' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.dedup_outbox_take(text, integer) IS
    'hand out up to batch_size events of a topic with a lease (the topic''s lease); an event not acked comes back after it';

CREATE OR REPLACE FUNCTION @extschema@.dedup_outbox_ack(ids uuid[], attempts integer[] DEFAULT NULL)
RETURNS integer
AS 'MODULE_PATHNAME', 'dedup_outbox_ack' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.dedup_outbox_ack(uuid[], integer[]) IS
    'the events were published: they never come back; returns how many were acked now (ids acked before, or taken again since their attempt, count 0)';

CREATE OR REPLACE FUNCTION @extschema@.dedup_outbox_nack(ids uuid[],
    retry_delay interval DEFAULT '0', error text DEFAULT NULL, attempts integer[] DEFAULT NULL)
RETURNS integer
AS 'MODULE_PATHNAME', 'dedup_outbox_nack' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.dedup_outbox_nack(uuid[], interval, text, integer[]) IS
    'the events could not be published: they come back after retry_delay, or go to dead after the topic''s max_attempts';

CREATE OR REPLACE FUNCTION @extschema@.dedup_outbox_redrive(topic text, ids uuid[] DEFAULT NULL)
RETURNS integer
AS 'MODULE_PATHNAME', 'dedup_outbox_redrive' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.dedup_outbox_redrive(text, uuid[]) IS
    'put dead events of a topic (all, or those of ids) back in the outbox, in their original order, with no attempts';

CREATE OR REPLACE FUNCTION @extschema@.dedup_outbox_stats(topic text DEFAULT NULL,
    OUT topic text, OUT pending bigint, OUT in_flight bigint, OUT dead bigint,
    OUT oldest_pending_age interval)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'dedup_outbox_stats' LANGUAGE C STABLE;
COMMENT ON FUNCTION @extschema@.dedup_outbox_stats(text) IS
    'per topic: events pending (including leases that passed), in flight, dead, and the age of the oldest not yet published';

-- A batch's members on a Citus cluster (src/outbox_cluster.c): the ids of
-- the other partitions' batches of the take that handed out batch_id, as
-- its row lists them; with members, these set first.  NULL for a batch
-- not handed out under that id, and for one of a topic the caller may not
-- relay.  For the relay's calls through the partitions only, which route
-- it to the batch's partition through dedup.call_on_shard as the role that
-- called (as every call there: Citus refuses a statement on a partition
-- another role wrote in the transaction): internal, in schema dedup, and
-- executable by the relay roles (dedup.functions_of('relay')), not PUBLIC.
CREATE OR REPLACE FUNCTION dedup.outbox_batch_group(batch_id bigint, members bigint[])
RETURNS bigint[]
AS 'MODULE_PATHNAME', 'dedup_outbox_batch_group' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION dedup.outbox_batch_group(bigint, bigint[]) IS
    'the other partitions'' batches of a take on a Citus cluster, as the batch it handed out lists them (set first, with members); for dedup''s relay calls only';
