-------------------------------------------------------------------------
-- Transactional outbox
-------------------------------------------------------------------------
CREATE FUNCTION @extschema@.dedup_outbox_put(topic text, key text, payload jsonb,
    aggregate_id text DEFAULT NULL, type text DEFAULT NULL,
    headers jsonb DEFAULT NULL, aggregate_type text DEFAULT NULL)
RETURNS uuid
AS 'MODULE_PATHNAME' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.dedup_outbox_put(text, text, jsonb, text, text, jsonb, text) IS
    'enqueue an event in the current transaction; the same (topic, key) within the topic''s retention yields one event; returns its id';

-- The relay.  An event is handed out at most once at a time: take locks
-- with SKIP LOCKED, so relays run in parallel.  Within an aggregate, only
-- the earliest event not yet acked is handed out, and only while no other
-- event of it is in flight, so events of one aggregate go out in commit
-- order and never two at once.  Leases run from the statement's start.
CREATE FUNCTION dedup.outbox_take(caller oid, topic text, batch_size integer)
RETURNS TABLE (id uuid, aggregatetype text, aggregateid text, type text, payload jsonb,
               headers jsonb, attempts integer, created_at timestamptz,
               lease_expires_at timestamptz)
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    lease interval;
    max_attempts integer;
    n bigint;
BEGIN
    PERFORM dedup.check_writable('dedup_outbox_take');
    IF topic IS NULL OR batch_size IS NULL THEN
        RAISE EXCEPTION 'topic and batch_size must not be null' USING ERRCODE = '22004';
    END IF;
    IF batch_size < 1 OR batch_size > 10000 THEN
        RAISE EXCEPTION 'batch_size must be between 1 and 10000' USING ERRCODE = '22023';
    END IF;
    PERFORM dedup.has_privilege(caller, topic, 'relay', true);
    SELECT s.lease, s.max_attempts INTO lease, max_attempts
    FROM @extschema@.dedup_scope(topic) AS s;
    RETURN QUERY
    WITH candidates AS (
        SELECT o.id AS cid
        FROM dedup.outbox AS o
        WHERE o.topic = outbox_take.topic
          AND o.visible_at <= pg_catalog.statement_timestamp()
          AND NOT EXISTS (SELECT FROM dedup.outbox AS e
                          WHERE e.topic = o.topic AND e.aggregateid = o.aggregateid
                            AND e.id <> o.id
                            AND (e.seq < o.seq
                                 OR (e.status = 't'
                                     AND e.visible_at > pg_catalog.statement_timestamp())))
        ORDER BY o.seq
        LIMIT batch_size
        FOR UPDATE OF o SKIP LOCKED
    ), dead AS (
        DELETE FROM dedup.outbox AS o USING candidates AS c
        WHERE o.id = c.cid AND o.attempts >= max_attempts
        RETURNING o.*
    ), buried AS (
        INSERT INTO dedup.outbox_dead (seq, id, topic, aggregatetype, aggregateid, type,
                                       payload, headers, created_at, attempts, last_error)
        SELECT d.seq, d.id, d.topic, d.aggregatetype, d.aggregateid, d.type,
               d.payload, d.headers, d.created_at, d.attempts, d.last_error
        FROM dead AS d
        ON CONFLICT ON CONSTRAINT outbox_dead_pkey DO NOTHING
    ), taken AS (
        UPDATE dedup.outbox AS o
        SET status = 't', attempts = o.attempts + 1,
            visible_at = pg_catalog.statement_timestamp() + lease
        FROM candidates AS c
        WHERE o.id = c.cid AND o.attempts < max_attempts
        RETURNING o.seq, o.id, o.aggregatetype, o.aggregateid, o.type, o.payload,
                  o.headers, o.attempts, o.created_at, o.visible_at
    )
    SELECT t.id, t.aggregatetype, t.aggregateid, t.type, t.payload, t.headers,
           t.attempts, t.created_at, t.visible_at
    FROM taken AS t ORDER BY t.seq;
    GET DIAGNOSTICS n = ROW_COUNT;
    PERFORM dedup.scope_count(topic, 'events_taken', n);
END
$$;

-- The (id, attempt) pairs an ack or nack names; attempts, when given,
-- must match ids one for one.
CREATE FUNCTION dedup.outbox_given(ids uuid[], attempts integer[])
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
-- it could have been handed: one that never was (attempts 0) is 55000, one
-- unknown 42704.  Any other (acked before, dead, back in the queue, or
-- taken again under another attempt) was acted on by someone else: fine.
CREATE FUNCTION dedup.outbox_check_ids(ids uuid[], done uuid[])
RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    bad uuid;
BEGIN
    SELECT i INTO bad FROM pg_catalog.unnest(ids) AS i
    WHERE i <> ALL (done)
      AND EXISTS (SELECT FROM dedup.outbox AS o WHERE o.id = i AND o.attempts = 0)
    LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'outbox event % is not taken', bad USING ERRCODE = '55000',
            HINT = 'Only an event handed out by dedup_outbox_take() can be acked or nacked.';
    END IF;
    SELECT i INTO bad FROM pg_catalog.unnest(ids) AS i
    WHERE i <> ALL (done)
      AND NOT EXISTS (SELECT FROM dedup.outbox AS o WHERE o.id = i)
      AND NOT EXISTS (SELECT FROM dedup.outbox_dead AS d WHERE d.id = i)
      AND NOT EXISTS (SELECT FROM dedup.outbox_keys AS k
                      WHERE k.key OPERATOR(@extschema@.=)
                            pg_catalog.replace(i::text, '-', '')::@extschema@.dedup_fingerprint)
    LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'outbox event % does not exist', bad USING ERRCODE = '42704';
    END IF;
END
$$;
REVOKE ALL ON FUNCTION dedup.outbox_check_ids(uuid[], uuid[]) FROM PUBLIC;

-- The events were published: they never come back.  Counts even when the
-- lease passed, and for an event dead-lettered meanwhile.  With attempts
-- (as take returned them), an event taken again since is left to the relay
-- that holds it now.
CREATE FUNCTION dedup.outbox_ack(caller oid, ids uuid[], attempts integer[])
RETURNS integer
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    done uuid[];
    done_topics text[];
BEGIN
    PERFORM dedup.check_writable('dedup_outbox_ack');
    -- refused before anything is done, and again by the statement that acts
    -- (an event of another topic may have been put since); there the check
    -- names the joined row, so that it is made only for events named, and
    -- raises only for a row that is joined
    PERFORM dedup.has_privilege(caller, t.topic, 'relay', true)
    FROM (SELECT o.topic FROM dedup.outbox AS o WHERE o.id = ANY (ids)
          UNION
          SELECT d.topic FROM dedup.outbox_dead AS d WHERE d.id = ANY (ids)) AS t;
    WITH given AS (
        SELECT g.id, g.attempt FROM dedup.outbox_given(ids, attempts) AS g
    ), gone AS (
        DELETE FROM dedup.outbox AS o USING given AS g
        WHERE o.id = g.id AND o.attempts > 0 AND (g.attempt IS NULL OR o.attempts = g.attempt)
          AND dedup.has_privilege(caller, o.topic, 'relay', g.id = o.id)
        RETURNING o.id, o.topic
    ), gone_dead AS (
        DELETE FROM dedup.outbox_dead AS d USING given AS g
        WHERE d.id = g.id AND (g.attempt IS NULL OR d.attempts = g.attempt)
          AND dedup.has_privilege(caller, d.topic, 'relay', g.id = d.id)
        RETURNING d.id, d.topic
    )
    SELECT coalesce(array_agg(x.id), '{}'), coalesce(array_agg(x.topic), '{}') INTO done, done_topics
    FROM (SELECT gone.id, gone.topic FROM gone
          UNION ALL SELECT gone_dead.id, gone_dead.topic FROM gone_dead) AS x;
    IF cardinality(done) < cardinality(ids) THEN
        PERFORM dedup.outbox_check_ids(ids, done);
    END IF;
    -- counted once the call can no longer fail
    PERFORM dedup.scope_count(t.topic, 'events_acked', count(*))
    FROM pg_catalog.unnest(done_topics) AS t(topic) GROUP BY t.topic;
    RETURN cardinality(done);
END
$$;

-- The events could not be published: back after retry_delay, or dead at
-- the topic's max_attempts.  Only an event still taken, and with attempts
-- under that same attempt, is nacked; others were dealt with by someone else.
CREATE FUNCTION dedup.outbox_nack(caller oid, ids uuid[],
    retry_delay interval, error text, attempts integer[])
RETURNS integer
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    done uuid[];
    done_topics text[];
BEGIN
    PERFORM dedup.check_writable('dedup_outbox_nack');
    PERFORM dedup.check_interval(retry_delay, 'retry_delay', true);
    -- refused before anything is done, and again by the statement that acts
    -- (an event of another topic may have been put since); there the check
    -- names the joined row, so that it is made only for events named, and
    -- raises only for a row that is joined
    PERFORM dedup.has_privilege(caller, t.topic, 'relay', true)
    FROM (SELECT o.topic FROM dedup.outbox AS o WHERE o.id = ANY (ids)
          UNION
          SELECT d.topic FROM dedup.outbox_dead AS d WHERE d.id = ANY (ids)) AS t;
    WITH given AS (
        SELECT g.id, g.attempt FROM dedup.outbox_given(ids, attempts) AS g
    ), targets AS (
        SELECT o.id AS tid,
               o.attempts >= (SELECT s.max_attempts FROM @extschema@.dedup_scope(o.topic) AS s) AS dies
        FROM dedup.outbox AS o JOIN given AS g ON o.id = g.id
        WHERE o.status = 't' AND (g.attempt IS NULL OR o.attempts = g.attempt)
          AND dedup.has_privilege(caller, o.topic, 'relay', g.id = o.id)
    ), dead AS (
        DELETE FROM dedup.outbox AS o USING targets AS t
        WHERE o.id = t.tid AND t.dies
        RETURNING o.*
    ), buried AS (
        INSERT INTO dedup.outbox_dead (seq, id, topic, aggregatetype, aggregateid, type,
                                       payload, headers, created_at, attempts, last_error)
        SELECT d.seq, d.id, d.topic, d.aggregatetype, d.aggregateid, d.type,
               d.payload, d.headers, d.created_at, d.attempts, coalesce(error, d.last_error)
        FROM dead AS d
        ON CONFLICT ON CONSTRAINT outbox_dead_pkey DO NOTHING
    ), back AS (
        UPDATE dedup.outbox AS o
        SET status = 'p', visible_at = pg_catalog.statement_timestamp() + retry_delay,
            last_error = coalesce(error, o.last_error)
        FROM targets AS t
        WHERE o.id = t.tid AND NOT t.dies
        RETURNING o.id, o.topic
    )
    SELECT coalesce(array_agg(x.id), '{}'), coalesce(array_agg(x.topic), '{}') INTO done, done_topics
    FROM (SELECT dead.id, dead.topic FROM dead UNION ALL SELECT back.id, back.topic FROM back) AS x;
    IF cardinality(done) < cardinality(ids) THEN
        PERFORM dedup.outbox_check_ids(ids, done);
    END IF;
    -- counted once the call can no longer fail
    PERFORM dedup.scope_count(t.topic, 'events_nacked', count(*))
    FROM pg_catalog.unnest(done_topics) AS t(topic) GROUP BY t.topic;
    RETURN cardinality(done);
END
$$;

CREATE FUNCTION dedup.outbox_redrive(caller oid, topic text, ids uuid[])
RETURNS integer
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    n integer;
BEGIN
    PERFORM dedup.check_writable('dedup_outbox_redrive');
    IF topic IS NULL THEN
        RAISE EXCEPTION 'topic must not be null' USING ERRCODE = '22004';
    END IF;
    PERFORM dedup.has_privilege(caller, topic, 'relay', true);
    WITH revived AS (
        DELETE FROM dedup.outbox_dead AS d
        WHERE d.topic = outbox_redrive.topic AND (ids IS NULL OR d.id = ANY (ids))
        RETURNING d.*
    )
    INSERT INTO dedup.outbox (seq, id, topic, aggregatetype, aggregateid, type, payload,
                              headers, created_at, last_error)
    OVERRIDING SYSTEM VALUE
    SELECT r.seq, r.id, r.topic, r.aggregatetype, r.aggregateid, r.type, r.payload,
           r.headers, r.created_at, r.last_error
    FROM revived AS r
    ON CONFLICT ON CONSTRAINT outbox_pkey DO NOTHING;
    GET DIAGNOSTICS n = ROW_COUNT;
    IF n > 0 THEN
        PERFORM pg_catalog.pg_notify('dedup_outbox', topic);
    END IF;
    RETURN n;
END
$$;

CREATE FUNCTION dedup.outbox_stats(caller oid, for_topic text)
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
    SELECT t.topic,
           count(*) FILTER (WHERE NOT t.dead AND NOT t.flying),
           count(*) FILTER (WHERE t.flying),
           count(*) FILTER (WHERE t.dead),
           pg_catalog.now() - min(t.created_at) FILTER (WHERE NOT t.dead)
    FROM (SELECT o.topic, o.created_at, false AS dead,
                 (o.status = 't' AND o.visible_at > pg_catalog.now()) AS flying
          FROM dedup.outbox AS o
          WHERE for_topic IS NULL OR o.topic = for_topic
          UNION ALL
          SELECT d.topic, d.created_at, true, false
          FROM dedup.outbox_dead AS d
          WHERE for_topic IS NULL OR d.topic = for_topic) AS t
    WHERE for_topic IS NOT NULL OR dedup.has_privilege(caller, t.topic, 'relay', false)
    GROUP BY t.topic
    ORDER BY t.topic;
END
$$;
REVOKE ALL ON FUNCTION
    dedup.outbox_take(oid, text, integer),
    dedup.outbox_ack(oid, uuid[], integer[]),
    dedup.outbox_nack(oid, uuid[], interval, text, integer[]),
    dedup.outbox_redrive(oid, text, uuid[]),
    dedup.outbox_stats(oid, text)
FROM PUBLIC;

-- The relay's public functions.  Each runs the function of the same name in
-- schema dedup (above) as the owner of the outbox, passing the role that
-- called it, which must have the relay privilege on every topic the call
-- touches (42501 otherwise, before anything is written): dedup_outbox_relay
-- in C switches to the owner as PostgreSQL does for SECURITY DEFINER, but
-- keeps the caller's identity for the check.
CREATE FUNCTION @extschema@.dedup_outbox_take(topic text, batch_size integer DEFAULT 100)
RETURNS TABLE (id uuid, aggregatetype text, aggregateid text, type text, payload jsonb,
               headers jsonb, attempts integer, created_at timestamptz,
               lease_expires_at timestamptz)
AS 'MODULE_PATHNAME', 'dedup_outbox_relay' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.dedup_outbox_take(text, integer) IS
    'hand out up to batch_size events of a topic with a lease (the topic''s lease); an event not acked comes back after it';

CREATE FUNCTION @extschema@.dedup_outbox_ack(ids uuid[], attempts integer[] DEFAULT NULL)
RETURNS integer
AS 'MODULE_PATHNAME', 'dedup_outbox_relay' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.dedup_outbox_ack(uuid[], integer[]) IS
    'the events were published: they never come back; returns how many were acked now (ids acked before, or taken again since their attempt, count 0)';

CREATE FUNCTION @extschema@.dedup_outbox_nack(ids uuid[],
    retry_delay interval DEFAULT '0', error text DEFAULT NULL, attempts integer[] DEFAULT NULL)
RETURNS integer
AS 'MODULE_PATHNAME', 'dedup_outbox_relay' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.dedup_outbox_nack(uuid[], interval, text, integer[]) IS
    'the events could not be published: they come back after retry_delay, or go to dead after the topic''s max_attempts';

CREATE FUNCTION @extschema@.dedup_outbox_redrive(topic text, ids uuid[] DEFAULT NULL)
RETURNS integer
AS 'MODULE_PATHNAME', 'dedup_outbox_relay' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.dedup_outbox_redrive(text, uuid[]) IS
    'put dead events of a topic (all, or those of ids) back in the outbox, in their original order, with no attempts';

CREATE FUNCTION @extschema@.dedup_outbox_stats(topic text DEFAULT NULL,
    OUT topic text, OUT pending bigint, OUT in_flight bigint, OUT dead bigint,
    OUT oldest_pending_age interval)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'dedup_outbox_relay' LANGUAGE C STABLE;
COMMENT ON FUNCTION @extschema@.dedup_outbox_stats(text) IS
    'per topic: events pending (including leases that passed), in flight, dead, and the age of the oldest not yet published';
