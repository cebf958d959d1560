# test/fixture.sh: a database holding every kind of dedup row, for the
# scripted tests that must show rows survive an operation (pg_dump and
# pg_restore, ALTER EXTENSION UPDATE).  Source it after scripts/lib.sh.
#
#   fixture_fill DB      claims of three key types, processing and complete
#                        records with responses, a released record's
#                        tombstone, scope settings, outbox events pending,
#                        in flight and dead, outbox keys, the outbox's
#                        sequence advanced
#   fixture_snapshot DB  what every dedup table holds, one line per table
#   fixture_check DB     the rows behave as they did where they were made:
#                        a claimed key is a duplicate, a completed record
#                        replays its response, a processing record is in
#                        progress with its attempt, a released one goes on
#                        at attempt 2, new events are numbered after the
#                        old ones, the dead event can be redriven (changes
#                        the database)
#
# Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.

fixture_fill() {
	q -d "$1" <<'SQL'
SELECT dedup_set_scope('orders', ttl => '7 days', lease => '90 seconds', retention => '3 days',
                       max_attempts => 4);
SELECT dedup_set_scope('events', lease => '1 hour', max_attempts => 2);
SELECT count(*) FROM dedup_claim_batch('orders', ARRAY['o-1', 'o-2', 'o-3']);
SELECT dedup_claim('orders', '\x00ff'::bytea), dedup_claim('orders', gen_random_uuid());
SELECT outcome FROM dedup_begin('charges', 'c-done', '{"amount": 10}');
SELECT dedup_complete('charges', 'c-done', 201, '{"charge": "ch_1"}', attempt => 1);
SELECT outcome FROM dedup_begin('charges', 'c-busy', '{"amount": 20}', lease => '1 hour');
SELECT outcome FROM dedup_begin('charges', 'c-released');
SELECT dedup_release('charges', 'c-released', attempt => 1);
SELECT count(dedup_outbox_put('events', 'e-' || g, jsonb_build_object('n', g),
                              aggregate_id => 'a-' || (g % 3), type => 'Thing'))
FROM generate_series(1, 12) AS g;
SELECT count(*) FROM dedup_outbox_take('events', 2);                 -- two in flight
SELECT dedup_outbox_nack(array_agg(id), '0 seconds', 'boom') FROM dedup_outbox_take('events', 1);
SELECT dedup_outbox_nack(array_agg(id), '0 seconds', 'boom again') FROM dedup_outbox_take('events', 1);
SQL
	check "$1: the fixture's outbox has 9 pending, 2 in flight and 1 dead event" \
		"$(q -d "$1" -c "SELECT pending || ' ' || in_flight || ' ' || dead FROM dedup_outbox_stats('events')")" \
		"9 2 1"
}

fixture_snapshot() {	# the columns of 1.0, named, so that a later version may add some
	q -d "$1" <<'SQL'
SELECT 'scopes ' || md5(coalesce(string_agg(t::text, '|' ORDER BY t::text), ''))
  FROM (SELECT scope, ttl, lease, retention, max_attempts FROM dedup.scopes) AS t;
SELECT 'claims ' || count(*) || ' ' || md5(string_agg(t::text, '|' ORDER BY t::text))
  FROM (SELECT key, expires_at, (record).status, (record).attempts, (record).lease_until,
               (record).request, (record).response_code, (record).response, (record).first_seen,
               (record).completed_at
          FROM dedup.claims) AS t;
SELECT CASE WHEN to_regclass('dedup.outbox_retry') IS NULL THEN
       -- 1.0: every event not yet published is a row of dedup.outbox
       $q$SELECT 'outbox ' || count(*) || ' ' || md5(string_agg(t::text, '|' ORDER BY t::text))
            FROM (SELECT seq, id, topic, aggregatetype, aggregateid, type, payload, headers, created_at,
                         CASE WHEN status = 't' THEN 'taken' ELSE 'pending' END AS state, attempts,
                         CASE WHEN attempts > 0 THEN visible_at END AS visible, last_error
                    FROM dedup.outbox) AS t$q$
       ELSE
       -- 1.1: the log past each topic's position, outbox_retry, batches, and held events
       $q$SELECT 'outbox ' || count(*) || ' ' || md5(string_agg(t::text, '|' ORDER BY t::text))
            FROM (SELECT o.seq, o.id, o.topic, o.aggregatetype, o.aggregateid, o.type, o.payload,
                         o.headers, o.created_at, 'pending' AS state, 0 AS attempts,
                         NULL::timestamptz AS visible, NULL::text AS last_error
                    FROM dedup.outbox AS o
                    LEFT JOIN dedup.outbox_topics AS p
                           ON p.part::text = o.part::text AND p.topic = o.topic
                   WHERE o.seq >= coalesce(p.next_seq, 0)
                     AND NOT EXISTS (SELECT FROM dedup.outbox_retry AS r
                                     WHERE r.part::text = o.part::text AND r.id = o.id)
                  UNION ALL
                  SELECT r.seq, r.id, r.topic, r.aggregatetype, r.aggregateid, r.type, r.payload,
                         r.headers, r.created_at, CASE WHEN b.busy THEN 'taken' ELSE 'pending' END,
                         r.attempts, CASE WHEN b.busy THEN b.lease_until WHEN r.attempts > 0 THEN r.visible_at END,
                         r.last_error
                    FROM dedup.outbox_retry AS r
                    LEFT JOIN dedup.outbox_batches AS b
                           ON b.part::text = r.part::text
                          AND r.batch = dedup.outbox_batch_id(b.part, b.slot, b.generation) AND b.busy
                  UNION ALL
                  SELECT m.seq, m.id, b.topic, m.aggregatetype, m.aggregateid, m.type, m.payload,
                         m.headers, m.created_at, 'taken', m.attempts, b.lease_until, NULL::text
                    FROM dedup.outbox_batches AS b,
                         dedup.outbox_members(b.part, b.topic, b.first_seq, b.last_seq, b.settled,
                                              b.attempt, b.retried,
                                              dedup.outbox_batch_id(b.part, b.slot, b.generation),
                                              b.extra) AS m
                   WHERE b.busy AND NOT m.in_retry
                  UNION ALL
                  SELECT o.seq, o.id, o.topic, o.aggregatetype, o.aggregateid, o.type, o.payload,
                         o.headers, o.created_at, 'pending', 0, NULL::timestamptz, NULL::text
                    FROM dedup.outbox_held AS h
                    JOIN dedup.outbox AS o
                      ON o.part::text = h.part::text AND o.topic = h.topic
                     AND o.aggregateid = h.aggregateid AND o.seq BETWEEN h.from_seq AND h.upto_seq) AS t$q$
       END AS outbox_snapshot \gset
:outbox_snapshot;
SELECT 'outbox_dead ' || count(*) || ' ' || md5(string_agg(t::text, '|' ORDER BY t::text))
  FROM (SELECT seq, id, topic, aggregatetype, aggregateid, type, payload, headers, created_at,
               attempts, last_error, died_at
          FROM dedup.outbox_dead) AS t;
SELECT 'outbox_keys ' || count(*) || ' ' || md5(string_agg(t::text, '|' ORDER BY t::text))
  FROM (SELECT key, expires_at, record IS NULL FROM dedup.outbox_keys) AS t;
SELECT 'outbox_seq ' || last_value FROM dedup.outbox_seq_seq;
SQL
}

fixture_check() {
	local db=$1
	check "$db: scope settings" \
		"$(q -d "$db" -c "SELECT ttl || ' ' || lease || ' ' || retention || ' ' || max_attempts FROM dedup_scope('orders')")" \
		"7 days 00:01:30 3 days 4"
	check "$db: claimed keys are duplicates" \
		"$(q -d "$db" -c "SELECT count(*) FROM dedup_claim_batch('orders', ARRAY['o-1', 'o-2', 'o-3', 'o-4'])")" 1
	check "$db: a bytea key is a duplicate" "$(q -d "$db" -c "SELECT dedup_claim('orders', '\x00ff'::bytea)")" f
	check "$db: a completed record replays its response" \
		"$(q -d "$db" -c "SELECT outcome || ' ' || response_code || ' ' || response FROM dedup_begin('charges', 'c-done', '{\"amount\": 10}')")" \
		'replay 201 {"charge": "ch_1"}'
	check "$db: a processing record is in progress, attempt 1" \
		"$(q -d "$db" -c "SELECT outcome || ' ' || attempts FROM dedup_begin('charges', 'c-busy', '{\"amount\": 20}')")" \
		"in_progress 1"
	check "$db: a released record starts again at attempt 2" \
		"$(q -d "$db" -c "SELECT outcome || ' ' || attempts FROM dedup_begin('charges', 'c-released')")" \
		"started 2"
	check "$db: outbox figures" \
		"$(q -d "$db" -c "SELECT pending || ' ' || in_flight || ' ' || dead FROM dedup_outbox_stats('events')")" \
		"9 2 1"
	check "$db: a put of an existing key returns the same event" \
		"$(q -d "$db" -c "SELECT dedup_outbox_put('events', 'e-5', '{}') = (SELECT dedup_outbox_put('events', 'e-5', '{}'))")" t
	check "$db: a new event is numbered after the old ones" \
		"$(q -d "$db" -c "SELECT dedup_outbox_put('events', 'e-new', '{}') IS NOT NULL; SELECT seq > (SELECT max(seq) FROM dedup.outbox WHERE id <> o.id) FROM dedup.outbox AS o WHERE id = (SELECT dedup_outbox_put('events', 'e-new', '{}'))" | tail -n 1)" t
	check "$db: the dead event can be redriven" "$(q -d "$db" -c "SELECT dedup_outbox_redrive('events')")" 1
	check "$db: the relay holding the two events in flight acks them, at the attempt it was given" \
		"$(q -d "$db" -c "SELECT dedup_outbox_ack(ARRAY[dedup_outbox_put('events', 'e-1', '{}'), dedup_outbox_put('events', 'e-2', '{}')], ARRAY[1, 1])")" 2
	# a relay drains the rest: each event once, each aggregate's in order
	check "$db: the rest goes out once each (9 pending, the redriven one, the new one), each aggregate in order" \
		"$(q -d "$db" <<'SQL'
CREATE TEMP TABLE cur AS SELECT * FROM dedup_outbox_take_batch('events', 1) LIMIT 0;
CREATE TEMP TABLE drained (n serial, key integer, agg text);
DO $$
BEGIN
    LOOP
        DELETE FROM cur;
        INSERT INTO cur SELECT * FROM dedup_outbox_take_batch('events', 5);
        EXIT WHEN NOT FOUND;
        INSERT INTO drained (key, agg) SELECT (payload->>'n')::integer, aggregateid FROM cur ORDER BY created_at, (payload->>'n')::integer;
        PERFORM dedup_outbox_ack_batch((SELECT max(batch_id) FROM cur));
    END LOOP;
END
$$;
SELECT count(*) || ' ' || count(DISTINCT coalesce(key, 0)) || ' '
       || bool_and(ordered) FROM (
    SELECT key, coalesce(key >= max(key) OVER (PARTITION BY agg ORDER BY n ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW), true) AS ordered
    FROM drained) AS d;
SQL
)" "11 11 true"
}
