-- The ids of the 1.0 ack and nack probe no topic the caller may not relay
-- (issue 45, item 5).  Anyone computes an event's id (it is made of its
-- topic and key), so an id of such a topic is answered exactly as an id
-- found nowhere: the same SQLSTATE, message, detail, hint and context, on
-- every path and in every state its event may be in (pending in the log,
-- held back, waiting again, handed out, dead, published, a key of 1.0);
-- nothing of that topic changes.  The relays of the topic, and a relay of
-- every topic, are answered as before.
CREATE ROLE regress_ids_a;
CREATE ROLE regress_ids_b;
CREATE ROLE regress_ids_every;
SELECT dedup_grant_relay('regress_ids_a', ARRAY['ids-a']);
SELECT dedup_grant_relay('regress_ids_b', ARRAY['ids-b']);
SELECT dedup_grant_relay('regress_ids_every');
SELECT dedup_grant_usage('regress_ids_a', ARRAY['ids-a']), dedup_grant_usage('regress_ids_b', ARRAY['ids-b']);
SELECT max_attempts FROM dedup_set_scope('ids-b', max_attempts => 2);

-- The error a call of one id raises, the id written <id>; 'no error' and
-- the call's result otherwise.
CREATE FUNCTION regress_ids_error(call text, id uuid) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    r text;
    st text;
    msg text;
    det text;
    hin text;
    ctx text;
BEGIN
    EXECUTE pg_catalog.format(call, ARRAY[id]) INTO r;
    RETURN 'no error: ' || r;
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT, det = PG_EXCEPTION_DETAIL,
                            hin = PG_EXCEPTION_HINT, ctx = PG_EXCEPTION_CONTEXT;
    RETURN replace(concat_ws(' | ', st, msg, 'detail: ' || det, 'hint: ' || hin, 'context: ' || ctx),
                   id::text, '<id>');
END
$$;

-- topic ids-b's events, one in each state, each taken and settled by its
-- own relay before the next is put
CREATE TEMP TABLE b_ids (state text, id uuid);
GRANT ALL ON b_ids TO PUBLIC;
SET ROLE regress_ids_b;
-- published: acked, in the log before the topic's position
INSERT INTO b_ids SELECT 'published', dedup_outbox_put('ids-b', 'published', '{}');
SELECT dedup_outbox_ack_batch(max(batch_id)) AS acked FROM dedup_outbox_take_batch('ids-b', 1);
-- dead: nacked at its max_attempts (2)
INSERT INTO b_ids SELECT 'dead', dedup_outbox_put('ids-b', 'dead', '{}');
SELECT dedup_outbox_nack_batch(max(batch_id)) AS nacked FROM dedup_outbox_take_batch('ids-b', 1);
SELECT dedup_outbox_nack_batch(max(batch_id)) AS nacked FROM dedup_outbox_take_batch('ids-b', 1);
-- redriven: dead, then back in outbox_retry with no attempt (redriven last)
INSERT INTO b_ids SELECT 'redriven', dedup_outbox_put('ids-b', 'redriven', '{}');
SELECT dedup_outbox_nack_batch(max(batch_id)) AS nacked FROM dedup_outbox_take_batch('ids-b', 1);
SELECT dedup_outbox_nack_batch(max(batch_id)) AS nacked FROM dedup_outbox_take_batch('ids-b', 1);
-- waiting again: nacked once, due in an hour
INSERT INTO b_ids SELECT 'waiting', dedup_outbox_put('ids-b', 'waiting', '{}');
SELECT dedup_outbox_nack_batch(max(batch_id), '1 hour') AS nacked FROM dedup_outbox_take_batch('ids-b', 1);
-- handed out: in a batch under its lease; held: the next event of its
-- aggregate, held back behind it
INSERT INTO b_ids SELECT 'handed out', dedup_outbox_put('ids-b', 'handed-out', '{}', aggregate_id => 'agg');
SELECT max(batch_id) AS b_batch FROM dedup_outbox_take_batch('ids-b', 1) \gset
INSERT INTO b_ids SELECT 'held', dedup_outbox_put('ids-b', 'held', '{}', aggregate_id => 'agg');
SELECT count(*) AS handed_out FROM dedup_outbox_take_batch('ids-b', 1);
-- pending: in the log past the topic's position
INSERT INTO b_ids SELECT 'pending', dedup_outbox_put('ids-b', 'pending', '{}');
RESET ROLE;
SELECT dedup_outbox_redrive('ids-b', ARRAY(SELECT id FROM b_ids WHERE state = 'redriven')) AS redriven;
-- a key of 1.0 (dedup.outbox_keys: no topic), whose event is gone
INSERT INTO b_ids VALUES ('1.0 key', '6f1c0a55-3d0e-4b8a-9d41-0e2f4c7a9b13');
INSERT INTO dedup.outbox_keys (key, expires_at)
SELECT replace(id::text, '-', '')::dedup_fingerprint, now() + interval '1 day' FROM b_ids WHERE state = '1.0 key';
-- an id found nowhere
INSERT INTO b_ids VALUES ('unknown', '0b7e3c52-91a4-4f6d-8e2b-5c3d1a9f7e60');
-- where each of them is
SELECT b.state,
       EXISTS (SELECT FROM dedup.outbox AS o WHERE o.id = b.id) AS in_log,
       EXISTS (SELECT FROM dedup.outbox_retry AS r WHERE r.id = b.id AND r.attempts = 0) AS retry_no_attempt,
       EXISTS (SELECT FROM dedup.outbox_retry AS r WHERE r.id = b.id AND r.attempts > 0) AS retry_attempted,
       EXISTS (SELECT FROM dedup.outbox_dead AS d WHERE d.id = b.id) AS dead,
       EXISTS (SELECT FROM dedup.outbox_held AS h JOIN dedup.outbox AS o
                 ON o.topic = h.topic AND o.aggregateid = h.aggregateid
                AND o.seq BETWEEN h.from_seq AND h.upto_seq WHERE o.id = b.id) AS held,
       EXISTS (SELECT FROM dedup.outbox_keys AS k
               WHERE k.key = replace(b.id::text, '-', '')::dedup_fingerprint) AS key_of_1_0
FROM b_ids AS b ORDER BY b.state;

-- topic ids-a: an event handed out to its relay, one pending
SET ROLE regress_ids_a;
SELECT dedup_outbox_put('ids-a', 'a-taken', '{}') AS a_taken \gset
SELECT max(batch_id) AS a_batch FROM dedup_outbox_take_batch('ids-a', 1) \gset
SELECT dedup_outbox_put('ids-a', 'a-pending', '{}') AS a_pending \gset
RESET ROLE;

-- all of topic ids-b that a call could change
CREATE TEMP VIEW b_state AS
SELECT (SELECT md5(string_agg(o::text, '|' ORDER BY o.seq)) FROM dedup.outbox AS o WHERE o.topic = 'ids-b') AS log,
       (SELECT md5(string_agg(r::text, '|' ORDER BY r.seq)) FROM dedup.outbox_retry AS r WHERE r.topic = 'ids-b') AS retry,
       (SELECT md5(string_agg(d::text, '|' ORDER BY d.seq)) FROM dedup.outbox_dead AS d WHERE d.topic = 'ids-b') AS dead,
       (SELECT md5(string_agg(b::text, '|' ORDER BY b.id, b.rev)) FROM dedup.outbox_batches AS b WHERE b.topic = 'ids-b') AS batches,
       (SELECT md5(string_agg(h::text, '|' ORDER BY h.from_seq)) FROM dedup.outbox_held AS h WHERE h.topic = 'ids-b') AS held,
       (SELECT md5(string_agg(t::text, '|')) FROM dedup.outbox_topics AS t WHERE t.topic = 'ids-b') AS position,
       (SELECT md5(string_agg(k::text, '|' ORDER BY k.key)) FROM dedup.outbox_keys AS k) AS keys;
CREATE TEMP TABLE b_before AS SELECT * FROM b_state;

-- the relay of ids-a: each id of ids-b answers as the unknown one, by the
-- ack and the nack, with and without attempts.  (Each form is called once
-- first, in the same transaction: PL/pgSQL's context names statements of
-- a function's first call in a session, and of a call after an error in
-- the transaction, that other calls, run as simple expressions, do not.)
SET ROLE regress_ids_a;
BEGIN;
SELECT count(DISTINCT regress_ids_error(f, u.id)) AS warmed
FROM b_ids AS u, unnest(ARRAY['SELECT dedup_outbox_ack(%L)', 'SELECT dedup_outbox_ack(%L, ARRAY[1])',
                              'SELECT dedup_outbox_nack(%L, ''1 hour'')',
                              'SELECT dedup_outbox_nack(%L, attempts => ARRAY[2])']) AS f
WHERE u.state = 'unknown';
SELECT b.state,
       regress_ids_error('SELECT dedup_outbox_ack(%L)', b.id)
         = regress_ids_error('SELECT dedup_outbox_ack(%L)', u.id) AS ack_as_unknown,
       regress_ids_error('SELECT dedup_outbox_ack(%L, ARRAY[1])', b.id)
         = regress_ids_error('SELECT dedup_outbox_ack(%L, ARRAY[1])', u.id) AS ack_attempts_as_unknown,
       regress_ids_error('SELECT dedup_outbox_nack(%L, ''1 hour'')', b.id)
         = regress_ids_error('SELECT dedup_outbox_nack(%L, ''1 hour'')', u.id) AS nack_as_unknown,
       regress_ids_error('SELECT dedup_outbox_nack(%L, attempts => ARRAY[2])', b.id)
         = regress_ids_error('SELECT dedup_outbox_nack(%L, attempts => ARRAY[2])', u.id) AS nack_attempts_as_unknown
FROM b_ids AS b, b_ids AS u WHERE u.state = 'unknown' ORDER BY b.state;
-- what each of them answers, but the context (compared above): the same
SELECT DISTINCT split_part(regress_ids_error('SELECT dedup_outbox_ack(%L)', b.id), ' | context: ', 1) AS ack,
                split_part(regress_ids_error('SELECT dedup_outbox_nack(%L)', b.id), ' | context: ', 1) AS nack
FROM b_ids AS b;
-- beside an id of its own topic (handed out: acked), in either order, as
-- beside the unknown one: the whole call fails alike, and its event stays
SELECT b.state,
       regress_ids_error('SELECT dedup_outbox_ack(%L::uuid[] || ''' || :'a_taken' || '''::uuid)', b.id)
         = regress_ids_error('SELECT dedup_outbox_ack(%L::uuid[] || ''' || :'a_taken' || '''::uuid)', u.id)
         AS after_own,
       regress_ids_error('SELECT dedup_outbox_ack(''' || :'a_taken' || '''::uuid || %L::uuid[])', b.id)
         = regress_ids_error('SELECT dedup_outbox_ack(''' || :'a_taken' || '''::uuid || %L::uuid[])', u.id)
         AS before_own
FROM b_ids AS b, b_ids AS u WHERE u.state = 'unknown' ORDER BY b.state;
COMMIT;
-- ids-a's own pending event is still told apart: 55000
SELECT regress_try(pg_catalog.format('SELECT dedup_outbox_ack(ARRAY[%L]::uuid[])', :'a_pending')) AS own_pending;
-- a batch's failed ids name events of it: one of ids-b is left out as an
-- unknown one is (the rest of the batch acked, in a transaction rolled back)
BEGIN;
SELECT dedup_outbox_ack_batch(:a_batch, failed => (SELECT array_agg(id) FROM b_ids WHERE state = 'pending')) AS ack_failed_b;
ROLLBACK;
BEGIN;
SELECT dedup_outbox_ack_batch(:a_batch, failed => (SELECT array_agg(id) FROM b_ids WHERE state = 'unknown')) AS ack_failed_unknown;
ROLLBACK;
RESET ROLE;
-- nothing of ids-b changed
SELECT s.log = b.log AS log_same, s.retry = b.retry AS retry_same, s.dead = b.dead AS dead_same,
       s.batches = b.batches AS batches_same, s.held = b.held AS held_same,
       s.position = b.position AS position_same, s.keys = b.keys AS keys_same
FROM b_state AS s, b_before AS b;

-- the relay of ids-b is answered as before: its pending, held and
-- redriven events were never handed out (55000), its published and
-- waiting ones count 0 (acted on before); a key of 1.0 names no topic: it
-- counts 0 for a relay of every topic only, and is unknown to the others
SET ROLE regress_ids_b;
SELECT b.state, split_part(regress_ids_error('SELECT dedup_outbox_ack(%L)', b.id), ' | context: ', 1) AS relay_b_ack
FROM b_ids AS b WHERE b.state NOT IN ('handed out', 'dead') ORDER BY b.state;
SET ROLE regress_ids_every;
SELECT b.state, split_part(regress_ids_error('SELECT dedup_outbox_nack(%L)', b.id), ' | context: ', 1) AS relay_every_nack
FROM b_ids AS b WHERE b.state IN ('1.0 key', 'unknown', 'published', 'pending') ORDER BY b.state;
-- and acts on what it may relay: the batch handed out, and a dead event
-- (which leaves the dead letters)
SET ROLE regress_ids_b;
SELECT dedup_outbox_ack(ARRAY(SELECT id FROM b_ids WHERE state IN ('handed out', 'dead'))) AS b_acked;
SET ROLE regress_ids_a;
SELECT dedup_outbox_ack(ARRAY[:'a_taken']::uuid[]) AS a_acked;
RESET ROLE;

DROP FUNCTION regress_ids_error(text, uuid);
DROP VIEW b_state;
DROP OWNED BY regress_ids_a, regress_ids_b, regress_ids_every;
DROP ROLE regress_ids_a, regress_ids_b, regress_ids_every;
TRUNCATE dedup.outbox, dedup.outbox_topics, dedup.outbox_batches, dedup.outbox_retry, dedup.outbox_held,
         dedup.outbox_dead, dedup.outbox_keys;
SELECT dedup_reset_scope('ids-b') AS reset;
