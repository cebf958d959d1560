-------------------------------------------------------------------------
-- Transactional outbox: the relay's take
-- These PL/pgSQL functions own the relay's rules (what may be handed out,
-- held back, handed out again); src/outbox_fast.c does, for the take and
-- the ack of a relay keeping up, only what they do where no rule applies,
-- and dedup.outbox_fast_path = off sends every call here.
-------------------------------------------------------------------------
-- The relay, on batches (PgQ's and Kafka's design, with per-aggregate order).
--
-- The log (dedup.outbox) is appended by puts and never updated.  A topic's
-- relays read it in seq order from the topic's position (outbox_position),
-- and a take hands out the next events as one batch (outbox_batches): one
-- row inserted for the batch, none per event, and one appended by each
-- settle of it (sql/tables/outbox_relay.sql): no row of the relay's state
-- is updated, so a held xmin horizon leaves no versions for a take to
-- read.  The events stay in the log until the cleanup deletes what every
-- relay has passed.  Only events that need a state of their own get a row in
-- outbox_retry: one nacked (until its retry_delay, with the later events of
-- its aggregate in its batch), one redriven.
--
-- Commit order.  A put takes its seq under a lock of its topic held until
-- it commits (outbox_put.c, outbox.c); a take reads the sequence, then waits for the
-- puts of the topic in progress (dedup.outbox_stable_seq), so every seq up
-- to what it read is settled: committed, and seen by the take's next
-- statement, or rolled back.  The position never passes an event that
-- could still commit.  Like Kafka's read_committed consumers at the last
-- stable offset, a take waits while a put of its topic is uncommitted.
--
-- Aggregates.  An event is handed out only when no earlier event of its
-- aggregate is unpublished outside its own batch: none in another batch
-- not yet acked (its lease may have passed: it is handed out again first),
-- none in outbox_retry, none held back.  So never two batches of one
-- aggregate are out at once, and a batch may hold several consecutive
-- events of one aggregate, in seq order (as a Kafka fetch holds many of a
-- partition's): one relay acking each batch drains a hot aggregate at
-- batch speed and holds nothing back.  A failed event sends the later
-- events of its aggregate in its batch back with it, in order (settle), so
-- a failing event holds back its aggregate only, never its topic.  The
-- 1.0 take keeps 1.0's one event of an aggregate a batch (its relays may
-- publish a batch in any order).
--
-- Held events.  An event of the log whose aggregate must wait (another
-- batch holds it, or an earlier event of it is in outbox_retry or held)
-- gets no row of its own: the topic's position passes it, and one row per
-- held aggregate in outbox_held, (topic, aggregate, from_seq, upto_seq),
-- says its events in that range of the log wait; a take stretches it, once
-- per take and aggregate, however many events it passes.  Held events take
-- no room in a batch, so a take reads on past them until its batch is full
-- (at most ten times its room): a hot aggregate another relay holds costs
-- the next take one read of its events and one row write, not a row per
-- event (1.1's first relay inserted each into outbox_retry, and every take
-- went through all of them again).  Once the aggregate is free, a take
-- reads its events back from the log in seq order within the range, by the
-- (topic, seq) index, filtering on the aggregate.  The choices weighed:
-- stopping the topic's position at the first held event would keep a
-- relay that dies holding a hot aggregate from handing out any other
-- aggregate until its lease passes (it starves the topic); an index of the
-- log on (topic, aggregateid, seq), as 1.0 had, would make the read-back
-- exact, but every put would pay for it in WAL (the put's budget is 1.3x
-- the seed's INSERT).  The read-back costs the range's length, which is
-- short while a batch is out (the time of one publish), and is read once
-- per batch of the aggregate; an aggregate held for long behind a nacked
-- event (its retry_delay) among a busy topic costs one long read when due.
-- The cleanup keeps the log from the first held event of each topic.
--
-- Leases and attempts.  A batch has one lease, from its hand-out; when it
-- passes the next take hands the same events out again (attempt + 1),
-- before anything new, under a new batch id, so that the relay that held
-- it before can no longer ack or nack it by that id.  It hands out what
-- its own rules allow of them: at most its batch_size, and for the 1.0
-- take one event of an aggregate (a rolling upgrade runs 1.0 and 1.1
-- relays on one topic, and the 1.0 one takes over the 1.1 one's batch);
-- the rest goes back to outbox_retry, due at once, in order, as the rest
-- of a nacked aggregate does, and the next takes hand it out (step 1).
-- An event handed out max_attempts times and not acked goes dead;
-- so does one nacked at its max_attempts.  Relays of one topic take one
-- after another in a partition (the relay lock of the topic there, held
-- for the take's transaction); they publish and ack in parallel.
--
-- A take needs a snapshot of its own for each statement: it refuses to run
-- in a REPEATABLE READ or SERIALIZABLE transaction (0A000).
--
-- Partitions (sql/tables/outbox.sql).  Each function below works in one
-- partition of the outbox, in_part, which the relay's public functions
-- (outbox_relay.c) pass: the partition of a topic's log a take reads, that of a
-- batch's id (its number is in the id), those of the events of ids.
-- Every statement names it, so that on a Citus cluster each runs on the
-- partition's shards alone.  Positions, batches, retries and dead
-- letters are a partition's; per-aggregate order is kept within one,
-- which holds every event of an aggregate.

-- The highest seq below which every put of topic has settled: waits for
-- the puts of the topic in progress (never for the caller's own).
CREATE OR REPLACE FUNCTION dedup.outbox_stable_seq(in_part @extschema@.dedup_fingerprint, topic text)
RETURNS bigint
AS 'MODULE_PATHNAME', 'dedup_outbox_stable_seq' LANGUAGE C STRICT VOLATILE;
REVOKE ALL ON FUNCTION dedup.outbox_stable_seq(@extschema@.dedup_fingerprint, text) FROM PUBLIC;

-- Waits for the puts of topic in progress: a take does, before it reads
-- the relay's state, so that it sees every put that was in progress as it
-- began, even one that found no session listening on dedup_outbox and sent
-- no NOTIFY (src/outbox.c: a relay LISTENs, then takes).
CREATE OR REPLACE FUNCTION dedup.outbox_wait_puts(topic text) RETURNS void
AS 'MODULE_PATHNAME', 'dedup_outbox_wait_puts' LANGUAGE C STRICT VOLATILE;
REVOKE ALL ON FUNCTION dedup.outbox_wait_puts(text) FROM PUBLIC;

-- The relay lock of a topic in a partition, held until the transaction
-- ends: the takes of a topic in a partition go one after another.
CREATE OR REPLACE FUNCTION dedup.outbox_lock_relay(in_part @extschema@.dedup_fingerprint, topic text) RETURNS void
AS 'MODULE_PATHNAME', 'dedup_outbox_lock_relay' LANGUAGE C STRICT VOLATILE;
REVOKE ALL ON FUNCTION dedup.outbox_lock_relay(@extschema@.dedup_fingerprint, text) FROM PUBLIC;

-- Move events to the dead letters: from the log (by seq) or from
-- outbox_retry (by id), with their attempts and last error.  An INSERT ...
-- SELECT of the outbox writes in_part itself as its rows' part, not the
-- column read: on a Citus cluster this runs delegated to the partition's
-- node, where Citus runs a statement only if it names the distribution
-- argument as the value it writes (as every INSERT of these functions
-- does: outbox_settle's into outbox_retry, outbox_redrive's).
CREATE OR REPLACE FUNCTION dedup.outbox_bury(in_part @extschema@.dedup_fingerprint, for_topic text, log_seqs bigint[],
    log_attempts integer, retry_ids uuid[], error text)
RETURNS integer
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    n integer := 0;
    m integer;
BEGIN
    IF cardinality(log_seqs) > 0 THEN
        INSERT INTO dedup.outbox_dead (part, seq, id, topic, aggregatetype, aggregateid, type,
                                       payload, headers, created_at, attempts, last_error)
        SELECT in_part, o.seq, o.id, o.topic, o.aggregatetype, o.aggregateid, o.type,
               o.payload, o.headers, o.created_at, log_attempts, error
        FROM dedup.outbox AS o
        WHERE o.part OPERATOR(@extschema@.=) in_part AND o.topic = for_topic AND o.seq = ANY (log_seqs)
        ON CONFLICT ON CONSTRAINT outbox_dead_pkey DO NOTHING;
        GET DIAGNOSTICS n = ROW_COUNT;
    END IF;
    IF cardinality(retry_ids) > 0 THEN
        WITH gone AS (
            DELETE FROM dedup.outbox_retry AS r
            WHERE r.part OPERATOR(@extschema@.=) in_part AND r.id = ANY (retry_ids) RETURNING r.*
        )
        INSERT INTO dedup.outbox_dead (part, seq, id, topic, aggregatetype, aggregateid, type,
                                       payload, headers, created_at, attempts, last_error)
        SELECT in_part, g.seq, g.id, g.topic, g.aggregatetype, g.aggregateid, g.type,
               g.payload, g.headers, g.created_at, g.attempts, coalesce(error, g.last_error)
        FROM gone AS g
        ON CONFLICT ON CONSTRAINT outbox_dead_pkey DO NOTHING;
        GET DIAGNOSTICS m = ROW_COUNT;
        n := n + m;
    END IF;
    RETURN n;
END
$$;
REVOKE ALL ON FUNCTION dedup.outbox_bury(@extschema@.dedup_fingerprint, text, bigint[], integer, uuid[], text) FROM PUBLIC;

-- A new batch's id (src/outbox.c, for both paths): its partition's number
-- times 2^47, plus the next number of the node's counter of batches
-- (dedup.outbox_batch_ids), never given to another batch.  A take draws
-- one for each batch it hands out, and again for one it hands out again.
-- With above (a topic's newest batch id in the partition), an id above it:
-- the node's counter behind the partition's ids is set past it first.
CREATE OR REPLACE FUNCTION dedup.outbox_batch_new_id(in_part @extschema@.dedup_fingerprint, above bigint DEFAULT NULL)
RETURNS bigint
AS 'MODULE_PATHNAME', 'dedup_outbox_batch_new_id' LANGUAGE C VOLATILE;
REVOKE ALL ON FUNCTION dedup.outbox_batch_new_id(@extschema@.dedup_fingerprint, bigint) FROM PUBLIC;

-- Whether bid is an id a batch can have (src/outbox.c decodes an id for
-- both paths); a row of outbox_batches with that id is the batch.
CREATE OR REPLACE FUNCTION dedup.outbox_batch_valid(bid bigint) RETURNS boolean
AS 'MODULE_PATHNAME', 'dedup_outbox_batch_valid' LANGUAGE C IMMUTABLE STRICT;
REVOKE ALL ON FUNCTION dedup.outbox_batch_valid(bigint) FROM PUBLIC;

-- The most events a take hands out (the fast path's OUTBOX_MAX_BATCH_SIZE).
CREATE OR REPLACE FUNCTION dedup.outbox_max_batch_size() RETURNS integer
AS 'MODULE_PATHNAME', 'dedup_outbox_max_batch_size' LANGUAGE C IMMUTABLE STRICT;
REVOKE ALL ON FUNCTION dedup.outbox_max_batch_size() FROM PUBLIC;

-- How many events of the log a take reads for room events of a batch of
-- batch_size, and the topic's position after it read scanned of them and
-- kept the first kept, the last of seq last (src/outbox.c has both rules,
-- which the fast path applies too).
CREATE OR REPLACE FUNCTION dedup.outbox_scan_limit(batch_size integer, room integer) RETURNS integer
AS 'MODULE_PATHNAME', 'dedup_outbox_scan_limit' LANGUAGE C IMMUTABLE STRICT;
REVOKE ALL ON FUNCTION dedup.outbox_scan_limit(integer, integer) FROM PUBLIC;
CREATE OR REPLACE FUNCTION dedup.outbox_next_position(pos bigint, stable bigint, scanned bigint,
    kept bigint, scan_limit integer, last bigint) RETURNS bigint
AS 'MODULE_PATHNAME', 'dedup_outbox_next_position' LANGUAGE C IMMUTABLE STRICT;
REVOKE ALL ON FUNCTION dedup.outbox_next_position(bigint, bigint, bigint, bigint, integer, bigint) FROM PUBLIC;

-- The state a take of topic in partition in_part starts from, read by
-- both paths in one place: the PL/pgSQL take below and the fast path
-- (src/outbox_fast.c, FAST_STATE, by a kept plan).  One row:
--   next_seq: the topic's position (sql/tables/outbox_relay.sql), the
--     greater of its row's in outbox_topics and its newest batch row's;
--     NULL when the topic has no row there (none of its log read yet);
--   has_retry, has_held: whether outbox_retry, outbox_held have events of
--     the topic;
--   has_log: whether the log has events of it from the position (from 0
--     with none) up;
--   low_id, newest_id: its newest batch row's low mark and id (NULL with
--     none), from which up its batches out are.
-- (C, not SQL: Citus plans no statement of a SQL function that has
-- parameters, inlined or not.)  STABLE, read with the caller's snapshot:
-- a STABLE caller of outbox_position() (outbox_stats(), outbox_check_ids())
-- reads the position in the snapshot it reads the events and batches in.
CREATE OR REPLACE FUNCTION dedup.outbox_take_state(in_part @extschema@.dedup_fingerprint, for_topic text,
    OUT next_seq bigint, OUT has_retry boolean, OUT has_held boolean, OUT has_log boolean,
    OUT low_id bigint, OUT newest_id bigint)
AS 'MODULE_PATHNAME', 'dedup_outbox_take_state' LANGUAGE C STRICT STABLE;
REVOKE ALL ON FUNCTION dedup.outbox_take_state(@extschema@.dedup_fingerprint, text) FROM PUBLIC;

-- The topic's position in partition in_part and its low mark:
-- outbox_take_state()'s next_seq and low_id.
CREATE OR REPLACE FUNCTION dedup.outbox_position(in_part @extschema@.dedup_fingerprint, for_topic text,
    OUT next_seq bigint, OUT low bigint)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    SELECT s.next_seq, s.low_id INTO next_seq, low FROM dedup.outbox_take_state(in_part, for_topic) AS s;
END
$$;
REVOKE ALL ON FUNCTION dedup.outbox_position(@extschema@.dedup_fingerprint, text) FROM PUBLIC;

-- The batches of topic out in partition in_part, each as its newest row
-- (busy), in id order: those from the newest batch row's low mark up.  The
-- fast take's statement (FAST_OUT, src/outbox_fast.c), so that both paths
-- read them one way.  (C, not SQL: see outbox_take_state().)  STABLE,
-- read with the caller's snapshot, as outbox_take_state().
CREATE OR REPLACE FUNCTION dedup.outbox_batches_out(in_part @extschema@.dedup_fingerprint, for_topic text)
RETURNS SETOF dedup.outbox_batches
AS 'MODULE_PATHNAME', 'dedup_outbox_batches_out' LANGUAGE C STRICT STABLE;
REVOKE ALL ON FUNCTION dedup.outbox_batches_out(@extschema@.dedup_fingerprint, text) FROM PUBLIC;

-- The aggregates the batches of topic out in partition in_part hold
-- (hashtext() of their ids), sorted, each once: an event of one of them is
-- held back.  The fast take's (fast_aggregates_out(), src/outbox_fast.c,
-- which gives way where a lease of one passed), so that both paths read
-- them one way.  (C, not SQL: see outbox_take_state().)  STABLE, read with
-- the caller's snapshot, as outbox_take_state().
CREATE OR REPLACE FUNCTION dedup.outbox_aggregates_out(in_part @extschema@.dedup_fingerprint, for_topic text)
RETURNS integer[]
AS 'MODULE_PATHNAME', 'dedup_outbox_aggregates_out' LANGUAGE C STRICT STABLE;
REVOKE ALL ON FUNCTION dedup.outbox_aggregates_out(@extschema@.dedup_fingerprint, text) FROM PUBLIC;

-- The range of topic's log in partition in_part a take reads: of each
-- event from from_seq up to upto_seq, in seq order, at most scan_limit of
-- them, its seq, aggregate id and hashtext() of it.  The fast take's
-- statement (FAST_SCAN, src/outbox_fast.c, planned once: a range of the
-- index on (topic, seq) in order), so that both paths read the log one
-- way.  Arrays, one row: a take reads them in a statement of its own, as
-- outbox_members().  (C, not SQL: see outbox_take_state().)  STABLE, read
-- with the caller's snapshot, as outbox_take_state().
CREATE OR REPLACE FUNCTION dedup.outbox_log_scan(in_part @extschema@.dedup_fingerprint, for_topic text,
    from_seq bigint, upto_seq bigint, scan_limit integer,
    OUT seqs bigint[], OUT aggregateids text[], OUT hashes integer[])
AS 'MODULE_PATHNAME', 'dedup_outbox_log_scan' LANGUAGE C STRICT STABLE;
REVOKE ALL ON FUNCTION dedup.outbox_log_scan(@extschema@.dedup_fingerprint, text, bigint, bigint, integer) FROM PUBLIC;

-- The position of topic in partition in_part moved from pos to next_seq
-- by a take that hands out no batch: written in outbox_topics when past
-- pos (a batch carries it in its row).  The fast take's statement
-- (FAST_TOPIC_UPDATE, src/outbox_fast.c), so that both paths write it one
-- way.  (C, not SQL: see outbox_take_state().)
CREATE OR REPLACE FUNCTION dedup.outbox_topic_move(in_part @extschema@.dedup_fingerprint, for_topic text,
    pos bigint, next_seq bigint) RETURNS void
AS 'MODULE_PATHNAME', 'dedup_outbox_topic_move' LANGUAGE C STRICT VOLATILE;
REVOKE ALL ON FUNCTION dedup.outbox_topic_move(@extschema@.dedup_fingerprint, text, bigint, bigint) FROM PUBLIC;

-- Under a transaction snapshot (REPEATABLE READ, SERIALIZABLE): a 40001
-- error if batch bid has a row of a rev past rev, appended by a settle or
-- take that committed after the snapshot was taken (src/outbox.c).
CREATE OR REPLACE FUNCTION dedup.outbox_batch_check_current(in_part @extschema@.dedup_fingerprint, bid bigint,
    rev integer) RETURNS void
AS 'MODULE_PATHNAME', 'dedup_outbox_batch_check_current' LANGUAGE C STRICT VOLATILE;
REVOKE ALL ON FUNCTION dedup.outbox_batch_check_current(@extschema@.dedup_fingerprint, bigint, integer) FROM PUBLIC;

-- Batch bid of partition in_part, as its newest row, if it is out (busy),
-- else no row; locked (its rev 0 row, so that the settles of a batch go
-- one after another) unless only_read.  skip_locked: no row either while
-- another transaction holds its lock (an ack, nack, heartbeat or take of
-- it in flight), without waiting for it.  (These are PL/pgSQL, not SQL:
-- Citus plans no statement of a SQL function that has parameters.)
CREATE OR REPLACE FUNCTION dedup.outbox_batch(in_part @extschema@.dedup_fingerprint, bid bigint,
                                              skip_locked boolean DEFAULT false,
                                              only_read boolean DEFAULT false)
RETURNS SETOF dedup.outbox_batches
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    b dedup.outbox_batches;
BEGIN
    IF NOT dedup.outbox_batch_valid(bid) THEN
        RETURN;
    END IF;
    IF skip_locked THEN
        PERFORM FROM dedup.outbox_batches AS x
        WHERE x.part OPERATOR(@extschema@.=) in_part AND x.id = bid AND x.rev = 0
        FOR UPDATE SKIP LOCKED;
    ELSIF NOT only_read THEN
        PERFORM FROM dedup.outbox_batches AS x
        WHERE x.part OPERATOR(@extschema@.=) in_part AND x.id = bid AND x.rev = 0
        FOR UPDATE;
    ELSE
        PERFORM;
    END IF;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    -- (a statement of its own: it sees what a settle that held the lock
    -- before committed; under a transaction snapshot, which may not, the
    -- settle fails if a row was appended since, 40001)
    SELECT * INTO b FROM dedup.outbox_batches AS x
    WHERE x.part OPERATOR(@extschema@.=) in_part AND x.id = bid
    ORDER BY x.rev DESC LIMIT 1;
    IF NOT FOUND OR NOT b.busy THEN
        RETURN;
    END IF;
    IF NOT only_read THEN
        PERFORM dedup.outbox_batch_check_current(in_part, bid, b.rev);
    END IF;
    RETURN NEXT b;
END
$$;
REVOKE ALL ON FUNCTION dedup.outbox_batch(@extschema@.dedup_fingerprint, bigint, boolean, boolean) FROM PUBLIC;

-- A batch's state after a settle: b (its newest row, changed) appended as
-- the next rev of its id; returns the row written.  A batch out no more
-- (b not busy) keeps none of its state but its counts, the topic's
-- position and the low mark (sql/tables/outbox_relay.sql).  The fast
-- ack's statement (FAST_APPEND, src/outbox_fast.c), so that both paths
-- append a batch's row one way.  (C, not SQL: see outbox_take_state().)
CREATE OR REPLACE FUNCTION dedup.outbox_batch_append(in_part @extschema@.dedup_fingerprint, b dedup.outbox_batches)
RETURNS dedup.outbox_batches
AS 'MODULE_PATHNAME', 'dedup_outbox_batch_append' LANGUAGE C VOLATILE;
REVOKE ALL ON FUNCTION dedup.outbox_batch_append(@extschema@.dedup_fingerprint, dedup.outbox_batches) FROM PUBLIC;

-- A batch handed out: its rev 0 row, b's columns but part, rev, busy and
-- low_id, with its low mark from low_out, the lowest id of its topic's
-- batches out (NULL with none); returns the low mark written.  The fast
-- take's statement (FAST_WRITE, src/outbox_fast.c), so that both paths
-- write the row one way.  (C, not SQL: see outbox_take_state().)
CREATE OR REPLACE FUNCTION dedup.outbox_batch_write(in_part @extschema@.dedup_fingerprint, b dedup.outbox_batches,
                                                    low_out bigint) RETURNS bigint
AS 'MODULE_PATHNAME', 'dedup_outbox_batch_write' LANGUAGE C VOLATILE;
REVOKE ALL ON FUNCTION dedup.outbox_batch_write(@extschema@.dedup_fingerprint, dedup.outbox_batches, bigint) FROM PUBLIC;

-- A batch handed out (b: its rev 0 row but for part, rev and low_id), by
-- a take that holds its topic's relay lock: inserted with the low mark of
-- its topic's batches out, as this statement sees them.
CREATE OR REPLACE FUNCTION dedup.outbox_batch_insert(in_part @extschema@.dedup_fingerprint, b dedup.outbox_batches)
RETURNS dedup.outbox_batches
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    low_out bigint;
BEGIN
    low_out := (SELECT min(o.id) FROM dedup.outbox_batches_out(in_part, b.topic) AS o);
    -- a topic with a batch has a position (the 1.0 calls find its batches
    -- by its row): one whose batch holds events of outbox_retry alone may
    -- have none yet (1.0's, from the update)
    IF (SELECT t.next_seq FROM dedup.outbox_topics AS t
        WHERE t.part OPERATOR(@extschema@.=) in_part AND t.topic = b.topic) IS NULL THEN
        INSERT INTO dedup.outbox_topics (part, topic) VALUES (in_part, b.topic);
    END IF;
    -- (its id is above every one of its topic's: outbox_batch_new_id())
    b.low_id := dedup.outbox_batch_write(in_part, b, low_out);
    b.part := in_part;
    b.rev := 0;
    b.busy := true;
    RETURN b;
END
$$;
REVOKE ALL ON FUNCTION dedup.outbox_batch_insert(@extschema@.dedup_fingerprint, dedup.outbox_batches) FROM PUBLIC;

-- The topic of batch bid, out in partition in_part, if caller may relay
-- it; NULL if no batch of that id is handed out, or if the caller may not
-- relay its topic: the two are answered alike (a batch id is small and
-- easily guessed; a relay learns no topic it may not see), before anything
-- is written or locked.
CREATE OR REPLACE FUNCTION dedup.outbox_batch_topic(caller oid, in_part @extschema@.dedup_fingerprint, bid bigint)
RETURNS text
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    t text;
    busy boolean;
BEGIN
    IF NOT dedup.outbox_batch_valid(bid) THEN
        RETURN NULL;
    END IF;
    SELECT x.topic, x.busy INTO t, busy FROM dedup.outbox_batches AS x
    WHERE x.part OPERATOR(@extschema@.=) in_part AND x.id = bid
    ORDER BY x.rev DESC LIMIT 1;
    IF NOT FOUND OR NOT busy OR NOT dedup.has_privilege(caller, t, 'relay', false) THEN
        RETURN NULL;
    END IF;
    RETURN t;
END
$$;
REVOKE ALL ON FUNCTION dedup.outbox_batch_topic(oid, @extschema@.dedup_fingerprint, bigint) FROM PUBLIC;

-- The events of a batch, in order: from the log (its range, and the seqs
-- of extra, handed out from dedup.outbox_held) and from outbox_retry.
-- The batch's columns are passed one by one (a row of a Citus shard has
-- a type of its own).  Called on its own, not inside a statement that
-- reads a table of the outbox: on a Citus cluster such a statement runs on
-- a shard, where no other statement on a distributed table may run.
CREATE OR REPLACE FUNCTION dedup.outbox_members(in_part @extschema@.dedup_fingerprint, topic text, first_seq bigint,
    last_seq bigint, settled bigint[], attempt integer, retried integer, bid bigint,
    extra bigint[] DEFAULT '{}')
RETURNS TABLE (seq bigint, id uuid, aggregatetype text, aggregateid text, type text,
               payload jsonb, headers jsonb, attempts integer, created_at timestamptz,
               in_retry boolean)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN QUERY
    SELECT e.* FROM (
        SELECT o.seq, o.id, o.aggregatetype, o.aggregateid, o.type, o.payload, o.headers,
               outbox_members.attempt, o.created_at, false
        FROM dedup.outbox AS o
        WHERE outbox_members.first_seq IS NOT NULL
          AND o.part OPERATOR(@extschema@.=) outbox_members.in_part
          AND o.topic = outbox_members.topic
          AND o.seq BETWEEN outbox_members.first_seq AND outbox_members.last_seq
          AND o.seq <> ALL (outbox_members.settled)
        UNION ALL
        SELECT o.seq, o.id, o.aggregatetype, o.aggregateid, o.type, o.payload, o.headers,
               outbox_members.attempt, o.created_at, false
        FROM dedup.outbox AS o
        WHERE cardinality(outbox_members.extra) > 0
          AND o.part OPERATOR(@extschema@.=) outbox_members.in_part
          AND o.topic = outbox_members.topic
          AND o.seq = ANY (outbox_members.extra)
          AND o.seq <> ALL (outbox_members.settled)
        UNION ALL
        SELECT r.seq, r.id, r.aggregatetype, r.aggregateid, r.type, r.payload, r.headers,
               r.attempts, r.created_at, true
        FROM dedup.outbox_retry AS r
        WHERE outbox_members.retried > 0
          AND r.part OPERATOR(@extschema@.=) outbox_members.in_part
          AND r.batch = outbox_members.bid
    ) AS e
    ORDER BY e.seq;
END
$$;
REVOKE ALL ON FUNCTION dedup.outbox_members(@extschema@.dedup_fingerprint, text, bigint, bigint, bigint[], integer,
    integer, bigint, bigint[]) FROM PUBLIC;

-- A batch's count, retried and aggregates, from its events (b's columns).
CREATE OR REPLACE FUNCTION dedup.outbox_batch_count(in_part @extschema@.dedup_fingerprint, b dedup.outbox_batches,
    OUT n integer, OUT r integer, OUT a integer[])
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    SELECT count(*), count(*) FILTER (WHERE m.in_retry),
           coalesce(array_agg(DISTINCT pg_catalog.hashtext(m.aggregateid)), '{}')
    INTO n, r, a
    FROM dedup.outbox_members(in_part, b.topic, b.first_seq, b.last_seq, b.settled,
                              b.attempt, b.retried, b.id, b.extra) AS m;
END
$$;
REVOKE ALL ON FUNCTION dedup.outbox_batch_count(@extschema@.dedup_fingerprint, dedup.outbox_batches) FROM PUBLIC;

-- After events left a batch (b, its newest row with its settled changed):
-- its count, aggregates and retried recounted, appended as its next rev;
-- a batch left with none is out no more.
CREATE OR REPLACE FUNCTION dedup.outbox_batch_recount(in_part @extschema@.dedup_fingerprint, b dedup.outbox_batches)
RETURNS dedup.outbox_batches
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    c record;
BEGIN
    c := dedup.outbox_batch_count(in_part, b);
    b.events := c.n;
    b.retried := c.r;
    b.aggregates := c.a;
    b.busy := c.n > 0;
    RETURN dedup.outbox_batch_append(in_part, b);
END
$$;
REVOKE ALL ON FUNCTION dedup.outbox_batch_recount(@extschema@.dedup_fingerprint, dedup.outbox_batches) FROM PUBLIC;

-- for_lease: the batch's lease, NULL for the topic's.
CREATE OR REPLACE FUNCTION dedup.outbox_take_batch(caller oid, in_part @extschema@.dedup_fingerprint, topic text,
    batch_size integer, for_lease interval DEFAULT NULL, one_per_aggregate boolean DEFAULT false)
RETURNS TABLE (batch_id bigint, id uuid, aggregatetype text, aggregateid text, type text,
               payload jsonb, headers jsonb, attempts integer, created_at timestamptz,
               lease_expires_at timestamptz, seq bigint)
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    -- "now" for leases passed and retries due: the clock as this call
    -- starts, not the statement's start, so that each poll of a take that
    -- waits sees what fell due meanwhile
    take_now timestamptz := pg_catalog.clock_timestamp();
    lease interval;
    max_attempts integer;
    pos bigint;
    new_pos bigint;
    b dedup.outbox_batches;
    cnt record;
    bid bigint;
    new_bid bigint;
    blocked integer[];
    has_retry boolean;
    has_due boolean;
    has_held boolean;
    has_log boolean;
    positioned boolean;
    r_ids uuid[] := '{}';
    r_aggs integer[] := '{}';
    x_seqs bigint[] := '{}';
    x_aggs integer[] := '{}';
    c_lo bigint;
    c_hi bigint;
    c_held bigint[] := '{}';
    c_n integer := 0;
    c_aggs integer[] := '{}';
    room integer;
    scan_limit integer;
    scan_seqs bigint[];
    scan_aggs text[];
    scan_hashes integer[];
    dying uuid[];
    stable bigint;
    lease_end timestamptz;
    n bigint;
    m_id uuid[];
    m_seq bigint[];
    m_agg text[];
    m_retried boolean[];
    rest_ids uuid[];
    rest_seqs bigint[];
BEGIN
    IF topic IS NULL OR batch_size IS NULL THEN
        RAISE EXCEPTION 'topic and batch_size must not be null' USING ERRCODE = '22004';
    END IF;
    IF batch_size < 1 OR batch_size > dedup.outbox_max_batch_size() THEN
        RAISE EXCEPTION 'batch_size must be between 1 and %', dedup.outbox_max_batch_size()
            USING ERRCODE = '22023';
    END IF;
    PERFORM dedup.has_privilege(caller, topic, 'relay', true);
    SELECT coalesce(for_lease, s.lease), s.max_attempts INTO lease, max_attempts
    FROM @extschema@.dedup_scope(topic) AS s;

    -- the topic's relays take one at a time (its relay lock, until the
    -- transaction ends); each statement after sees what the take before did,
    -- and every put of the topic that was in progress as the take began
    PERFORM dedup.outbox_lock_relay(in_part, topic);
    PERFORM dedup.outbox_wait_puts(topic);
    pos := (dedup.outbox_position(in_part, topic)).next_seq;
    -- a topic gets its position once a take reads its log (below)
    positioned := pos IS NOT NULL;
    IF NOT positioned THEN
        pos := 0;
    END IF;
    -- a lease runs from the hand-out, after any wait (set again below after
    -- waiting for the topic's puts)
    lease_end := pg_catalog.clock_timestamp() + lease;

    -- a batch whose lease passed goes out again first, whole, but for the
    -- events handed out max_attempts times, which go dead, and for those
    -- this take's own rules leave for later takes (below)
    -- (one that an ack, nack, heartbeat or other take holds is left to it:
    -- until it commits the batch stays busy and holds its aggregates, and if
    -- it rolls back a later take hands the batch out; a take that waited
    -- for it deadlocked on a Citus cluster with an ack that had gone
    -- through the partitions in another order)
    FOR b IN SELECT * FROM dedup.outbox_batches_out(in_part, topic) AS x
             WHERE x.lease_until <= take_now
             ORDER BY x.lease_until
    LOOP
        SELECT * INTO b
        FROM dedup.outbox_batch(in_part, b.id, true) AS x
        WHERE x.lease_until <= take_now;
        CONTINUE WHEN NOT FOUND;
        bid := b.id;
        dying := ARRAY(SELECT r.id FROM dedup.outbox_retry AS r
                       WHERE b.retried > 0 AND r.part OPERATOR(@extschema@.=) in_part AND r.batch = bid
                         AND r.attempts >= max_attempts);
        IF b.attempt >= max_attempts THEN
            PERFORM dedup.outbox_bury(in_part, b.topic,
                ARRAY(SELECT m.seq
                      FROM dedup.outbox_members(in_part, b.topic, b.first_seq, b.last_seq,
                                                b.settled, b.attempt, b.retried, bid, b.extra) AS m
                      WHERE NOT m.in_retry),
                b.attempt, dying, NULL);
            b.first_seq := NULL;
            b.last_seq := NULL;
            b.extra := '{}';
        ELSE
            PERFORM dedup.outbox_bury(in_part, b.topic, '{}', 0, dying, NULL);
        END IF;
        -- the take's own rules: at most batch_size events, and for the 1.0
        -- take the earliest of each aggregate alone (a 1.0 relay may
        -- publish a batch in any order); the batch keeps the first of its
        -- events these allow, in seq order, so that each aggregate's kept
        -- events come before its others.  The rest leave it for
        -- outbox_retry as a nack sends them back (outbox_settle), due at
        -- once, with the hand-outs they had (the one whose lease passed
        -- counts, as it does for the events handed out again): behind the
        -- kept events of their aggregate (the batch holds it), ahead of
        -- its later events (held behind them), handed out by the next
        -- takes in seq order.  (Read only when the batch may not fit:
        -- events counts it, aggregates holds each of its aggregates once.)
        rest_ids := '{}';
        rest_seqs := '{}';
        IF b.events > batch_size OR (one_per_aggregate AND cardinality(b.aggregates) < b.events) THEN
            SELECT coalesce(array_agg(m.id ORDER BY m.seq), '{}'),
                   coalesce(array_agg(m.seq ORDER BY m.seq), '{}'),
                   coalesce(array_agg(m.aggregateid ORDER BY m.seq), '{}'),
                   coalesce(array_agg(m.in_retry ORDER BY m.seq), '{}')
            INTO m_id, m_seq, m_agg, m_retried
            FROM dedup.outbox_members(in_part, b.topic, b.first_seq, b.last_seq, b.settled, b.attempt,
                                      b.retried, bid, b.extra) AS m;
            SELECT coalesce(array_agg(v.i) FILTER (WHERE v.rt), '{}'),
                   coalesce(array_agg(v.s) FILTER (WHERE NOT v.rt), '{}')
            INTO rest_ids, rest_seqs
            FROM (SELECT w.i, w.s, w.rt,
                         pg_catalog.count(*) FILTER (WHERE w.first) OVER (ORDER BY w.s) AS k, w.first
                  FROM (SELECT u.i, u.s, u.rt,
                               NOT one_per_aggregate
                               OR pg_catalog.row_number() OVER (PARTITION BY u.a ORDER BY u.s) = 1 AS first
                        FROM unnest(m_id, m_seq, m_agg, m_retried) AS u(i, s, a, rt)) AS w) AS v
            WHERE NOT v.first OR v.k > batch_size;
        END IF;
        IF cardinality(rest_ids) > 0 THEN
            UPDATE dedup.outbox_retry AS r SET batch = NULL
            WHERE r.part OPERATOR(@extschema@.=) in_part AND r.id = ANY (rest_ids);
        END IF;
        IF cardinality(rest_seqs) > 0 THEN
            INSERT INTO dedup.outbox_retry (part, seq, id, topic, aggregatetype, aggregateid, type,
                                            payload, headers, created_at, attempts, visible_at)
            SELECT in_part, o.seq, o.id, o.topic, o.aggregatetype, o.aggregateid, o.type, o.payload,
                   o.headers, o.created_at, b.attempt, take_now
            FROM unnest(rest_seqs) AS u(s)
            JOIN dedup.outbox AS o
              ON o.part OPERATOR(@extschema@.=) in_part AND o.topic = b.topic AND o.seq = u.s
            ON CONFLICT ON CONSTRAINT outbox_retry_pkey DO NOTHING;
            b.settled := b.settled || rest_seqs;
        END IF;
        -- under a new id: the relay that held it before acks or nacks it no more
        -- (above the topic's newest: outbox_batch_new_id(), src/outbox.c)
        new_bid := dedup.outbox_batch_new_id(in_part, (SELECT x.id FROM dedup.outbox_batches AS x
                                                       WHERE x.part OPERATOR(@extschema@.=) in_part AND x.topic = outbox_take_batch.topic
                                                       ORDER BY x.id DESC LIMIT 1));
        UPDATE dedup.outbox_retry AS r SET attempts = r.attempts + 1, batch = new_bid
        WHERE b.retried > 0 AND r.part OPERATOR(@extschema@.=) in_part AND r.batch = bid;
        -- the batch under its old id is out no more (a row appended), and
        -- what is left of it goes out under the new one, with the topic's
        -- position (this take moves it no further)
        b.busy := false;
        PERFORM dedup.outbox_batch_append(in_part, b);
        b.id := new_bid;
        b.attempt := b.attempt + 1;
        b.lease_until := lease_end;
        b.members := '{}';
        b.next_seq := pos;
        cnt := dedup.outbox_batch_count(in_part, b);
        CONTINUE WHEN cnt.n = 0;
        b.events := cnt.n;
        b.retried := cnt.r;
        b.aggregates := cnt.a;
        b := dedup.outbox_batch_insert(in_part, b);
        bid := b.id;
        RETURN QUERY SELECT bid, m.id, m.aggregatetype, m.aggregateid, m.type, m.payload,
                            m.headers, m.attempts, m.created_at, lease_end, m.seq
                     FROM dedup.outbox_members(in_part, b.topic, b.first_seq, b.last_seq,
                                               b.settled, b.attempt, b.retried, bid, b.extra) AS m;
        GET DIAGNOSTICS n = ROW_COUNT;
        PERFORM dedup.scope_count(topic, 'events_taken', n);
        RETURN;
    END LOOP;

    -- the aggregates busy batches hold, read before what waits in
    -- outbox_retry: a settle that frees a batch and sends events of it back
    -- commits both at once, so an aggregate read here as free has its
    -- events back in outbox_retry seen below
    blocked := dedup.outbox_aggregates_out(in_part, topic);

    -- nothing to hand out (no event of the topic in outbox_retry or held,
    -- none in the log past its position): nothing is written, no position,
    -- no batch
    -- (has_log from the position as outbox_take_state() reads it again:
    -- the lapsed batches handed out above do not move it)
    SELECT s.has_retry, s.has_held, s.has_log INTO has_retry, has_held, has_log
    FROM dedup.outbox_take_state(in_part, topic) AS s;
    IF NOT has_retry AND NOT has_held AND NOT has_log THEN
        RETURN;
    END IF;

    -- a new batch: its id from the counter is drawn when it is sure to
    -- have events (its row is inserted below), not by a poll that hands
    -- nothing out and writes nothing (a sequence's nextval writes now and
    -- then, and a waiting take whose poll wrote returns at once); 0 until
    -- then, an id no batch has
    bid := 0;
    -- events of outbox_retry due now (of an aggregate free or not): none,
    -- and step 1 has nothing to do (those not due still hold their
    -- aggregates back in steps 2 and 3: has_retry)
    has_due := has_retry
        AND (SELECT r.seq FROM dedup.outbox_retry AS r
             WHERE r.part OPERATOR(@extschema@.=) in_part AND r.topic = outbox_take_batch.topic
               AND r.batch IS NULL AND r.visible_at <= take_now
             ORDER BY r.seq LIMIT 1) IS NOT NULL;
    IF has_due THEN
        bid := dedup.outbox_batch_new_id(in_part, (SELECT x.id FROM dedup.outbox_batches AS x
                                          WHERE x.part OPERATOR(@extschema@.=) in_part AND x.topic = outbox_take_batch.topic
                                          ORDER BY x.id DESC LIMIT 1));
    END IF;

    -- 1. events of outbox_retry that are due, of an aggregate no batch
    -- holds, each with every earlier one of its aggregate there due too
    -- (the earliest of its aggregate alone, one_per_aggregate)
    -- (has_retry, has_held and has_log: outbox_take_state()'s look-ups,
    -- scalar subqueries with ORDER BY and LIMIT, not EXISTS, which the
    -- planner strips of them: a generic plan would read the whole table)
    IF has_due THEN
        dying := ARRAY(
            SELECT r.id FROM dedup.outbox_retry AS r
            WHERE r.part OPERATOR(@extschema@.=) in_part AND r.topic = outbox_take_batch.topic AND r.batch IS NULL
              AND r.visible_at <= take_now
              AND r.attempts >= max_attempts);
        PERFORM dedup.outbox_bury(in_part, topic, '{}', 0, dying, NULL);
        WITH due AS (
            SELECT r.id AS rid
            FROM dedup.outbox_retry AS r
            WHERE r.part OPERATOR(@extschema@.=) in_part AND r.topic = outbox_take_batch.topic AND r.batch IS NULL
              AND r.visible_at <= take_now
              AND pg_catalog.hashtext(r.aggregateid) <> ALL (blocked)
              AND NOT EXISTS (SELECT FROM dedup.outbox_retry AS e
                              WHERE e.part OPERATOR(@extschema@.=) in_part AND e.topic = r.topic
                                AND e.aggregateid = r.aggregateid AND e.seq < r.seq
                                AND (one_per_aggregate OR e.batch IS NOT NULL
                                     OR e.visible_at > take_now))
            ORDER BY r.seq
            LIMIT batch_size
            FOR UPDATE OF r SKIP LOCKED
        ), taken AS (
            UPDATE dedup.outbox_retry AS r SET batch = bid, attempts = r.attempts + 1
            FROM due WHERE r.part OPERATOR(@extschema@.=) in_part AND r.id = due.rid
            RETURNING r.id, r.seq, r.aggregateid
        )
        SELECT coalesce(array_agg(t.id ORDER BY t.seq), '{}'),
               coalesce(array_agg(DISTINCT pg_catalog.hashtext(t.aggregateid)), '{}')
        INTO r_ids, r_aggs
        FROM taken AS t;
    END IF;

    -- 2. events held back (outbox_held) of an aggregate now free (no batch
    -- holds it, none of it left in outbox_retry), read from the log by seq
    -- within the aggregate's range, in seq order; an aggregate's range
    -- moves past what went, its row goes with its last event
    room := batch_size - cardinality(r_ids);
    IF has_held AND room > 0 THEN
        WITH free AS (
            SELECT h.aggregateid, h.from_seq, h.upto_seq
            FROM dedup.outbox_held AS h
            WHERE h.part OPERATOR(@extschema@.=) in_part AND h.topic = outbox_take_batch.topic
              AND pg_catalog.hashtext(h.aggregateid) <> ALL (blocked)
              AND NOT (one_per_aggregate AND pg_catalog.hashtext(h.aggregateid) = ANY (r_aggs))
              AND NOT (has_retry AND EXISTS (SELECT FROM dedup.outbox_retry AS e
                                             WHERE e.part OPERATOR(@extschema@.=) in_part
                                               AND e.topic = h.topic AND e.aggregateid = h.aggregateid
                                               AND e.batch IS DISTINCT FROM bid))
            ORDER BY h.from_seq
            LIMIT room
        ), picked AS (
            SELECT p.seq, p.aggregateid
            FROM free AS f
            CROSS JOIN LATERAL (
                SELECT o.seq, o.aggregateid FROM dedup.outbox AS o
                WHERE o.part OPERATOR(@extschema@.=) in_part AND o.topic = outbox_take_batch.topic
                  AND o.seq BETWEEN f.from_seq AND f.upto_seq AND o.aggregateid = f.aggregateid
                ORDER BY o.seq
                LIMIT CASE WHEN one_per_aggregate THEN 1 ELSE room END) AS p
            ORDER BY p.seq
            LIMIT room
        ), last AS (
            SELECT p.aggregateid, max(p.seq) AS seq FROM picked AS p GROUP BY p.aggregateid
        ), gone AS (
            DELETE FROM dedup.outbox_held AS h USING last AS l
            WHERE h.part OPERATOR(@extschema@.=) in_part AND h.topic = outbox_take_batch.topic
              AND h.aggregateid = l.aggregateid AND l.seq >= h.upto_seq
        ), moved AS (
            UPDATE dedup.outbox_held AS h SET from_seq = l.seq + 1
            FROM last AS l
            WHERE h.part OPERATOR(@extschema@.=) in_part AND h.topic = outbox_take_batch.topic
              AND h.aggregateid = l.aggregateid AND l.seq < h.upto_seq
        )
        SELECT coalesce(array_agg(p.seq ORDER BY p.seq), '{}'),
               coalesce(array_agg(DISTINCT pg_catalog.hashtext(p.aggregateid)), '{}')
        INTO x_seqs, x_aggs
        FROM picked AS p;
    END IF;

    -- 3. the log from the topic's position up to where every put settled:
    -- an event of an aggregate a batch holds, or with an earlier event
    -- still in outbox_retry or held (or, one_per_aggregate, the second of
    -- one in this batch) is held back, its aggregate's row of outbox_held
    -- stretched over it; the others go in the batch, several of one
    -- aggregate in seq order.  Held events take no room in the batch: the
    -- scan goes on until the batch is full, reading at most ten times its
    -- room (dedup.outbox_scan_limit()), and the position moves past what it read
    -- (written below: into the batch's row, or, with no batch, into
    -- outbox_topics, outbox_topic_move()).  The range is read as the fast
    -- take reads it, by dedup.outbox_log_scan().
    room := batch_size - cardinality(r_ids) - cardinality(x_seqs);
    IF room > 0 AND has_log THEN
        IF NOT positioned THEN
            INSERT INTO dedup.outbox_topics (part, topic) VALUES (in_part, outbox_take_batch.topic);
        END IF;
        stable := dedup.outbox_stable_seq(in_part, topic);
        lease_end := pg_catalog.clock_timestamp() + lease;
        scan_limit := dedup.outbox_scan_limit(batch_size, room);
        SELECT l.seqs, l.aggregateids, l.hashes INTO scan_seqs, scan_aggs, scan_hashes
        FROM dedup.outbox_log_scan(in_part, topic, pos, stable, scan_limit) AS l;
        WITH scanned AS (
            SELECT s.seq, s.aggregateid, s.h
            FROM unnest(scan_seqs, scan_aggs, scan_hashes) AS s(seq, aggregateid, h)
        ), judged AS (
            SELECT s.*,
                   (s.h = ANY (blocked)
                    OR (one_per_aggregate
                        AND (s.h = ANY (r_aggs) OR s.h = ANY (x_aggs)
                             OR pg_catalog.row_number() OVER (PARTITION BY s.aggregateid ORDER BY s.seq) > 1))
                    OR (has_retry AND EXISTS (SELECT FROM dedup.outbox_retry AS r
                                              WHERE r.part OPERATOR(@extschema@.=) in_part
                                                AND r.topic = outbox_take_batch.topic
                                                AND r.aggregateid = s.aggregateid
                                                AND r.batch IS DISTINCT FROM bid))
                    OR (has_held AND EXISTS (SELECT FROM dedup.outbox_held AS x
                                             WHERE x.part OPERATOR(@extschema@.=) in_part
                                               AND x.topic = outbox_take_batch.topic
                                               AND x.aggregateid = s.aggregateid))) AS held
            FROM scanned AS s
        ), counted AS (
            SELECT j.*, count(*) FILTER (WHERE NOT j.held) OVER (ORDER BY j.seq) AS k
            FROM judged AS j
        ), kept AS (
            SELECT c.* FROM counted AS c WHERE c.k < room OR (c.k = room AND NOT c.held)
        ), holding AS (
            INSERT INTO dedup.outbox_held AS x (part, topic, aggregateid, from_seq, upto_seq)
            SELECT in_part, outbox_take_batch.topic, k.aggregateid, min(k.seq), max(k.seq)
            FROM kept AS k WHERE k.held GROUP BY k.aggregateid
            ON CONFLICT ON CONSTRAINT outbox_held_pkey
            DO UPDATE SET upto_seq = greatest(x.upto_seq, excluded.upto_seq)
        )
        SELECT min(k.seq) FILTER (WHERE NOT k.held), max(k.seq) FILTER (WHERE NOT k.held),
               coalesce(array_agg(k.seq ORDER BY k.seq) FILTER (WHERE k.held), '{}'),
               count(*) FILTER (WHERE NOT k.held),
               coalesce(array_agg(DISTINCT k.h) FILTER (WHERE NOT k.held), '{}'),
               dedup.outbox_next_position(pos, stable, cardinality(scan_seqs), count(*),
                                          scan_limit, coalesce(max(k.seq), pos - 1))
        INTO c_lo, c_hi, c_held, c_n, c_aggs, new_pos
        FROM kept AS k;
        -- the held events within the batch's range are not of it
        c_held := ARRAY(SELECT s FROM unnest(c_held) AS s WHERE s > c_lo AND s < c_hi);
    END IF;

    n := cardinality(r_ids) + cardinality(x_seqs) + c_n;
    IF n > 0 THEN
        IF bid = 0 THEN
            bid := dedup.outbox_batch_new_id(in_part, (SELECT x.id FROM dedup.outbox_batches AS x
                                          WHERE x.part OPERATOR(@extschema@.=) in_part AND x.topic = outbox_take_batch.topic
                                          ORDER BY x.id DESC LIMIT 1));
        END IF;
        b := NULL;
        b.topic := outbox_take_batch.topic;
        b.id := bid;
        b.attempt := 1;
        b.lease_until := lease_end;
        b.first_seq := c_lo;
        b.last_seq := c_hi;
        b.settled := c_held;
        b.extra := x_seqs;
        b.retried := cardinality(r_ids);
        b.events := n;
        b.aggregates := ARRAY(SELECT DISTINCT a FROM unnest(r_aggs || x_aggs || c_aggs) AS a);
        b.members := '{}';
        b.next_seq := coalesce(new_pos, pos);
        PERFORM dedup.outbox_batch_insert(in_part, b);
        RETURN QUERY
        SELECT bid, m.id, m.aggregatetype, m.aggregateid, m.type, m.payload, m.headers,
               m.attempts, m.created_at, lease_end, m.seq
        FROM dedup.outbox_members(in_part, outbox_take_batch.topic, c_lo, c_hi, c_held, 1,
                                  cardinality(r_ids), bid, x_seqs) AS m;
    ELSIF new_pos IS NOT NULL THEN
        -- no batch: the position, where it moved past held events alone
        PERFORM dedup.outbox_topic_move(in_part, topic, pos, new_pos);
    END IF;
    PERFORM dedup.scope_count(topic, 'events_taken', n);
END
$$;

-- The 1.0 shape of take: the same batch, without its id or seqs, and with
-- at most one event of an aggregate, as 1.0 handed them out (a 1.0 relay
-- may publish a batch's events in any order).
CREATE OR REPLACE FUNCTION dedup.outbox_take(caller oid, in_part @extschema@.dedup_fingerprint, topic text, batch_size integer)
RETURNS TABLE (id uuid, aggregatetype text, aggregateid text, type text, payload jsonb,
               headers jsonb, attempts integer, created_at timestamptz,
               lease_expires_at timestamptz)
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT t.id, t.aggregatetype, t.aggregateid, t.type, t.payload, t.headers, t.attempts,
           t.created_at, t.lease_expires_at
    FROM dedup.outbox_take_batch(caller, in_part, topic, batch_size, NULL, true) AS t
$$;
