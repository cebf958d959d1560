-------------------------------------------------------------------------
-- Transactional outbox: redrive, figures, trim
-------------------------------------------------------------------------
-- Dead events back: into outbox_retry, with no attempts, in their place
-- (dedup_outbox_redrive notifies the topic's relays when any moved).
CREATE OR REPLACE FUNCTION dedup.outbox_wait_events(ids uuid[]) RETURNS void
AS 'MODULE_PATHNAME', 'dedup_outbox_wait_events' LANGUAGE C STRICT VOLATILE;
REVOKE ALL ON FUNCTION dedup.outbox_wait_events(uuid[]) FROM PUBLIC;

CREATE OR REPLACE FUNCTION dedup.outbox_redrive(caller oid, in_part @extschema@.dedup_fingerprint, topic text, ids uuid[])
RETURNS integer
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    n integer;
    moved_ids uuid[];
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
    ), moved AS (
        INSERT INTO dedup.outbox_retry (part, seq, id, topic, aggregatetype, aggregateid, type,
                                        payload, headers, created_at, last_error)
        SELECT in_part, r.seq, r.id, r.topic, r.aggregatetype, r.aggregateid, r.type, r.payload,
               r.headers, r.created_at, r.last_error
        FROM revived AS r
        ON CONFLICT ON CONSTRAINT outbox_retry_pkey DO NOTHING
        RETURNING id
    )
    SELECT pg_catalog.array_agg(m.id) INTO moved_ids FROM moved AS m;
    n := coalesce(pg_catalog.cardinality(moved_ids), 0);
    -- a put looking an event up in outbox_retry, then in outbox_dead, is
    -- done before this move commits (outbox_put.c)
    IF n > 0 THEN
        PERFORM dedup.outbox_wait_events(moved_ids);
    END IF;
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
DECLARE
    x record;
    pos_parts @extschema@.dedup_fingerprint[] := '{}';
    pos_topics text[] := '{}';
    pos_next bigint[] := '{}';
BEGIN
    IF for_topic IS NOT NULL THEN
        PERFORM dedup.has_privilege(caller, for_topic, 'relay', true);
    END IF;
    -- each topic's position, read topic by topic (not inside the query
    -- below: on a Citus cluster a statement on a shard runs no other
    -- statement on a distributed table)
    FOR x IN SELECT t.part, t.topic FROM dedup.outbox_topics AS t
             WHERE (in_part IS NULL OR t.part OPERATOR(@extschema@.=) in_part)
               AND (for_topic IS NULL OR t.topic = for_topic) LOOP
        pos_parts := pos_parts || x.part;
        pos_topics := pos_topics || x.topic;
        pos_next := pos_next || (dedup.outbox_position(x.part, x.topic)).next_seq;
    END LOOP;
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
        LEFT JOIN unnest(pos_parts, pos_topics, pos_next) AS t(part, topic, next_seq)
          ON t.part OPERATOR(@extschema@.=) o.part AND t.topic = o.topic
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
          AND NOT EXISTS (SELECT FROM dedup.outbox_batches AS y
                          WHERE y.part OPERATOR(@extschema@.=) b.part AND y.topic = b.topic
                            AND y.id = b.id AND y.rev > b.rev)
        UNION ALL
        SELECT b.topic, r.created_at,
               CASE WHEN b.lease_until > pg_catalog.now() THEN 'f' ELSE 'p' END::"char"
        FROM dedup.outbox_batches AS b
        JOIN dedup.outbox_retry AS r
          ON r.part OPERATOR(@extschema@.=) b.part
         AND r.batch = b.id
        WHERE (in_part IS NULL OR b.part OPERATOR(@extschema@.=) in_part)
          AND b.busy AND b.retried > 0 AND (for_topic IS NULL OR b.topic = for_topic)
          AND NOT EXISTS (SELECT FROM dedup.outbox_batches AS y
                          WHERE y.part OPERATOR(@extschema@.=) b.part AND y.topic = b.topic
                            AND y.id = b.id AND y.rev > b.rev)
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

-- The dead events of a topic, of partition in_part, for a relay of it: the
-- first max by seq, with their attempts and last error.
CREATE OR REPLACE FUNCTION dedup.outbox_dead(caller oid, in_part @extschema@.dedup_fingerprint, for_topic text,
    max integer)
RETURNS TABLE (id uuid, seq bigint, aggregatetype text, aggregateid text, type text,
               payload jsonb, headers jsonb, created_at timestamptz, attempts integer,
               last_error text, died_at timestamptz)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF for_topic IS NULL OR max IS NULL THEN
        RAISE EXCEPTION 'topic and max must not be null' USING ERRCODE = '22004';
    END IF;
    IF max < 1 OR max > 10000 THEN
        RAISE EXCEPTION 'max must be between 1 and 10000' USING ERRCODE = '22023';
    END IF;
    PERFORM dedup.has_privilege(caller, for_topic, 'relay', true);
    RETURN QUERY
    SELECT d.id, d.seq, d.aggregatetype, d.aggregateid, d.type, d.payload, d.headers,
           d.created_at, d.attempts, d.last_error, d.died_at
    FROM dedup.outbox_dead AS d
    WHERE d.part OPERATOR(@extschema@.=) in_part AND d.topic = for_topic
    ORDER BY d.seq
    LIMIT max;
END
$$;

-- Published events leave the log once their topic's retention passed (an
-- event's row is its key: within retention a put of its key finds it):
-- up to batch_size events of partition in_part, of each topic before its
-- position, the first event of its batches and its first held event.  An
-- event in outbox_retry or outbox_dead keeps its row in the log, however
-- old: a put looks its key up in the log alone (outbox_put.c), so the row
-- stays until the event is published.  The events that moved between the
-- look-ups of this function are not lost: a nack is of an event of a
-- batch, before the first of which nothing goes; a redrive is of an event
-- in outbox_dead, and a move from one to the other is one transaction,
-- seen whole by the one snapshot of the DELETE.  Run by the cleanup as
-- the owner of the outbox; returns how many went.  It deletes, too, the
-- batch rows below each topic's low mark (sql/tables/outbox_relay.sql).
CREATE OR REPLACE FUNCTION dedup.outbox_trim(in_part @extschema@.dedup_fingerprint, batch_size integer)
RETURNS bigint
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    t record;
    n bigint := 0;
    m bigint;
    p record;
    held bigint;
    upto bigint;
BEGIN
    -- (the position and the batches out read by statements of their own,
    -- not inside the loop's: on a Citus cluster a statement on a shard runs
    -- no other statement on a distributed table.  In this order, each after
    -- the one before: the position, then the held events, then the
    -- batches out.  A take that holds events back after the position was
    -- read holds them at or past it; one that hands held events out after
    -- they were read puts them in a batch read out after, or acked.  Held
    -- events read before the position, in the loop's statement, missed
    -- those that a take committed meanwhile held back and passed.)
    FOR t IN SELECT x.topic,
                    pg_catalog.statement_timestamp()
                    - (SELECT s.retention FROM @extschema@.dedup_scope(x.topic) AS s) AS cutoff
             FROM dedup.outbox_topics AS x WHERE x.part OPERATOR(@extschema@.=) in_part ORDER BY x.topic LOOP
        p := dedup.outbox_position(in_part, t.topic);
        held := (SELECT min(h.from_seq) FROM dedup.outbox_held AS h
                 WHERE h.part OPERATOR(@extschema@.=) in_part AND h.topic = t.topic);
        upto := least(p.next_seq,
                      (SELECT min(least(b.first_seq, (SELECT min(e) FROM unnest(b.extra) AS e)))
                       FROM dedup.outbox_batches_out(in_part, t.topic) AS b),
                      held);
        -- the topic's batch rows below its low mark: none of their batches
        -- is out, nor will be (sql/tables/outbox_relay.sql), and no reader
        -- reads them any more but a snapshot older than the newest batch
        -- row (the delete keeps them for it); up to batch_size a call, not
        -- counted as events
        DELETE FROM dedup.outbox_batches AS b
        WHERE b.part OPERATOR(@extschema@.=) in_part AND b.ctid = ANY (ARRAY(
            SELECT y.ctid FROM dedup.outbox_batches AS y
            WHERE y.part OPERATOR(@extschema@.=) in_part AND y.topic = t.topic
              AND y.id < p.low
            ORDER BY y.id LIMIT batch_size));
        EXIT WHEN n >= batch_size;
        -- the oldest events first: created_at grows with seq, so a first
        -- one kept means the rest are kept too
        DELETE FROM dedup.outbox AS o
        WHERE o.part OPERATOR(@extschema@.=) in_part AND o.ctid = ANY (ARRAY(
            SELECT y.ctid
            FROM (SELECT x.ctid, x.created_at FROM dedup.outbox AS x
                  WHERE x.part OPERATOR(@extschema@.=) in_part AND x.topic = t.topic AND x.seq < upto
                    AND NOT EXISTS (SELECT FROM dedup.outbox_retry AS r
                                    WHERE r.part OPERATOR(@extschema@.=) x.part AND r.id = x.id)
                    AND NOT EXISTS (SELECT FROM dedup.outbox_dead AS d
                                    WHERE d.part OPERATOR(@extschema@.=) x.part AND d.id = x.id)
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
    dedup.outbox_take_batch(oid, @extschema@.dedup_fingerprint, text, integer, interval, boolean),
    dedup.outbox_extend_batch(oid, @extschema@.dedup_fingerprint, bigint, interval),
    dedup.outbox_dead(oid, @extschema@.dedup_fingerprint, text, integer),
    dedup.outbox_take(oid, @extschema@.dedup_fingerprint, text, integer),
    dedup.outbox_ack_batch(oid, @extschema@.dedup_fingerprint, bigint, uuid[], interval, text),
    dedup.outbox_nack_batch(oid, @extschema@.dedup_fingerprint, bigint, interval, text),
    dedup.outbox_ack(oid, @extschema@.dedup_fingerprint, uuid[], integer[]),
    dedup.outbox_nack(oid, @extschema@.dedup_fingerprint, uuid[], interval, text, integer[]),
    dedup.outbox_redrive(oid, @extschema@.dedup_fingerprint, text, uuid[]),
    dedup.outbox_stats(oid, @extschema@.dedup_fingerprint, text)
FROM PUBLIC;
