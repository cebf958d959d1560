-- The relay's state (sql/functions/outbox_take.sql has its design): each
-- topic's position in the log, the batches handed out, and the events
-- with a state of their own.  Every row names its partition, as the log's
-- do (sql/tables/outbox.sql).  New in 1.1: the update from 1.0 builds
-- this part in as it is.
-- Where each topic's relays are in the log: every event of the topic with
-- a seq below its position was handed out in a batch, or held back (in
-- dedup.outbox_held).  A topic has a row from the first take that reads
-- its log (one with no event past 0 has none, as at 0).  Its position is
-- the greater of next_seq and the next_seq of its slots in
-- dedup.outbox_batches (dedup.outbox_positions): a take that hands out a
-- batch writes the position after it into the batch's slot, a row it
-- writes anyway, so that a take and its ack leave two row versions, not
-- three (under a held xmin horizon, every version stays until it ends).
-- next_seq is written when a take moves the position without a batch,
-- and when a slot goes to another topic (it takes its topic's position
-- with it).
CREATE TABLE dedup.outbox_topics (
    topic    text COLLATE "C" NOT NULL,
    next_seq bigint NOT NULL DEFAULT 0,
    part     @extschema@.dedup_fingerprint NOT NULL,
    CONSTRAINT outbox_topics_pkey PRIMARY KEY (topic)
) USING heap;
COMMENT ON TABLE dedup.outbox_topics IS 'each topic of the outbox''s log with a position: next_seq, where none of its slots holds a later one (dedup.outbox_positions)';

-- The batches of a partition's topics, one row a slot, reused (updated in
-- place; a take's update is not HOT, since it gives the slot a new id, an
-- ack's is): a busy slot holds a batch of its topic handed out and not yet
-- settled; a free one goes to the next batch of any topic of the
-- partition that needs one (its own topic's first), so that a partition
-- has no more slots than batches handed out at once.  A slot's number is
-- one of its partition's (below 2^16); id is that of the batch it holds, or
-- held last (NULL before one): the partition's number times 2^47, plus a
-- number drawn from the node's counter of batches (dedup.outbox_batch_ids)
-- by each take that hands a batch out, or out again
-- (dedup.outbox_batch_new_id(), src/outbox.c).  No id is given to two
-- batches, however often a slot is reused: no id handed out before names a
-- batch handed out after, and no slot is retired.  next_seq is its topic's
-- position after the last batch handed out in it (NULL before one), until
-- the slot goes to another topic.  Its
-- out in it (NULL before one), until the slot goes to another topic.  Its
-- events are those of the topic's log from first_seq to
-- last_seq, and those of the seqs in extra (handed out from
-- dedup.outbox_held), but for the seqs in settled (held back, or acked or
-- nacked one by one), and the events of dedup.outbox_retry that name the batch
-- (retried of them); events counts them all, aggregates holds hashtext()
-- of their aggregate ids.  attempt is that of its events from the log; a
-- busy slot whose lease passed is handed out again, as much of it as the
-- take's rules allow, the rest sent to dedup.outbox_retry
-- (sql/functions/outbox_take.sql).  On a Citus
-- cluster a take fills its batch across partitions: each partition's part
-- is a batch of its own, and the first one's (the leader, whose id every
-- event of the take carries) lists the others' ids in members, so that an
-- ack, nack or heartbeat of the leader's id reaches them all (empty for
-- any other batch).
CREATE TABLE dedup.outbox_batches (
    slot        integer NOT NULL,
    topic       text COLLATE "C" NOT NULL,
    id          bigint,
    busy        boolean NOT NULL DEFAULT false,
    attempt     integer NOT NULL DEFAULT 0,
    lease_until timestamptz,
    first_seq   bigint,
    last_seq    bigint,
    settled     bigint[] NOT NULL DEFAULT '{}',
    extra       bigint[] NOT NULL DEFAULT '{}',
    retried     integer NOT NULL DEFAULT 0,
    events      integer NOT NULL DEFAULT 0,
    aggregates  integer[] NOT NULL DEFAULT '{}',
    members     bigint[] NOT NULL DEFAULT '{}',
    part        @extschema@.dedup_fingerprint NOT NULL,
    next_seq    bigint,
    CONSTRAINT outbox_batches_pkey PRIMARY KEY (slot)
) USING heap WITH (fillfactor = 20);
CREATE INDEX outbox_batches_topic ON dedup.outbox_batches (topic, slot);
-- (not unique: on a Citus cluster a unique index names the distribution
-- column; the counter makes ids unique)
CREATE INDEX outbox_batches_id ON dedup.outbox_batches (id);

-- The counter of batch ids (above), per node: on a Citus cluster a
-- partition moved to another node needs that node's counter started past
-- its greatest id (doc/outbox.md).  2^47 - 1 ids, no cycle: a node that
-- handed out that many batches fails its next take (2200H).
CREATE SEQUENCE dedup.outbox_batch_ids AS bigint MINVALUE 1 MAXVALUE 140737488355327 NO CYCLE;

-- Each topic's position in each partition (the comment of outbox_topics):
-- every reader of a position reads it here.  (A join, not a subquery per
-- row, which Citus would not run across partitions.)
CREATE VIEW dedup.outbox_positions AS
SELECT t.part, t.topic, GREATEST(t.next_seq, b.next_seq) AS next_seq
FROM dedup.outbox_topics AS t
LEFT JOIN (SELECT x.part, x.topic, pg_catalog.max(x.next_seq) AS next_seq
           FROM dedup.outbox_batches AS x GROUP BY x.part, x.topic) AS b
  ON b.part OPERATOR(@extschema@.=) t.part AND b.topic = t.topic;
COMMENT ON VIEW dedup.outbox_positions IS 'each topic''s position in the outbox''s log: the greater of dedup.outbox_topics.next_seq and that of its slots';
COMMENT ON TABLE dedup.outbox_batches IS 'the slots of the outbox''s batches, reused by any topic: a busy one holds a batch of its topic handed out and not yet acked, with its events, attempt and lease';

-- Events with a state of their own (PgQ's retry queue): nacked ones,
-- waiting for their retry_delay (and the later events of their aggregate
-- in their batch, sent back with them); redriven dead ones.  A copy
-- of the event's row, with its attempts, the time it may go out again, its
-- last error, and the batch it is in while handed out.
CREATE TABLE dedup.outbox_retry (
    seq           bigint NOT NULL,
    id            uuid NOT NULL,
    topic         text COLLATE "C" NOT NULL,
    aggregatetype text NOT NULL,
    aggregateid   text NOT NULL,
    type          text NOT NULL,
    payload       jsonb,
    headers       jsonb NOT NULL,
    created_at    timestamptz NOT NULL,
    attempts      integer NOT NULL DEFAULT 0,
    visible_at    timestamptz NOT NULL DEFAULT pg_catalog.now(),
    last_error    text,
    batch         bigint,
    part          @extschema@.dedup_fingerprint NOT NULL,
    CONSTRAINT outbox_retry_pkey PRIMARY KEY (id)
) USING heap WITH (fillfactor = 50);
CREATE INDEX outbox_retry_topic_seq ON dedup.outbox_retry (topic, seq);
CREATE INDEX outbox_retry_aggregate_seq ON dedup.outbox_retry (topic, aggregateid, seq);
CREATE INDEX outbox_retry_batch ON dedup.outbox_retry (batch) WHERE batch IS NOT NULL;
COMMENT ON TABLE dedup.outbox_retry IS 'outbox events nacked (with the later events of their aggregate in their batch), or redriven: each with its own attempts and time';

-- Events held back behind an earlier unpublished event of their aggregate
-- (in a busy batch, or in dedup.outbox_retry), without a row each: one row
-- per held aggregate of a topic says that its events in the log from
-- from_seq to upto_seq (all below the topic's position, none in a batch)
-- wait; upto_seq is the seq of one of them.  A take hands them out, in seq
-- order, once the aggregate is free, reading them from the log by seq
-- (sql/functions/outbox_take.sql says why no index of the log's aggregates).
CREATE TABLE dedup.outbox_held (
    topic       text COLLATE "C" NOT NULL,
    aggregateid text NOT NULL,
    from_seq    bigint NOT NULL,
    upto_seq    bigint NOT NULL,
    part        @extschema@.dedup_fingerprint NOT NULL,
    CONSTRAINT outbox_held_pkey PRIMARY KEY (topic, aggregateid)
) USING heap WITH (fillfactor = 50);
COMMENT ON TABLE dedup.outbox_held IS 'aggregates of the outbox held back behind an earlier unpublished event: the range of the log their waiting events are in, one row per aggregate';

SELECT pg_catalog.pg_extension_config_dump('dedup.outbox_topics', '');
SELECT pg_catalog.pg_extension_config_dump('dedup.outbox_batches', '');
SELECT pg_catalog.pg_extension_config_dump('dedup.outbox_batch_ids', '');
SELECT pg_catalog.pg_extension_config_dump('dedup.outbox_retry', '');
SELECT pg_catalog.pg_extension_config_dump('dedup.outbox_held', '');
