-------------------------------------------------------------------------
-- Transactional outbox
-------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION @extschema@.dedup_outbox_put(topic text, key text, payload jsonb,
    aggregate_id text DEFAULT NULL, type text DEFAULT NULL,
    headers jsonb DEFAULT NULL, aggregate_type text DEFAULT NULL)
RETURNS uuid
AS 'MODULE_PATHNAME' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.dedup_outbox_put(text, text, jsonb, text, text, jsonb, text) IS
    'enqueue an event in the current transaction; the same (topic, key) within the topic''s retention yields one event; returns its id';

-- The relay, on batches (PgQ's and Kafka's design, with per-aggregate order).
--
-- The log (dedup.outbox) is appended by puts and never updated.  A topic's
-- relays read it in seq order from the topic's position (outbox_topics),
-- and a take hands out the next events as one batch (outbox_batches): one
-- row for the batch, none per event.  Acking the batch deletes that row;
-- the events stay in the log until the cleanup deletes what every relay
-- has passed.  Only events that need a state of their own get a row in
-- outbox_retry: one nacked (until its retry_delay, with the later events of
-- its aggregate in its batch), one redriven.
--
-- Commit order.  A put takes its seq under a lock of its topic held until
-- it commits (outbox.c); a take reads the sequence, then waits for the
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
-- it before can no longer ack or nack it by that id.  An event handed out max_attempts times and not acked goes dead;
-- so does one nacked at its max_attempts.  Relays of one topic take one
-- after another in a partition (the relay lock of the topic there, held
-- for the take's transaction); they publish and ack in parallel.
--
-- A take needs a snapshot of its own for each statement: it refuses to run
-- in a REPEATABLE READ or SERIALIZABLE transaction (0A000).
--
-- Partitions (sql/tables/outbox.sql).  Each function below works in one
-- partition of the outbox, in_part, which the relay's public functions
-- (outbox.c) pass: the partition of a topic's log a take reads, that of a
-- batch's id (its number is in the id), those of the events of ids.
-- Every statement names it, so that on a Citus cluster each runs on the
-- partition's shards alone.  Positions, slots, batches, retries and dead
-- letters are a partition's; per-aggregate order is kept within one,
-- which holds every event of an aggregate.

-- The highest seq below which every put of topic has settled: waits for
-- the puts of the topic in progress (never for the caller's own).
CREATE OR REPLACE FUNCTION dedup.outbox_stable_seq(in_part @extschema@.dedup_fingerprint, topic text)
RETURNS bigint
AS 'MODULE_PATHNAME', 'dedup_outbox_stable_seq' LANGUAGE C STRICT VOLATILE;
REVOKE ALL ON FUNCTION dedup.outbox_stable_seq(@extschema@.dedup_fingerprint, text) FROM PUBLIC;

-- The relay lock of a topic in a partition, held until the transaction
-- ends: the takes of a topic in a partition go one after another.
CREATE OR REPLACE FUNCTION dedup.outbox_lock_relay(in_part @extschema@.dedup_fingerprint, topic text) RETURNS void
AS 'MODULE_PATHNAME', 'dedup_outbox_lock_relay' LANGUAGE C STRICT VOLATILE;
REVOKE ALL ON FUNCTION dedup.outbox_lock_relay(@extschema@.dedup_fingerprint, text) FROM PUBLIC;

-- The lock of a slot number in a partition, until the transaction ends, if
-- no other transaction holds it (true), or false at once: a take inserts a
-- new slot under its number's lock, so it never waits for another's insert.
CREATE OR REPLACE FUNCTION dedup.outbox_lock_slot(in_part @extschema@.dedup_fingerprint, slot integer) RETURNS boolean
AS 'MODULE_PATHNAME', 'dedup_outbox_lock_slot' LANGUAGE C STRICT VOLATILE;
REVOKE ALL ON FUNCTION dedup.outbox_lock_slot(@extschema@.dedup_fingerprint, integer) FROM PUBLIC;

-- Move events to the dead letters: from the log (by seq) or from
-- outbox_retry (by id), with their attempts and last error.
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
        SELECT o.part, o.seq, o.id, o.topic, o.aggregatetype, o.aggregateid, o.type,
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
        SELECT g.part, g.seq, g.id, g.topic, g.aggregatetype, g.aggregateid, g.type,
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

-- A batch's id: its partition's number times 2^47, plus its slot's number
-- times 2^31, plus the slot's generation.
CREATE OR REPLACE FUNCTION dedup.outbox_batch_id(in_part @extschema@.dedup_fingerprint, slot integer, generation integer)
RETURNS bigint
AS 'MODULE_PATHNAME', 'dedup_outbox_batch_id' LANGUAGE C IMMUTABLE STRICT;
REVOKE ALL ON FUNCTION dedup.outbox_batch_id(@extschema@.dedup_fingerprint, integer, integer) FROM PUBLIC;

-- The busy slot of partition in_part that holds batch bid, locked, or no row.
-- (These two are PL/pgSQL, not SQL: Citus plans no statement of a SQL
-- function that has parameters.)
CREATE OR REPLACE FUNCTION dedup.outbox_batch(in_part @extschema@.dedup_fingerprint, bid bigint)
RETURNS SETOF dedup.outbox_batches
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN QUERY
    SELECT * FROM dedup.outbox_batches AS x
    WHERE x.part OPERATOR(@extschema@.=) in_part
      AND x.slot = bid / 2147483648 % 65536 AND x.generation = bid % 2147483648
      AND dedup.outbox_batch_id(x.part, x.slot, x.generation) = bid AND x.busy
    FOR UPDATE;
END
$$;
REVOKE ALL ON FUNCTION dedup.outbox_batch(@extschema@.dedup_fingerprint, bigint) FROM PUBLIC;

-- The topic of batch bid, busy in partition in_part, if caller may relay
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
BEGIN
    SELECT x.topic INTO t FROM dedup.outbox_batches AS x
    WHERE x.part OPERATOR(@extschema@.=) in_part
      AND x.slot = bid / 2147483648 % 65536 AND x.generation = bid % 2147483648
      AND dedup.outbox_batch_id(x.part, x.slot, x.generation) = bid AND x.busy;
    IF NOT FOUND OR NOT dedup.has_privilege(caller, t, 'relay', false) THEN
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

-- After events left a batch: its count, aggregates and retried recounted;
-- a batch left with none frees its slot.
CREATE OR REPLACE FUNCTION dedup.outbox_batch_recount(in_part @extschema@.dedup_fingerprint, slot_of integer)
RETURNS dedup.outbox_batches
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    b dedup.outbox_batches;
    n integer;
    r integer;
    a integer[];
BEGIN
    SELECT * INTO b FROM dedup.outbox_batches AS x
    WHERE x.part OPERATOR(@extschema@.=) in_part AND x.slot = slot_of;
    SELECT count(*), count(*) FILTER (WHERE m.in_retry),
           coalesce(array_agg(DISTINCT pg_catalog.hashtext(m.aggregateid)), '{}')
    INTO n, r, a
    FROM dedup.outbox_members(b.part, b.topic, b.first_seq, b.last_seq, b.settled,
                              b.attempt, b.retried,
                              dedup.outbox_batch_id(b.part, b.slot, b.generation), b.extra) AS m;
    UPDATE dedup.outbox_batches AS x
    SET events = n, retried = r, aggregates = a, busy = n > 0
    WHERE x.part OPERATOR(@extschema@.=) in_part AND x.slot = slot_of
    RETURNING x.* INTO b;
    RETURN b;
END
$$;
REVOKE ALL ON FUNCTION dedup.outbox_batch_recount(@extschema@.dedup_fingerprint, integer) FROM PUBLIC;

CREATE OR REPLACE FUNCTION dedup.outbox_take_batch(caller oid, in_part @extschema@.dedup_fingerprint, topic text,
    batch_size integer, one_per_aggregate boolean DEFAULT false)
RETURNS TABLE (batch_id bigint, id uuid, aggregatetype text, aggregateid text, type text,
               payload jsonb, headers jsonb, attempts integer, created_at timestamptz,
               lease_expires_at timestamptz, seq bigint)
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    lease interval;
    max_attempts integer;
    pos bigint;
    b dedup.outbox_batches;
    k integer;
    bid bigint;
    blocked integer[];
    has_retry boolean;
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
    dying uuid[];
    stable bigint;
    lease_end timestamptz;
    n bigint;
BEGIN
    IF topic IS NULL OR batch_size IS NULL THEN
        RAISE EXCEPTION 'topic and batch_size must not be null' USING ERRCODE = '22004';
    END IF;
    IF batch_size < 1 OR batch_size > 10000 THEN
        RAISE EXCEPTION 'batch_size must be between 1 and 10000' USING ERRCODE = '22023';
    END IF;
    PERFORM dedup.has_privilege(caller, topic, 'relay', true);
    SELECT s.lease, s.max_attempts INTO lease, max_attempts
    FROM @extschema@.dedup_scope(topic) AS s;

    -- the topic's relays take one at a time (its relay lock, until the
    -- transaction ends); each statement after sees what the take before did
    PERFORM dedup.outbox_lock_relay(in_part, topic);
    SELECT t.next_seq INTO pos FROM dedup.outbox_topics AS t
    WHERE t.part OPERATOR(@extschema@.=) in_part AND t.topic = outbox_take_batch.topic;
    -- a topic gets its position once a take reads its log (below)
    positioned := FOUND;
    IF NOT positioned THEN
        pos := 0;
    END IF;
    -- a lease runs from the hand-out, after any wait (set again below after
    -- waiting for the topic's puts)
    lease_end := pg_catalog.clock_timestamp() + lease;

    -- a batch whose lease passed goes out again first, whole, but for the
    -- events handed out max_attempts times, which go dead
    FOR b IN SELECT * FROM dedup.outbox_batches AS x
             WHERE x.part OPERATOR(@extschema@.=) in_part AND x.topic = outbox_take_batch.topic
               AND x.busy AND x.lease_until <= pg_catalog.statement_timestamp()
             ORDER BY x.lease_until
    LOOP
        SELECT * INTO b
        FROM dedup.outbox_batch(in_part, dedup.outbox_batch_id(in_part, b.slot, b.generation)) AS x
        WHERE x.lease_until <= pg_catalog.statement_timestamp();
        CONTINUE WHEN NOT FOUND;
        bid := dedup.outbox_batch_id(in_part, b.slot, b.generation);
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
            UPDATE dedup.outbox_batches AS x SET first_seq = NULL, last_seq = NULL, extra = '{}'
            WHERE x.part OPERATOR(@extschema@.=) in_part AND x.slot = b.slot;
        ELSE
            PERFORM dedup.outbox_bury(in_part, b.topic, '{}', 0, dying, NULL);
        END IF;
        -- under a new id: the relay that held it before acks or nacks it no more
        UPDATE dedup.outbox_retry AS r SET attempts = r.attempts + 1,
               batch = dedup.outbox_batch_id(in_part, b.slot, b.generation % 2147483647 + 1)
        WHERE b.retried > 0 AND r.part OPERATOR(@extschema@.=) in_part AND r.batch = bid;
        UPDATE dedup.outbox_batches AS x
        SET attempt = x.attempt + 1, lease_until = lease_end,
            generation = b.generation % 2147483647 + 1
        WHERE x.part OPERATOR(@extschema@.=) in_part AND x.slot = b.slot;
        b := dedup.outbox_batch_recount(in_part, b.slot);
        CONTINUE WHEN NOT b.busy;
        bid := dedup.outbox_batch_id(in_part, b.slot, b.generation);
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
    blocked := ARRAY(SELECT DISTINCT a FROM dedup.outbox_batches AS x, unnest(x.aggregates) AS a
                     WHERE x.part OPERATOR(@extschema@.=) in_part AND x.topic = outbox_take_batch.topic AND x.busy);

    -- nothing to hand out (no event of the topic in outbox_retry or held,
    -- none in the log past its position): nothing is written, no position,
    -- no slot
    has_retry := (SELECT r.seq FROM dedup.outbox_retry AS r
                  WHERE r.part OPERATOR(@extschema@.=) in_part AND r.topic = outbox_take_batch.topic
                  ORDER BY r.seq LIMIT 1) IS NOT NULL;
    has_held := (SELECT h.from_seq FROM dedup.outbox_held AS h
                 WHERE h.part OPERATOR(@extschema@.=) in_part AND h.topic = outbox_take_batch.topic
                 ORDER BY h.aggregateid LIMIT 1) IS NOT NULL;
    has_log := (SELECT o.seq FROM dedup.outbox AS o
                WHERE o.part OPERATOR(@extschema@.=) in_part AND o.topic = outbox_take_batch.topic
                  AND o.seq >= pos
                ORDER BY o.seq LIMIT 1) IS NOT NULL;
    IF NOT has_retry AND NOT has_held AND NOT has_log THEN
        RETURN;
    END IF;

    -- a new batch, in a free slot (locked: it stays free until the batch
    -- is written in it; one another take has locked is passed, never
    -- waited for): the topic's own first, else any of the partition's,
    -- whatever topic it served (its generation goes on: no id handed out
    -- before names the new batch), else a new one: the first number past
    -- the partition's last slot that no other take is inserting (each
    -- inserts under its number's lock) and none inserted meanwhile.  So
    -- a partition has no more slots than batches handed out at once.
    SELECT * INTO b FROM dedup.outbox_batches AS x
    WHERE x.part OPERATOR(@extschema@.=) in_part AND x.topic = outbox_take_batch.topic AND NOT x.busy
    ORDER BY x.slot LIMIT 1
    FOR UPDATE SKIP LOCKED;
    IF NOT FOUND THEN
        SELECT * INTO b FROM dedup.outbox_batches AS x
        WHERE x.part OPERATOR(@extschema@.=) in_part AND NOT x.busy
        ORDER BY x.slot LIMIT 1
        FOR UPDATE SKIP LOCKED;
    END IF;
    IF NOT FOUND THEN
        k := (SELECT coalesce(max(y.slot), 0) + 1 FROM dedup.outbox_batches AS y
              WHERE y.part OPERATOR(@extschema@.=) in_part);
        LOOP
            IF k >= 65536 THEN
                RAISE EXCEPTION 'an outbox partition has no room for another batch'
                    USING ERRCODE = '54000',
                          DETAIL = '65535 batches of its topics are handed out and not acked.',
                          HINT = 'Ack or nack batches before taking more.';
            END IF;
            IF dedup.outbox_lock_slot(in_part, k) THEN
                INSERT INTO dedup.outbox_batches AS x (part, slot, topic)
                VALUES (in_part, k, outbox_take_batch.topic)
                ON CONFLICT DO NOTHING
                RETURNING x.* INTO b;
                EXIT WHEN FOUND;
            END IF;
            k := k + 1;
        END LOOP;
    END IF;
    bid := dedup.outbox_batch_id(in_part, b.slot, b.generation % 2147483647 + 1);

    -- 1. events of outbox_retry that are due, of an aggregate no batch
    -- holds, each with every earlier one of its aggregate there due too
    -- (the earliest of its aggregate alone, one_per_aggregate)
    -- (has_retry, has_held and has_log above are scalar subqueries with
    -- ORDER BY and LIMIT, not EXISTS, which the planner strips of them: a
    -- generic plan would read the whole table)
    IF has_retry THEN
        dying := ARRAY(
            SELECT r.id FROM dedup.outbox_retry AS r
            WHERE r.part OPERATOR(@extschema@.=) in_part AND r.topic = outbox_take_batch.topic AND r.batch IS NULL
              AND r.visible_at <= pg_catalog.statement_timestamp()
              AND r.attempts >= max_attempts);
        PERFORM dedup.outbox_bury(in_part, topic, '{}', 0, dying, NULL);
        WITH due AS (
            SELECT r.id AS rid
            FROM dedup.outbox_retry AS r
            WHERE r.part OPERATOR(@extschema@.=) in_part AND r.topic = outbox_take_batch.topic AND r.batch IS NULL
              AND r.visible_at <= pg_catalog.statement_timestamp()
              AND pg_catalog.hashtext(r.aggregateid) <> ALL (blocked)
              AND NOT EXISTS (SELECT FROM dedup.outbox_retry AS e
                              WHERE e.part OPERATOR(@extschema@.=) in_part AND e.topic = r.topic
                                AND e.aggregateid = r.aggregateid AND e.seq < r.seq
                                AND (one_per_aggregate OR e.batch IS NOT NULL
                                     OR e.visible_at > pg_catalog.statement_timestamp()))
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
    -- room (up to 10,000), and the position moves past what it read.
    room := batch_size - cardinality(r_ids) - cardinality(x_seqs);
    IF room > 0 AND has_log THEN
        IF NOT positioned THEN
            INSERT INTO dedup.outbox_topics (part, topic) VALUES (in_part, outbox_take_batch.topic);
        END IF;
        stable := dedup.outbox_stable_seq(in_part, topic);
        lease_end := pg_catalog.clock_timestamp() + lease;
        scan_limit := least(10000, greatest(batch_size, room * 10));
        WITH scanned AS (
            SELECT o.seq, o.aggregateid, pg_catalog.hashtext(o.aggregateid) AS h
            FROM dedup.outbox AS o
            WHERE o.part OPERATOR(@extschema@.=) in_part AND o.topic = outbox_take_batch.topic
              AND o.seq >= pos AND o.seq <= stable
            ORDER BY o.seq
            LIMIT scan_limit
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
        ), moved AS (
            UPDATE dedup.outbox_topics AS t
            SET next_seq = (SELECT CASE WHEN count(*) = (SELECT count(*) FROM scanned)
                                             AND count(*) < scan_limit
                                        THEN greatest(pos, stable + 1)
                                        ELSE max(k.seq) + 1 END
                            FROM kept AS k)
            WHERE t.part OPERATOR(@extschema@.=) in_part AND t.topic = outbox_take_batch.topic
        )
        SELECT min(k.seq) FILTER (WHERE NOT k.held), max(k.seq) FILTER (WHERE NOT k.held),
               coalesce(array_agg(k.seq ORDER BY k.seq) FILTER (WHERE k.held), '{}'),
               count(*) FILTER (WHERE NOT k.held),
               coalesce(array_agg(DISTINCT k.h) FILTER (WHERE NOT k.held), '{}')
        INTO c_lo, c_hi, c_held, c_n, c_aggs
        FROM kept AS k;
        -- the held events within the batch's range are not of it
        c_held := ARRAY(SELECT s FROM unnest(c_held) AS s WHERE s > c_lo AND s < c_hi);
    END IF;

    n := cardinality(r_ids) + cardinality(x_seqs) + c_n;
    IF n > 0 THEN
        UPDATE dedup.outbox_batches AS x
        SET topic = outbox_take_batch.topic,
            generation = b.generation % 2147483647 + 1, busy = true, attempt = 1,
            lease_until = lease_end, first_seq = c_lo, last_seq = c_hi, settled = c_held,
            extra = x_seqs, retried = cardinality(r_ids), events = n,
            aggregates = ARRAY(SELECT DISTINCT a FROM unnest(r_aggs || x_aggs || c_aggs) AS a)
        WHERE x.part OPERATOR(@extschema@.=) in_part AND x.slot = b.slot;
        RETURN QUERY
        SELECT bid, m.id, m.aggregatetype, m.aggregateid, m.type, m.payload, m.headers,
               m.attempts, m.created_at, lease_end, m.seq
        FROM dedup.outbox_members(in_part, outbox_take_batch.topic, c_lo, c_hi, c_held, 1,
                                  cardinality(r_ids), bid, x_seqs) AS m;
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
    FROM dedup.outbox_take_batch(caller, in_part, topic, batch_size, true) AS t
$$;

-- Settle events of one batch: those of done (NULL: all but the failed)
-- were published and never come back; those of failed were not, and come
-- back after retry_delay, or go dead at max_attempts; so do the later
-- events of a failed one's aggregate in the batch, whatever they were
-- named (they go back together, in order, not counting this hand-out as
-- an attempt of theirs); the batch keeps the others.  With given_ids, an
-- event acts only if named there, at the attempt given_attempts names
-- (NULL: any), as the 1.0 ack and nack do.  Returns what was acked, what
-- went back (failed or behind a failed one), and the batch's topic (NULL
-- when no batch of that id is handed out, or the caller may not relay its
-- topic: nothing is done then, and nothing named).
CREATE OR REPLACE FUNCTION dedup.outbox_settle(caller oid, in_part @extschema@.dedup_fingerprint, bid bigint, done uuid[],
    failed uuid[], given_ids uuid[], given_attempts integer[], retry_delay interval, error text,
    OUT acked uuid[], OUT nacked uuid[], OUT topic text)
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    b dedup.outbox_batches;
    max_attempts integer;
    visible timestamptz;
    m_id uuid[];
    m_seq bigint[];
    m_attempt integer[];
    m_retried boolean[];
    m_verdict "char"[];
BEGIN
    acked := '{}';
    nacked := '{}';
    topic := dedup.outbox_batch_topic(caller, in_part, bid);
    IF topic IS NULL THEN
        RETURN;
    END IF;
    SELECT * INTO b FROM dedup.outbox_batch(in_part, bid);
    IF NOT FOUND OR b.topic <> topic THEN
        topic := NULL;
        RETURN;
    END IF;
    SELECT s.max_attempts INTO max_attempts FROM @extschema@.dedup_scope(b.topic) AS s;
    visible := pg_catalog.statement_timestamp() + retry_delay;
    -- the batch's events, and the verdict on each: 'a' acked, 'f' failed,
    -- 'b' back behind a failed one of its aggregate, 'k' kept in the batch
    SELECT array_agg(v.id ORDER BY v.seq), array_agg(v.seq ORDER BY v.seq),
           array_agg(v.attempts ORDER BY v.seq), array_agg(v.in_retry ORDER BY v.seq),
           array_agg(CASE WHEN v.verdict <> 'f' AND v.behind THEN 'b' ELSE v.verdict END::"char"
                     ORDER BY v.seq)
    INTO m_id, m_seq, m_attempt, m_retried, m_verdict
    FROM (SELECT w.*,
                 bool_or(w.verdict = 'f') OVER (PARTITION BY w.aggregateid ORDER BY w.seq) AS behind
          FROM (SELECT m.seq, m.id, m.aggregateid, m.attempts, m.in_retry,
                       CASE
                           WHEN given_ids IS NOT NULL
                                AND NOT EXISTS (SELECT FROM unnest(given_ids, given_attempts) AS g(gi, ga)
                                                WHERE g.gi = m.id AND (g.ga IS NULL OR g.ga = m.attempts)) THEN 'k'
                           WHEN m.id = ANY (failed) THEN 'f'
                           WHEN done IS NULL OR m.id = ANY (done) THEN 'a'
                           ELSE 'k' END::"char" AS verdict
                FROM dedup.outbox_members(in_part, b.topic, b.first_seq, b.last_seq, b.settled,
                                          b.attempt, b.retried, bid, b.extra) AS m) AS w) AS v;
    acked := ARRAY(SELECT u.i FROM unnest(m_id, m_verdict) AS u(i, v) WHERE u.v = 'a');
    nacked := ARRAY(SELECT u.i FROM unnest(m_id, m_verdict) AS u(i, v) WHERE u.v IN ('f', 'b'));
    IF cardinality(acked) = 0 AND cardinality(nacked) = 0 THEN
        RETURN;
    END IF;
    -- published events of outbox_retry leave it
    IF b.retried > 0 THEN
        DELETE FROM dedup.outbox_retry AS r
        USING unnest(m_id, m_retried, m_verdict) AS u(i, rt, v)
        WHERE u.rt AND u.v = 'a' AND r.part OPERATOR(@extschema@.=) in_part AND r.id = u.i;
    END IF;
    IF cardinality(nacked) > 0 THEN
        -- failed events: dead at max_attempts, or back after retry_delay;
        -- those behind them back too, with the attempts they had before
        PERFORM dedup.outbox_bury(in_part, b.topic,
            ARRAY(SELECT u.s FROM unnest(m_seq, m_attempt, m_retried, m_verdict) AS u(s, t, rt, v)
                  WHERE u.v = 'f' AND NOT u.rt AND u.t >= max_attempts),
            b.attempt,
            ARRAY(SELECT u.i FROM unnest(m_id, m_attempt, m_retried, m_verdict) AS u(i, t, rt, v)
                  WHERE u.v = 'f' AND u.rt AND u.t >= max_attempts),
            error);
        UPDATE dedup.outbox_retry AS r
        SET batch = NULL, visible_at = visible,
            last_error = CASE WHEN u.v = 'f' THEN coalesce(error, r.last_error) ELSE r.last_error END,
            attempts = CASE WHEN u.v = 'f' THEN r.attempts ELSE greatest(r.attempts - 1, 0) END
        FROM unnest(m_id, m_attempt, m_retried, m_verdict) AS u(i, t, rt, v)
        WHERE u.rt AND (u.v = 'b' OR (u.v = 'f' AND u.t < max_attempts))
          AND r.part OPERATOR(@extschema@.=) in_part AND r.id = u.i;
        INSERT INTO dedup.outbox_retry (part, seq, id, topic, aggregatetype, aggregateid, type,
                                        payload, headers, created_at, attempts, visible_at,
                                        last_error)
        SELECT o.part, o.seq, o.id, o.topic, o.aggregatetype, o.aggregateid, o.type, o.payload,
               o.headers, o.created_at,
               CASE WHEN u.v = 'f' THEN u.t ELSE greatest(u.t - 1, 0) END, visible,
               CASE WHEN u.v = 'f' THEN error END
        FROM unnest(m_seq, m_attempt, m_retried, m_verdict) AS u(s, t, rt, v)
        JOIN dedup.outbox AS o ON o.part OPERATOR(@extschema@.=) in_part AND o.topic = b.topic AND o.seq = u.s
        WHERE NOT u.rt AND (u.v = 'b' OR (u.v = 'f' AND u.t < max_attempts))
        ON CONFLICT ON CONSTRAINT outbox_retry_pkey DO NOTHING;
    END IF;
    -- events of the log that left the batch are settled in it
    UPDATE dedup.outbox_batches AS x
    SET settled = x.settled || ARRAY(SELECT u.s FROM unnest(m_seq, m_retried, m_verdict) AS u(s, rt, v)
                                     WHERE u.v <> 'k' AND NOT u.rt)
    WHERE x.part OPERATOR(@extschema@.=) in_part AND x.slot = b.slot;
    PERFORM dedup.outbox_batch_recount(in_part, b.slot);
END
$$;
REVOKE ALL ON FUNCTION dedup.outbox_settle(oid, @extschema@.dedup_fingerprint, bigint, uuid[], uuid[], uuid[], integer[],
    interval, text) FROM PUBLIC;

-- The batch was published: every event of it but those of failed, which
-- come back after retry_delay (or go dead at max_attempts).  A batch acked
-- whole frees its slot: one update.
CREATE OR REPLACE FUNCTION dedup.outbox_ack_batch(caller oid, in_part @extschema@.dedup_fingerprint, batch_id bigint,
    failed uuid[], retry_delay interval, error text)
RETURNS integer
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    t text;
    n integer;
    s record;
BEGIN
    IF batch_id IS NULL THEN
        RAISE EXCEPTION 'batch_id must not be null' USING ERRCODE = '22004';
    END IF;
    IF failed IS NOT NULL AND array_position(failed, NULL) IS NOT NULL THEN
        RAISE EXCEPTION 'failed must not hold a null' USING ERRCODE = '22004';
    END IF;
    PERFORM dedup.check_interval(retry_delay, 'retry_delay', true);
    IF coalesce(cardinality(failed), 0) = 0 THEN
        -- (the privilege checked first: Citus runs no STABLE function of a
        -- column in an UPDATE); a batch of a topic the caller may not relay
        -- is answered as one not handed out
        SELECT x.topic INTO t FROM dedup.outbox_batches AS x
        WHERE x.part OPERATOR(@extschema@.=) in_part
          AND x.slot = batch_id / 2147483648 % 65536 AND x.generation = batch_id % 2147483648
          AND dedup.outbox_batch_id(x.part, x.slot, x.generation) = batch_id
          AND x.busy AND x.retried = 0;
        IF FOUND AND NOT dedup.has_privilege(caller, t, 'relay', false) THEN
            RETURN 0;
        END IF;
        UPDATE dedup.outbox_batches AS x SET busy = false
        WHERE x.part OPERATOR(@extschema@.=) in_part
          AND x.slot = batch_id / 2147483648 % 65536 AND x.generation = batch_id % 2147483648
          AND dedup.outbox_batch_id(x.part, x.slot, x.generation) = batch_id
          AND x.busy AND x.retried = 0 AND x.topic = t
        RETURNING x.topic, x.events INTO t, n;
        IF FOUND THEN
            PERFORM dedup.scope_count(t, 'events_acked', n);
            RETURN n;
        END IF;
    END IF;
    s := dedup.outbox_settle(caller, in_part, batch_id, NULL, coalesce(failed, '{}'), NULL, NULL,
                             retry_delay, error);
    IF s.topic IS NOT NULL THEN
        PERFORM dedup.scope_count(s.topic, 'events_acked', cardinality(s.acked));
        PERFORM dedup.scope_count(s.topic, 'events_nacked', cardinality(s.nacked));
    END IF;
    RETURN coalesce(cardinality(s.acked), 0);
END
$$;

-- The batch could not be published: all of it back after retry_delay, or
-- dead at max_attempts.
CREATE OR REPLACE FUNCTION dedup.outbox_nack_batch(caller oid, in_part @extschema@.dedup_fingerprint, batch_id bigint,
    retry_delay interval, error text)
RETURNS integer
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    s record;
BEGIN
    IF batch_id IS NULL THEN
        RAISE EXCEPTION 'batch_id must not be null' USING ERRCODE = '22004';
    END IF;
    PERFORM dedup.check_interval(retry_delay, 'retry_delay', true);
    -- a batch of a topic the caller may not relay: as one not handed out
    -- (before its row is locked, below)
    IF dedup.outbox_batch_topic(caller, in_part, batch_id) IS NULL THEN
        RETURN 0;
    END IF;
    s := dedup.outbox_settle(caller, in_part, batch_id, '{}',
                             ARRAY(SELECT m.id FROM dedup.outbox_batch(in_part, batch_id) AS b,
                                   dedup.outbox_members(in_part, b.topic, b.first_seq, b.last_seq,
                                                        b.settled, b.attempt, b.retried,
                                                        batch_id, b.extra) AS m),
                             NULL, NULL, retry_delay, error);
    IF s.topic IS NOT NULL THEN
        PERFORM dedup.scope_count(s.topic, 'events_nacked', cardinality(s.nacked));
    END IF;
    RETURN coalesce(cardinality(s.nacked), 0);
END
$$;

-- The (id, attempt) pairs an ack or nack names; attempts, when given,
-- must match ids one for one.
CREATE OR REPLACE FUNCTION dedup.outbox_given(ids uuid[], attempts integer[])
RETURNS TABLE (id uuid, attempt integer)
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF ids IS NULL OR array_position(ids, NULL) IS NOT NULL THEN
        RAISE EXCEPTION 'ids must not be null' USING ERRCODE = '22004';
    END IF;
    IF attempts IS NOT NULL AND (cardinality(attempts) <> cardinality(ids)
                                 OR array_position(attempts, NULL) IS NOT NULL) THEN
        RAISE EXCEPTION 'attempts must give one attempt number per id' USING ERRCODE = '22023';
    END IF;
    RETURN QUERY SELECT g.i, g.a FROM unnest(ids, attempts) AS g(i, a);
END
$$;
REVOKE ALL ON FUNCTION dedup.outbox_given(uuid[], integer[]) FROM PUBLIC;

-- The ids of a relay's ack or nack that it did not act on must be events
-- it could have been handed: one never handed out (in the log past its
-- topic's position, held back in outbox_held, or waiting in outbox_retry
-- with no attempt) is 55000,
-- one unknown 42704.  Any other (acked before, dead, back in the queue, or
-- taken again under another attempt) was acted on by someone else: fine.
CREATE OR REPLACE FUNCTION dedup.outbox_check_ids(in_part @extschema@.dedup_fingerprint, ids uuid[], done uuid[])
RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    bad uuid;
BEGIN
    SELECT i INTO bad FROM unnest(ids) AS i
    WHERE i <> ALL (done)
      AND (EXISTS (SELECT FROM dedup.outbox_retry AS r
                   WHERE r.part OPERATOR(@extschema@.=) in_part AND r.id = i AND r.attempts = 0 AND r.batch IS NULL)
           OR EXISTS (SELECT FROM dedup.outbox AS o
                      LEFT JOIN dedup.outbox_topics AS t
                             ON t.part OPERATOR(@extschema@.=) o.part AND t.topic = o.topic
                      WHERE o.part OPERATOR(@extschema@.=) in_part AND o.id = i AND o.seq >= coalesce(t.next_seq, 0))
           OR EXISTS (SELECT FROM dedup.outbox AS o
                      JOIN dedup.outbox_held AS h
                        ON h.part OPERATOR(@extschema@.=) o.part AND h.topic = o.topic
                       AND h.aggregateid = o.aggregateid AND o.seq BETWEEN h.from_seq AND h.upto_seq
                      WHERE o.part OPERATOR(@extschema@.=) in_part AND o.id = i))
    LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'outbox event % is not taken', bad USING ERRCODE = '55000',
            HINT = 'Only an event handed out by dedup_outbox_take() can be acked or nacked.';
    END IF;
    SELECT i INTO bad FROM unnest(ids) AS i
    WHERE i <> ALL (done)
      AND NOT EXISTS (SELECT FROM dedup.outbox AS o WHERE o.part OPERATOR(@extschema@.=) in_part AND o.id = i)
      AND NOT EXISTS (SELECT FROM dedup.outbox_retry AS r WHERE r.part OPERATOR(@extschema@.=) in_part AND r.id = i)
      AND NOT EXISTS (SELECT FROM dedup.outbox_dead AS d WHERE d.part OPERATOR(@extschema@.=) in_part AND d.id = i)
      AND NOT EXISTS (SELECT FROM dedup.outbox_keys AS k
                      WHERE k.key OPERATOR(@extschema@.=)
                            pg_catalog.replace(i::text, '-', '')::@extschema@.dedup_fingerprint)
    LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'outbox event % does not exist', bad USING ERRCODE = '42704';
    END IF;
END
$$;
REVOKE ALL ON FUNCTION dedup.outbox_check_ids(@extschema@.dedup_fingerprint, uuid[], uuid[]) FROM PUBLIC;

-- The ids of the busy batches of a partition that hold any of ids, in slot
-- order.
CREATE OR REPLACE FUNCTION dedup.outbox_batches_of(in_part @extschema@.dedup_fingerprint, ids uuid[])
RETURNS bigint[]
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    b dedup.outbox_batches;
    bid bigint;
    named bigint[] := '{}';
BEGIN
    FOR b IN SELECT * FROM dedup.outbox_batches AS x
             WHERE x.part OPERATOR(@extschema@.=) in_part AND x.busy ORDER BY x.slot LOOP
        bid := dedup.outbox_batch_id(b.part, b.slot, b.generation);
        IF EXISTS (SELECT FROM dedup.outbox_members(b.part, b.topic, b.first_seq, b.last_seq,
                                                    b.settled, b.attempt, b.retried, bid, b.extra) AS m
                   WHERE m.id = ANY (ids)) THEN
            named := named || bid;
        END IF;
    END LOOP;
    RETURN named;
END
$$;
REVOKE ALL ON FUNCTION dedup.outbox_batches_of(@extschema@.dedup_fingerprint, uuid[]) FROM PUBLIC;

-- Settle the events named by id, batch by batch: the 1.0 shape of ack and
-- nack.  With nack false, the events were published (an event of the dead
-- letters too: it leaves them); with nack true they come back after
-- retry_delay or go dead.  With attempts (as take returned them), an event
-- taken again since is left to the relay that holds it now.
CREATE OR REPLACE FUNCTION dedup.outbox_settle_ids(caller oid, in_part @extschema@.dedup_fingerprint, ids uuid[],
    attempts integer[], nack boolean, retry_delay interval, error text)
RETURNS integer
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    given_ids uuid[];
    given_attempts integer[];
    done uuid[] := '{}';
    dead_ids uuid[];
    dead_topics text[];
    named bigint[];
    bid bigint;
    s record;
    missed boolean;
BEGIN
    SELECT coalesce(array_agg(g.id), '{}'), array_agg(g.attempt)
    INTO given_ids, given_attempts FROM dedup.outbox_given(ids, attempts) AS g;
    -- the batches the ids are in
    named := dedup.outbox_batches_of(in_part, given_ids);
    -- refused before anything is done: every topic the ids are events of
    PERFORM dedup.has_privilege(caller, x.topic, 'relay', true)
    FROM (SELECT b.topic FROM dedup.outbox_batches AS b
          WHERE b.part OPERATOR(@extschema@.=) in_part
            AND dedup.outbox_batch_id(b.part, b.slot, b.generation) = ANY (named)
          UNION
          SELECT r.topic FROM dedup.outbox_retry AS r
          WHERE r.part OPERATOR(@extschema@.=) in_part AND r.id = ANY (given_ids)
          UNION
          SELECT d.topic FROM dedup.outbox_dead AS d
          WHERE d.part OPERATOR(@extschema@.=) in_part AND d.id = ANY (given_ids)) AS x;
    -- a batch handed out again (under a new id) while this call waited for
    -- it is looked up again, by the ids not yet settled
    FOR round IN 1..3 LOOP
        missed := false;
        FOREACH bid IN ARRAY named
        LOOP
            IF nack THEN
                s := dedup.outbox_settle(caller, in_part, bid, '{}', given_ids, given_ids,
                                         given_attempts, retry_delay, error);
                done := done || s.nacked;
                PERFORM dedup.scope_count(s.topic, 'events_nacked', cardinality(s.nacked));
            ELSE
                s := dedup.outbox_settle(caller, in_part, bid, given_ids, '{}', given_ids,
                                         given_attempts, retry_delay, error);
                done := done || s.acked;
                PERFORM dedup.scope_count(s.topic, 'events_acked', cardinality(s.acked));
            END IF;
            missed := missed OR s.topic IS NULL;
        END LOOP;
        EXIT WHEN NOT missed;
        named := dedup.outbox_batches_of(in_part,
                                         ARRAY(SELECT i FROM unnest(given_ids) AS i
                                               WHERE i <> ALL (done)));
    END LOOP;
    IF NOT nack THEN
        -- an event dead-lettered while its relay was still publishing
        WITH gone AS (
            DELETE FROM dedup.outbox_dead AS d
            USING unnest(given_ids, given_attempts) AS g(i, a)
            WHERE d.part OPERATOR(@extschema@.=) in_part AND d.id = g.i AND d.id <> ALL (done)
              AND (g.a IS NULL OR d.attempts = g.a)
            RETURNING d.id, d.topic
        )
        SELECT coalesce(array_agg(g.id), '{}'), coalesce(array_agg(g.topic), '{}')
        INTO dead_ids, dead_topics FROM gone AS g;
        done := done || dead_ids;
        PERFORM dedup.scope_count(x.topic, 'events_acked', count(*))
        FROM unnest(dead_topics) AS x(topic) GROUP BY x.topic;
    END IF;
    IF cardinality(done) < cardinality(given_ids) THEN
        PERFORM dedup.outbox_check_ids(in_part, given_ids, done);
    END IF;
    RETURN cardinality(done);
END
$$;
REVOKE ALL ON FUNCTION dedup.outbox_settle_ids(oid, @extschema@.dedup_fingerprint, uuid[], integer[], boolean, interval,
    text) FROM PUBLIC;

CREATE OR REPLACE FUNCTION dedup.outbox_ack(caller oid, in_part @extschema@.dedup_fingerprint, ids uuid[], attempts integer[])
RETURNS integer
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT dedup.outbox_settle_ids(caller, in_part, ids, attempts, false, interval '0', NULL)
$$;

CREATE OR REPLACE FUNCTION dedup.outbox_nack(caller oid, in_part @extschema@.dedup_fingerprint, ids uuid[],
    retry_delay interval, error text, attempts integer[])
RETURNS integer
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM dedup.check_interval(retry_delay, 'retry_delay', true);
    RETURN dedup.outbox_settle_ids(caller, in_part, ids, attempts, true, retry_delay, error);
END
$$;

-- Dead events back: into outbox_retry, with no attempts, in their place
-- (dedup_outbox_redrive notifies the topic's relays when any moved).
CREATE OR REPLACE FUNCTION dedup.outbox_redrive(caller oid, in_part @extschema@.dedup_fingerprint, topic text, ids uuid[])
RETURNS integer
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    n integer;
BEGIN
    IF topic IS NULL THEN
        RAISE EXCEPTION 'topic must not be null' USING ERRCODE = '22004';
    END IF;
    PERFORM dedup.has_privilege(caller, topic, 'relay', true);
    WITH revived AS (
        DELETE FROM dedup.outbox_dead AS d
        WHERE d.part OPERATOR(@extschema@.=) in_part AND d.topic = outbox_redrive.topic
          AND (ids IS NULL OR d.id = ANY (ids))
        RETURNING d.*
    )
    INSERT INTO dedup.outbox_retry (part, seq, id, topic, aggregatetype, aggregateid, type,
                                    payload, headers, created_at, last_error)
    SELECT r.part, r.seq, r.id, r.topic, r.aggregatetype, r.aggregateid, r.type, r.payload,
           r.headers, r.created_at, r.last_error
    FROM revived AS r
    ON CONFLICT ON CONSTRAINT outbox_retry_pkey DO NOTHING;
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END
$$;

-- Per topic: events not yet handed out or whose lease passed (pending),
-- handed out under a lease (in flight), dead, and the age of the oldest
-- not yet published; of partition in_part, or of every one (NULL).
CREATE OR REPLACE FUNCTION dedup.outbox_stats(caller oid, in_part @extschema@.dedup_fingerprint, for_topic text)
RETURNS TABLE (topic text, pending bigint, in_flight bigint, dead bigint,
               oldest_pending_age interval)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF for_topic IS NOT NULL THEN
        PERFORM dedup.has_privilege(caller, for_topic, 'relay', true);
    END IF;
    RETURN QUERY
    SELECT e.topic,
           count(*) FILTER (WHERE e.state = 'p'),
           count(*) FILTER (WHERE e.state = 'f'),
           count(*) FILTER (WHERE e.state = 'd'),
           pg_catalog.now() - min(e.created_at) FILTER (WHERE e.state <> 'd')
    FROM (
        -- the log past each topic's position
        SELECT o.topic, o.created_at, 'p'::"char" AS state
        FROM dedup.outbox AS o
        LEFT JOIN dedup.outbox_topics AS t ON t.part OPERATOR(@extschema@.=) o.part AND t.topic = o.topic
        WHERE (in_part IS NULL OR o.part OPERATOR(@extschema@.=) in_part)
          AND (for_topic IS NULL OR o.topic = for_topic) AND o.seq >= coalesce(t.next_seq, 0)
        UNION ALL
        -- events held back behind their aggregate
        SELECT o.topic, o.created_at, 'p'::"char"
        FROM dedup.outbox_held AS h
        JOIN dedup.outbox AS o
          ON o.part OPERATOR(@extschema@.=) h.part AND o.topic = h.topic
         AND o.seq BETWEEN h.from_seq AND h.upto_seq AND o.aggregateid = h.aggregateid
        WHERE (in_part IS NULL OR h.part OPERATOR(@extschema@.=) in_part)
          AND (for_topic IS NULL OR h.topic = for_topic)
        UNION ALL
        -- events of batches, from the log and from outbox_retry (as
        -- dedup.outbox_members() finds them, here joined)
        SELECT b.topic, o.created_at,
               CASE WHEN b.lease_until > pg_catalog.now() THEN 'f' ELSE 'p' END::"char"
        FROM dedup.outbox_batches AS b
        JOIN dedup.outbox AS o
          ON o.part OPERATOR(@extschema@.=) b.part AND o.topic = b.topic
         AND (o.seq BETWEEN b.first_seq AND b.last_seq OR o.seq = ANY (b.extra))
         AND o.seq <> ALL (b.settled)
        WHERE (in_part IS NULL OR b.part OPERATOR(@extschema@.=) in_part)
          AND b.busy AND (for_topic IS NULL OR b.topic = for_topic)
        UNION ALL
        SELECT b.topic, r.created_at,
               CASE WHEN b.lease_until > pg_catalog.now() THEN 'f' ELSE 'p' END::"char"
        FROM dedup.outbox_batches AS b
        JOIN dedup.outbox_retry AS r
          ON r.part OPERATOR(@extschema@.=) b.part
         AND r.batch = dedup.outbox_batch_id(b.part, b.slot, b.generation)
        WHERE (in_part IS NULL OR b.part OPERATOR(@extschema@.=) in_part)
          AND b.busy AND b.retried > 0 AND (for_topic IS NULL OR b.topic = for_topic)
        UNION ALL
        -- events of outbox_retry not handed out
        SELECT r.topic, r.created_at, 'p'::"char"
        FROM dedup.outbox_retry AS r
        WHERE (in_part IS NULL OR r.part OPERATOR(@extschema@.=) in_part)
          AND r.batch IS NULL AND (for_topic IS NULL OR r.topic = for_topic)
        UNION ALL
        SELECT d.topic, d.created_at, 'd'::"char"
        FROM dedup.outbox_dead AS d
        WHERE (in_part IS NULL OR d.part OPERATOR(@extschema@.=) in_part)
          AND (for_topic IS NULL OR d.topic = for_topic)
    ) AS e
    WHERE for_topic IS NOT NULL OR dedup.has_privilege(caller, e.topic, 'relay', false)
    GROUP BY e.topic
    ORDER BY e.topic;
END
$$;

-- Published events leave the log once their topic's retention passed (an
-- event's row is its key: within retention a put of its key finds it):
-- up to batch_size events of partition in_part, of each topic before its
-- position, the first event of its batches and its first held event.  Run by the cleanup as
-- the owner of the outbox; returns how many went.
CREATE OR REPLACE FUNCTION dedup.outbox_trim(in_part @extschema@.dedup_fingerprint, batch_size integer)
RETURNS bigint
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    t record;
    n bigint := 0;
    m bigint;
BEGIN
    FOR t IN SELECT x.topic,
                    least(x.next_seq,
                          (SELECT min(least(b.first_seq, (SELECT min(e) FROM unnest(b.extra) AS e)))
                           FROM dedup.outbox_batches AS b
                           WHERE b.part OPERATOR(@extschema@.=) in_part AND b.topic = x.topic
                             AND b.busy),
                          (SELECT min(h.from_seq) FROM dedup.outbox_held AS h
                           WHERE h.part OPERATOR(@extschema@.=) in_part AND h.topic = x.topic)) AS upto,
                    pg_catalog.statement_timestamp()
                    - (SELECT s.retention FROM @extschema@.dedup_scope(x.topic) AS s) AS cutoff
             FROM dedup.outbox_topics AS x WHERE x.part OPERATOR(@extschema@.=) in_part ORDER BY x.topic LOOP
        EXIT WHEN n >= batch_size;
        -- the oldest events first: created_at grows with seq, so a first
        -- one kept means the rest are kept too
        DELETE FROM dedup.outbox AS o
        WHERE o.part OPERATOR(@extschema@.=) in_part AND o.ctid = ANY (ARRAY(
            SELECT y.ctid
            FROM (SELECT x.ctid, x.created_at FROM dedup.outbox AS x
                  WHERE x.part OPERATOR(@extschema@.=) in_part AND x.topic = t.topic AND x.seq < t.upto
                  ORDER BY x.seq LIMIT batch_size - n) AS y
            WHERE y.created_at < t.cutoff));
        GET DIAGNOSTICS m = ROW_COUNT;
        n := n + m;
    END LOOP;
    RETURN n;
END
$$;
REVOKE ALL ON FUNCTION dedup.outbox_trim(@extschema@.dedup_fingerprint, integer) FROM PUBLIC;

REVOKE ALL ON FUNCTION
    dedup.outbox_take_batch(oid, @extschema@.dedup_fingerprint, text, integer, boolean),
    dedup.outbox_take(oid, @extschema@.dedup_fingerprint, text, integer),
    dedup.outbox_ack_batch(oid, @extschema@.dedup_fingerprint, bigint, uuid[], interval, text),
    dedup.outbox_nack_batch(oid, @extschema@.dedup_fingerprint, bigint, interval, text),
    dedup.outbox_ack(oid, @extschema@.dedup_fingerprint, uuid[], integer[]),
    dedup.outbox_nack(oid, @extschema@.dedup_fingerprint, uuid[], interval, text, integer[]),
    dedup.outbox_redrive(oid, @extschema@.dedup_fingerprint, text, uuid[]),
    dedup.outbox_stats(oid, @extschema@.dedup_fingerprint, text)
FROM PUBLIC;

-- The relay's public functions.  Each runs the function of the same name in
-- schema dedup (above) as the owner of the outbox, passing the role that
-- called it, which must have the relay privilege on every topic the call
-- touches (42501 otherwise, before anything is written), and the partition
-- it works in: dedup_outbox_relay in C switches to the owner as PostgreSQL
-- does for SECURITY DEFINER, but keeps the caller's identity for the
-- check.  A batch id names no topic: an ack or nack of a batch of a topic
-- the caller may not relay answers as for a batch not handed out (0),
-- naming nothing and writing nothing.
CREATE OR REPLACE FUNCTION @extschema@.dedup_outbox_take_batch(topic text, batch_size integer DEFAULT 100)
RETURNS TABLE (batch_id bigint, id uuid, aggregatetype text, aggregateid text, type text,
               payload jsonb, headers jsonb, attempts integer, created_at timestamptz,
               lease_expires_at timestamptz, seq bigint)
AS 'MODULE_PATHNAME', 'dedup_outbox_relay' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.dedup_outbox_take_batch(text, integer) IS
    'hand out a batch of up to batch_size events of a topic under one lease (the topic''s lease), several of an aggregate in seq order; ack it with dedup_outbox_ack_batch(batch_id); a batch not acked comes back whole after its lease';

CREATE OR REPLACE FUNCTION @extschema@.dedup_outbox_ack_batch(batch_id bigint, failed uuid[] DEFAULT NULL,
    retry_delay interval DEFAULT '0', error text DEFAULT NULL)
RETURNS integer
AS 'MODULE_PATHNAME', 'dedup_outbox_relay' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.dedup_outbox_ack_batch(bigint, uuid[], interval, text) IS
    'the batch was published but for the events in failed, which come back after retry_delay (or go dead at the topic''s max_attempts); returns how many were acked (0 for a batch acked before)';

CREATE OR REPLACE FUNCTION @extschema@.dedup_outbox_nack_batch(batch_id bigint,
    retry_delay interval DEFAULT '0', error text DEFAULT NULL)
RETURNS integer
AS 'MODULE_PATHNAME', 'dedup_outbox_relay' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.dedup_outbox_nack_batch(bigint, interval, text) IS
    'no event of the batch was published: all come back after retry_delay, or go dead at the topic''s max_attempts';

CREATE OR REPLACE FUNCTION @extschema@.dedup_outbox_take(topic text, batch_size integer DEFAULT 100)
RETURNS TABLE (id uuid, aggregatetype text, aggregateid text, type text, payload jsonb,
               headers jsonb, attempts integer, created_at timestamptz,
               lease_expires_at timestamptz)
AS 'MODULE_PATHNAME', 'dedup_outbox_relay' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.dedup_outbox_take(text, integer) IS
    'hand out up to batch_size events of a topic with a lease (the topic''s lease); an event not acked comes back after it';

CREATE OR REPLACE FUNCTION @extschema@.dedup_outbox_ack(ids uuid[], attempts integer[] DEFAULT NULL)
RETURNS integer
AS 'MODULE_PATHNAME', 'dedup_outbox_relay' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.dedup_outbox_ack(uuid[], integer[]) IS
    'the events were published: they never come back; returns how many were acked now (ids acked before, or taken again since their attempt, count 0)';

CREATE OR REPLACE FUNCTION @extschema@.dedup_outbox_nack(ids uuid[],
    retry_delay interval DEFAULT '0', error text DEFAULT NULL, attempts integer[] DEFAULT NULL)
RETURNS integer
AS 'MODULE_PATHNAME', 'dedup_outbox_relay' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.dedup_outbox_nack(uuid[], interval, text, integer[]) IS
    'the events could not be published: they come back after retry_delay, or go to dead after the topic''s max_attempts';

CREATE OR REPLACE FUNCTION @extschema@.dedup_outbox_redrive(topic text, ids uuid[] DEFAULT NULL)
RETURNS integer
AS 'MODULE_PATHNAME', 'dedup_outbox_relay' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.dedup_outbox_redrive(text, uuid[]) IS
    'put dead events of a topic (all, or those of ids) back in the outbox, in their original order, with no attempts';

CREATE OR REPLACE FUNCTION @extschema@.dedup_outbox_stats(topic text DEFAULT NULL,
    OUT topic text, OUT pending bigint, OUT in_flight bigint, OUT dead bigint,
    OUT oldest_pending_age interval)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'dedup_outbox_relay' LANGUAGE C STABLE;
COMMENT ON FUNCTION @extschema@.dedup_outbox_stats(text) IS
    'per topic: events pending (including leases that passed), in flight, dead, and the age of the oldest not yet published';
