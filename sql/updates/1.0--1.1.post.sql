
-------------------------------------------------------------------------
-- dedup--1.0--1.1.sql, its data steps (sql/updates/1.0--1.1.post.sql):
-- after the new tables, functions and privileges, what 1.0's rows become
-------------------------------------------------------------------------
-- Roles granted usage before are not given the stream functions here: a
-- GRANT in an extension script becomes the object's initial privilege,
-- which pg_dump leaves out, so a dump of the updated database would lose
-- it.  Run dedup_grant_usage(role) again for roles that advance streams.

-- Every role 1.0 granted (EXECUTE on dedup_claim or dedup_outbox_take, by
-- dedup_grant_usage/_relay or by hand) keeps its every-scope meaning.
INSERT INTO dedup.grants (role, privilege, scope)
SELECT DISTINCT a.grantee::regrole, x.privilege, NULL::text
FROM (VALUES ('usage', '@extschema@.dedup_claim(text, text, interval, boolean)'::regprocedure),
             ('relay', '@extschema@.dedup_outbox_take(text, integer)'::regprocedure)) AS x(privilege, fn)
JOIN pg_catalog.pg_proc AS p ON p.oid = x.fn
CROSS JOIN LATERAL pg_catalog.aclexplode(p.proacl) AS a
WHERE a.privilege_type = 'EXECUTE' AND a.grantee <> 0 AND a.grantee <> p.proowner;

-- 1.0's events with a state of their own move to dedup.outbox_retry: those
-- handed out before (nacked, leased, or whose lease passed), each with its
-- attempts, time and last error.  Those in flight keep their lease, as a
-- batch of those one 1.0 take handed out (the events of a topic with one
-- lease end: at most one of an aggregate), so that their relay's ack (by
-- id, with its attempt) still counts.  But an event taken behind an
-- earlier taken event of its aggregate (1.0 hands a redriven event out
-- while a later one it passed when it died is taken, its lease passed;
-- and hands that later one out again only once the earlier is acked) gets
-- no batch: it waits in dedup.outbox_retry, due as its lease passed,
-- behind the earlier one's batch, as the rest of a batch a take may not
-- have does (sql/functions/outbox_take.sql); as a batch of its own, lapsed,
-- the next take handed it out again while the earlier one's batch was
-- out, two batches of one aggregate (test/isolation/specs/outbox-update.spec).
-- Events never handed out stay in the log, in their place; every topic's
-- relays start at its beginning.
INSERT INTO dedup.outbox_retry (part, seq, id, topic, aggregatetype, aggregateid, type, payload,
                                headers, created_at, attempts, visible_at, last_error)
SELECT o.part, o.seq, o.id, o.topic, o.aggregatetype, o.aggregateid, o.type, o.payload,
       o.headers, o.created_at, o.attempts, o.visible_at, o.last_error
FROM dedup.outbox AS o
WHERE o.attempts > 0;
DO $$
DECLARE
    t record;
    bid bigint;
BEGIN
    FOR t IN SELECT o.topic, o.visible_at, max(o.attempts) AS attempt, count(*) AS events,
                    array_agg(o.id) AS ids,
                    array_agg(pg_catalog.hashtext(o.aggregateid)) AS aggregates
             FROM dedup.outbox AS o WHERE o.attempts > 0 AND o.status = 't'
               AND NOT EXISTS (SELECT FROM dedup.outbox AS e
                               WHERE e.topic = o.topic AND e.aggregateid = o.aggregateid
                                 AND e.status = 't' AND e.seq < o.seq)
             GROUP BY o.topic, o.visible_at ORDER BY min(o.seq)
    LOOP
        -- a batch row, as a take inserts it (sql/tables/outbox_relay.sql):
        -- the topic's position at its beginning, its low mark the topic's
        -- first batch here (every one of them is out)
        bid := dedup.outbox_batch_new_id('00000000000000000000000000000000');
        INSERT INTO dedup.outbox_batches (part, topic, id, rev, busy, attempt, lease_until, retried,
                                          events, aggregates, next_seq, low_id)
        VALUES ('00000000000000000000000000000000', t.topic, bid, 0, true, t.attempt, t.visible_at,
                t.events, t.events, t.aggregates, 0,
                coalesce((SELECT min(x.id) FROM dedup.outbox_batches AS x WHERE x.topic = t.topic), bid));
        UPDATE dedup.outbox_retry SET batch = bid WHERE id = ANY (t.ids);
    END LOOP;
END
$$;
-- every topic with events of its own has a position, at its beginning
-- (the 1.0 ack and nack find a topic's batches by its row)
INSERT INTO dedup.outbox_topics (part, topic)
SELECT DISTINCT '00000000000000000000000000000000'::@extschema@.dedup_fingerprint, r.topic
FROM dedup.outbox_retry AS r;
DELETE FROM dedup.outbox WHERE attempts > 0;
ALTER TABLE dedup.outbox
    DROP COLUMN status, DROP COLUMN attempts, DROP COLUMN visible_at, DROP COLUMN last_error,
    RESET (fillfactor);
DROP INDEX dedup.outbox_aggregate_seq;
DROP INDEX dedup.outbox_topic_seq;
CREATE UNIQUE INDEX outbox_topic_seq ON dedup.outbox (topic, seq);
COMMENT ON TABLE dedup.outbox IS 'the outbox''s log of events, appended by dedup_outbox_put() (Debezium Outbox Event Router columns); published events leave it with the cleanup once their topic''s retention passed';
-- 1.0's keys stay where they are until their retention passes: a 1.1 put
-- keeps its key as the event's id in the log.
COMMENT ON TABLE dedup.outbox_keys IS 'keys of outbox events put by dedup 1.0, kept until their topic''s retention passes';
