-------------------------------------------------------------------------
-- Transactional outbox: the relay's ack and nack
-- By batch (settle, ack_batch, nack_batch) and by ids (the 1.0 calls).
-------------------------------------------------------------------------
-- The ack of a batch whole, with no event of outbox_retry, in partition
-- in_part, for caller: a row appended that says it is out no more, its
-- events counted acked; how many
-- it had, 0 for a batch of a topic the caller may not relay, -1 when no
-- batch of that id is handed out with no event of outbox_retry (the
-- settle below answers).  The fast path's (src/outbox_fast.c).
CREATE OR REPLACE FUNCTION dedup.outbox_ack_whole(caller oid, in_part @extschema@.dedup_fingerprint, batch_id bigint)
RETURNS integer
AS 'MODULE_PATHNAME', 'dedup_outbox_ack_whole' LANGUAGE C STRICT VOLATILE;
REVOKE ALL ON FUNCTION dedup.outbox_ack_whole(oid, @extschema@.dedup_fingerprint, bigint) FROM PUBLIC;

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
        SELECT in_part, o.seq, o.id, o.topic, o.aggregatetype, o.aggregateid, o.type, o.payload,
               o.headers, o.created_at,
               CASE WHEN u.v = 'f' THEN u.t ELSE greatest(u.t - 1, 0) END, visible,
               CASE WHEN u.v = 'f' THEN error END
        FROM unnest(m_seq, m_attempt, m_retried, m_verdict) AS u(s, t, rt, v)
        JOIN dedup.outbox AS o ON o.part OPERATOR(@extschema@.=) in_part AND o.topic = b.topic AND o.seq = u.s
        WHERE NOT u.rt AND (u.v = 'b' OR (u.v = 'f' AND u.t < max_attempts))
        ON CONFLICT ON CONSTRAINT outbox_retry_pkey DO NOTHING;
    END IF;
    -- events of the log that left the batch are settled in it (a row
    -- appended, with the batch's state after it)
    b.settled := b.settled || ARRAY(SELECT u.s FROM unnest(m_seq, m_retried, m_verdict) AS u(s, rt, v)
                                    WHERE u.v <> 'k' AND NOT u.rt);
    PERFORM dedup.outbox_batch_recount(in_part, b);
END
$$;
REVOKE ALL ON FUNCTION dedup.outbox_settle(oid, @extschema@.dedup_fingerprint, bigint, uuid[], uuid[], uuid[], integer[],
    interval, text) FROM PUBLIC;

-- The batch was published: every event of it but those of failed, which
-- come back after retry_delay (or go dead at max_attempts).  A batch acked
-- whole is out no more: one row appended.
CREATE OR REPLACE FUNCTION dedup.outbox_ack_batch(caller oid, in_part @extschema@.dedup_fingerprint, batch_id bigint,
    failed uuid[], retry_delay interval, error text)
RETURNS integer
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
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
        -- a batch acked whole with no event of outbox_retry: the fast
        -- path's ack (src/outbox_fast.c), one rule for both paths; a batch
        -- of a topic the caller may not relay is answered as one not
        -- handed out (0)
        n := dedup.outbox_ack_whole(caller, in_part, batch_id);
        IF n >= 0 THEN
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

-- The ids, of those given, of events of a topic the caller may not relay
-- (in the log, outbox_retry or the dead letters, under their topic): an
-- ack or nack by ids leaves them out and answers each exactly as an id
-- found nowhere.  An event's id is made of its topic and key, which anyone
-- can compute, so that a relay must learn nothing from it of a topic it
-- may not relay: not whether the event is there, nor in what state.  None
-- when the caller relays every topic.
CREATE OR REPLACE FUNCTION dedup.outbox_hidden_ids(caller oid, in_part @extschema@.dedup_fingerprint, ids uuid[])
RETURNS uuid[]
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF dedup.has_privilege(caller, NULL, 'relay', false) THEN
        RETURN '{}';
    END IF;
    RETURN ARRAY(
        SELECT i FROM unnest(ids) AS i
        WHERE EXISTS (SELECT FROM dedup.outbox AS o
                      WHERE o.part OPERATOR(@extschema@.=) in_part AND o.id = i
                        AND NOT dedup.has_privilege(caller, o.topic, 'relay', false))
           OR EXISTS (SELECT FROM dedup.outbox_retry AS r
                      WHERE r.part OPERATOR(@extschema@.=) in_part AND r.id = i
                        AND NOT dedup.has_privilege(caller, r.topic, 'relay', false))
           OR EXISTS (SELECT FROM dedup.outbox_dead AS d
                      WHERE d.part OPERATOR(@extschema@.=) in_part AND d.id = i
                        AND NOT dedup.has_privilege(caller, d.topic, 'relay', false)));
END
$$;
REVOKE ALL ON FUNCTION dedup.outbox_hidden_ids(oid, @extschema@.dedup_fingerprint, uuid[]) FROM PUBLIC;

-- The ids of a relay's ack or nack that it did not act on must be events
-- it could have been handed: one never handed out (in the log past its
-- topic's position, held back in outbox_held, or waiting in outbox_retry
-- with no attempt) is 55000,
-- one unknown 42704.  Any other (acked before, dead, back in the queue, or
-- taken again under another attempt) was acted on by someone else: fine.
-- An id of hidden (of a topic the caller may not relay) is unknown, and so
-- is a key of 1.0 (dedup.outbox_keys, which names no topic) whose event is
-- gone, unless the caller relays every topic: both are answered by the
-- same statement as an id found nowhere, whatever their event's state.
CREATE OR REPLACE FUNCTION dedup.outbox_check_ids(caller oid, in_part @extschema@.dedup_fingerprint, ids uuid[],
    done uuid[], hidden uuid[])
RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    bad uuid;
    every_topic boolean;
BEGIN
    -- hidden again, as this snapshot sees the events: one of another topic
    -- put, taken or dead-lettered while the call waited for a batch is
    -- answered as unknown too, not by its state
    hidden := hidden || dedup.outbox_hidden_ids(caller, in_part, ids);
    SELECT i INTO bad FROM unnest(ids) AS i
    WHERE i <> ALL (done) AND i <> ALL (hidden)
      AND (EXISTS (SELECT FROM dedup.outbox_retry AS r
                   WHERE r.part OPERATOR(@extschema@.=) in_part AND r.id = i AND r.attempts = 0 AND r.batch IS NULL)
           OR EXISTS (SELECT FROM dedup.outbox AS o
                      WHERE o.part OPERATOR(@extschema@.=) in_part AND o.id = i
                        AND o.seq >= coalesce((dedup.outbox_position(in_part, o.topic)).next_seq, 0))
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
    every_topic := dedup.has_privilege(caller, NULL, 'relay', false);
    SELECT i INTO bad FROM unnest(ids) AS i
    WHERE i <> ALL (done)
      AND (i = ANY (hidden)
           OR (NOT EXISTS (SELECT FROM dedup.outbox AS o WHERE o.part OPERATOR(@extschema@.=) in_part AND o.id = i)
               AND NOT EXISTS (SELECT FROM dedup.outbox_retry AS r
                               WHERE r.part OPERATOR(@extschema@.=) in_part AND r.id = i)
               AND NOT EXISTS (SELECT FROM dedup.outbox_dead AS d
                               WHERE d.part OPERATOR(@extschema@.=) in_part AND d.id = i)
               AND NOT (every_topic
                        AND EXISTS (SELECT FROM dedup.outbox_keys AS k
                                    WHERE k.key OPERATOR(@extschema@.=)
                                          pg_catalog.replace(i::text, '-', '')::@extschema@.dedup_fingerprint))))
    LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'outbox event % does not exist', bad USING ERRCODE = '42704';
    END IF;
END
$$;
REVOKE ALL ON FUNCTION dedup.outbox_check_ids(oid, @extschema@.dedup_fingerprint, uuid[], uuid[], uuid[]) FROM PUBLIC;

-- The ids of the batches out in a partition that hold any of ids, by
-- topic, in id order.
CREATE OR REPLACE FUNCTION dedup.outbox_batches_of(in_part @extschema@.dedup_fingerprint, ids uuid[])
RETURNS bigint[]
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    b dedup.outbox_batches;
    t text;
    bid bigint;
    named bigint[] := '{}';
BEGIN
    FOR t IN SELECT x.topic FROM dedup.outbox_topics AS x
             WHERE x.part OPERATOR(@extschema@.=) in_part ORDER BY x.topic LOOP
        FOR b IN SELECT * FROM dedup.outbox_batches_out(in_part, t) LOOP
            bid := b.id;
            IF EXISTS (SELECT FROM dedup.outbox_members(in_part, b.topic, b.first_seq, b.last_seq,
                                                        b.settled, b.attempt, b.retried, bid, b.extra) AS m
                       WHERE m.id = ANY (ids)) THEN
                named := named || bid;
            END IF;
        END LOOP;
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
    hidden uuid[];
    done uuid[] := '{}';
    dead_ids uuid[];
    dead_topics text[];
    named bigint[];
    bid bigint;
    s record;
    missed boolean;
    counted_topics text[] := '{}';
    counted_n integer[] := '{}';
BEGIN
    SELECT coalesce(array_agg(g.id), '{}'), array_agg(g.attempt)
    INTO given_ids, given_attempts FROM dedup.outbox_given(ids, attempts) AS g;
    -- the ids of events of a topic the caller may not relay are left out,
    -- before anything is done, and answered as ids found nowhere
    hidden := dedup.outbox_hidden_ids(caller, in_part, given_ids);
    IF cardinality(hidden) > 0 THEN
        SELECT coalesce(array_agg(g.i), '{}'), array_agg(g.a)
        INTO given_ids, given_attempts
        FROM unnest(given_ids, given_attempts) AS g(i, a) WHERE g.i <> ALL (hidden);
    END IF;
    -- the batches the ids are in (of topics the caller relays)
    named := dedup.outbox_batches_of(in_part, given_ids);
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
                counted_n := counted_n || cardinality(s.nacked);
            ELSE
                s := dedup.outbox_settle(caller, in_part, bid, given_ids, '{}', given_ids,
                                         given_attempts, retry_delay, error);
                done := done || s.acked;
                counted_n := counted_n || cardinality(s.acked);
            END IF;
            counted_topics := counted_topics || s.topic;
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
              -- (again here: an event of another topic may have died since
              -- hidden was read, while this call waited for a batch)
              AND dedup.has_privilege(caller, d.topic, 'relay', false)
            RETURNING d.id, d.topic
        )
        SELECT coalesce(array_agg(g.id), '{}'), coalesce(array_agg(g.topic), '{}')
        INTO dead_ids, dead_topics FROM gone AS g;
        done := done || dead_ids;
        counted_topics := counted_topics || dead_topics;
        counted_n := counted_n || array_fill(1, ARRAY[cardinality(dead_topics)]);
    END IF;
    IF cardinality(done) < cardinality(ids) THEN
        PERFORM dedup.outbox_check_ids(caller, in_part, ids, done, hidden);
    END IF;
    -- counted only now, as the call returns: one that raised above (its
    -- settles rolled back with it) counts nothing, as its caller was told
    PERFORM dedup.scope_count(c.topic, CASE WHEN nack THEN 'events_nacked' ELSE 'events_acked' END,
                              sum(c.n))
    FROM unnest(counted_topics, counted_n) AS c(topic, n)
    WHERE c.topic IS NOT NULL GROUP BY c.topic;
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

-- The heartbeat of a batch: its lease set to run lease (NULL: the topic's)
-- from now, while it is handed out under bid (its lease may have passed, as
-- long as no take handed it out again under a new id); returns the new end
-- of the lease, or NULL for a batch not handed out under that id and for a
-- batch of a topic the caller may not relay (answered alike, naming
-- nothing, as an ack).  A take that finds the lease passed locks the batch's
-- row and looks again: an extension committed first keeps the batch; one
-- after the take handed it out again finds it under a new id, and extends
-- nothing.
CREATE OR REPLACE FUNCTION dedup.outbox_extend_batch(caller oid, in_part @extschema@.dedup_fingerprint, bid bigint,
    lease interval)
RETURNS timestamptz
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    t text;
    l interval;
    until timestamptz;
    b dedup.outbox_batches;
BEGIN
    IF bid IS NULL THEN
        RAISE EXCEPTION 'batch_id must not be null' USING ERRCODE = '22004';
    END IF;
    t := dedup.outbox_batch_topic(caller, in_part, bid);
    IF t IS NULL THEN
        RETURN NULL;
    END IF;
    l := coalesce(lease, (SELECT s.lease FROM @extschema@.dedup_scope(t) AS s));
    -- (computed first: Citus runs no volatile function in an UPDATE)
    until := pg_catalog.clock_timestamp() + l;
    -- a row appended with the new lease, under the batch's lock
    SELECT * INTO b FROM dedup.outbox_batch(in_part, bid);
    IF NOT FOUND OR b.topic <> t THEN
        RETURN NULL;
    END IF;
    b.lease_until := until;
    b := dedup.outbox_batch_append(in_part, b);
    RETURN b.lease_until;
END
$$;

-- The members of batch bid, busy in partition in_part (the other
-- partitions' batches of its take on a Citus cluster), set to members
-- first unless that is NULL; NULL for a batch not handed out under that
-- id, and for one of a topic the caller may not relay (answered alike).
CREATE OR REPLACE FUNCTION dedup.outbox_group(caller oid, in_part @extschema@.dedup_fingerprint, bid bigint,
    members bigint[])
RETURNS bigint[]
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    t text;
    m bigint[];
    b dedup.outbox_batches;
BEGIN
    IF bid IS NULL THEN
        RAISE EXCEPTION 'batch_id must not be null' USING ERRCODE = '22004';
    END IF;
    t := dedup.outbox_batch_topic(caller, in_part, bid);
    IF t IS NULL THEN
        RETURN NULL;
    END IF;
    IF members IS NULL THEN
        SELECT * INTO b FROM dedup.outbox_batch(in_part, bid, only_read => true);
        IF NOT FOUND OR b.topic <> t THEN
            RETURN NULL;
        END IF;
        RETURN b.members;
    END IF;
    -- a row appended with the members, under the batch's lock
    SELECT * INTO b FROM dedup.outbox_batch(in_part, bid);
    IF NOT FOUND OR b.topic <> t THEN
        RETURN NULL;
    END IF;
    b.members := outbox_group.members;
    b := dedup.outbox_batch_append(in_part, b);
    RETURN b.members;
END
$$;
REVOKE ALL ON FUNCTION dedup.outbox_group(oid, @extschema@.dedup_fingerprint, bigint, bigint[]) FROM PUBLIC;
