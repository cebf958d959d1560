-- The relay's state (sql/functions/outbox_take.sql has its design): each
-- topic's position in the log, the batches handed out, and the events
-- with a state of their own.  Every row names its partition, as the log's
-- do (sql/tables/outbox.sql).  New in 1.1: the update from 1.0 builds
-- this part in as it is.
-- Where each topic's relays are in the log: every event of the topic with
-- a seq below its position was handed out in a batch, or held back (in
-- dedup.outbox_held).  A topic has a row from the first take that reads
-- its log (one with no event past 0 has none, as at 0).  Its position is
-- the greater of next_seq and the next_seq of its newest batch row in
-- dedup.outbox_batches (the greatest id of the topic's rows there, read
-- by the index on (topic, id, rev) newest first): a take that hands out a
-- batch writes the position after it into the batch's row, a row it
-- inserts anyway, so that a take writes no version of a row another take
-- reads (under a held xmin horizon, every version stays until it ends).
-- next_seq is written only when a take moves the position without a batch.
CREATE TABLE dedup.outbox_topics (
    topic    text COLLATE "C" NOT NULL,
    next_seq bigint NOT NULL DEFAULT 0,
    part     @extschema@.dedup_fingerprint NOT NULL,
    CONSTRAINT outbox_topics_pkey PRIMARY KEY (topic)
) USING heap;
COMMENT ON TABLE dedup.outbox_topics IS 'each topic of the outbox''s log with a position: next_seq, where the topic''s newest batch row (dedup.outbox_batches) holds no later one';

-- The batches of a partition's topics, appended, never updated (issue 48:
-- a held xmin horizon keeps every version of a row updated, and every
-- reader walks them; rows inserted leave none).  A take that hands out a
-- batch inserts its row (rev 0); each settle of it appends a row of the
-- same id with the next rev and the batch's state after it: acked whole or
-- handed out again under a new id (busy false), events settled one by
-- one (settled, retried, events, aggregates), a heartbeat's lease, the
-- members of a take across partitions.  A batch's state is its row of the
-- greatest rev; it is out while that row is busy.  The settles of a batch
-- go one after another, each holding the lock of its rev 0 row (a row
-- lock writes no new version).
--
-- id is the batch's: the partition's number times 2^47, plus a number
-- drawn from the node's counter of batches (dedup.outbox_batch_ids) by
-- each take that hands a batch out, or out again
-- (dedup.outbox_batch_new_id(), src/outbox.c), never given to two batches;
-- within a topic of a partition (whose takes go one after another) ids
-- grow with each take.  next_seq is the topic's position after the take
-- that handed the batch out (outbox_topics), low_id the lowest id of the
-- topic's batches out as that take saw them (this one's when none was
-- lower): every batch of the topic out has an id at least the newest
-- row's low_id, so that a take reads the batches out from there up, and
-- the cleanup deletes the rows below it once no snapshot can need them.
-- Its events are those of the topic's log from first_seq to last_seq, and
-- those of the seqs in extra (handed out from dedup.outbox_held), but for
-- the seqs in settled (held back, or acked or nacked one by one), and the
-- events of dedup.outbox_retry that name the batch (retried of them);
-- events counts them all, aggregates holds hashtext() of their aggregate
-- ids (a row of a batch out no more, busy false, keeps none of these:
-- its lease, range, settled, extra, aggregates and members are NULL, so
-- that an ack's row takes little room).  attempt is that of its events
-- from the log; a batch out whose
-- lease passed is handed out again, as much of it as the take's rules
-- allow, the rest sent to dedup.outbox_retry
-- (sql/functions/outbox_take.sql).  On a Citus cluster a take fills its
-- batch across partitions: each partition's part is a batch of its own,
-- and the first one's (the leader, whose id every event of the take
-- carries) lists the others' ids in members, so that an ack, nack or
-- heartbeat of the leader's id reaches them all (empty for any other
-- batch).
CREATE TABLE dedup.outbox_batches (
    topic       text COLLATE "C" NOT NULL,
    id          bigint NOT NULL,
    rev         integer NOT NULL DEFAULT 0,
    busy        boolean NOT NULL DEFAULT true,
    attempt     integer NOT NULL DEFAULT 0,
    lease_until timestamptz,
    first_seq   bigint,
    last_seq    bigint,
    settled     bigint[] DEFAULT '{}',
    extra       bigint[] DEFAULT '{}',
    retried     integer NOT NULL DEFAULT 0,
    events      integer NOT NULL DEFAULT 0,
    aggregates  integer[] DEFAULT '{}',
    members     bigint[] DEFAULT '{}',
    part        @extschema@.dedup_fingerprint NOT NULL,
    next_seq    bigint NOT NULL,
    low_id      bigint NOT NULL,
    CONSTRAINT outbox_batches_pkey PRIMARY KEY (id, rev)
) USING heap;
-- (the primary key: the counter makes ids unique, a settle's lock its
-- rev; dedup_distribute() puts part first in it, as Citus wants, and a
-- shard move by logical replication needs it)
CREATE INDEX outbox_batches_topic ON dedup.outbox_batches (topic, id, rev);

-- The counter of batch ids (above), per node: on a Citus cluster a
-- partition moved to another node needs that node's counter started past
-- its greatest id (doc/outbox.md).  2^47 - 1 ids, no cycle: a node that
-- handed out that many batches fails its next take (2200H).
CREATE SEQUENCE dedup.outbox_batch_ids AS bigint MINVALUE 1 MAXVALUE 140737488355327 NO CYCLE;
-- The batches out, each as its newest row: for operators and tests (the
-- relay reads a topic's from its low mark up, dedup.outbox_batches_out()).
CREATE VIEW dedup.outbox_inflight AS
SELECT b.* FROM dedup.outbox_batches AS b
WHERE b.busy
  AND NOT EXISTS (SELECT FROM dedup.outbox_batches AS y
                  WHERE y.part OPERATOR(@extschema@.=) b.part AND y.topic = b.topic
                    AND y.id = b.id AND y.rev > b.rev);
COMMENT ON VIEW dedup.outbox_inflight IS 'the outbox''s batches handed out and not settled, each as its newest row in dedup.outbox_batches';
COMMENT ON TABLE dedup.outbox_batches IS 'the outbox''s batches, appended: a row per hand-out and one per settle of it (its state after it); a batch is out while its newest row is busy';

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
