-- dedup_begin's 1.1 form, for a persistence layer such as Powertools':
-- a per-call ttl (the record's stay after its lease and after completion),
-- top-level request fields left out of the request's fingerprint, and the
-- stored request's fingerprint in what dedup_begin returns (on mismatch,
-- the other request's).
TRUNCATE dedup.claims;
\pset null '(null)'
SELECT scope, ttl FROM dedup_set_scope('lambda', ttl => '1 day');

-- the ttl given: the processing record expires a ttl after its lease, the
-- complete one a ttl after completion, whatever the scope's
SELECT outcome, attempts, request_fingerprint = dedup_fingerprint('{"order": 1}'::jsonb) AS fp_of_request
FROM dedup_begin('lambda', 'ev-1', '{"order": 1}', '1 minute', '15 minutes');
SELECT expires_at - lease_expires_at AS stay_after_lease FROM dedup_lookup('lambda', 'ev-1');
-- a heartbeat keeps it
SELECT dedup_extend('lambda', 'ev-1', 1, '2 minutes') IS NOT NULL AS extended;
SELECT expires_at - lease_expires_at AS stay_after_heartbeat FROM dedup_lookup('lambda', 'ev-1');
SELECT dedup_complete('lambda', 'ev-1', 200, '{"ok": 1}', attempt => 1);
SELECT expires_at - completed_at AS stay_after_completion FROM dedup_lookup('lambda', 'ev-1');
-- NULL: the scope's ttl, as in 1.0's form
SELECT outcome FROM dedup_begin('lambda', 'ev-2', NULL, NULL, NULL);
SELECT dedup_complete('lambda', 'ev-2', 200, attempt => 1);
SELECT expires_at - completed_at AS scope_ttl FROM dedup_lookup('lambda', 'ev-2');
-- named arguments: the 1.1 form is the one with a ttl
SELECT outcome FROM dedup_begin('lambda', 'ev-3', request => '{}', lease => NULL, ttl => '1 hour');
SELECT expires_at - lease_expires_at AS named_ttl FROM dedup_lookup('lambda', 'ev-3');
-- a takeover is a begin of its own: its ttl, or the scope's
UPDATE dedup.claims SET record.lease_until = clock_timestamp() - interval '1 second' WHERE (record).status = 'p';
SELECT outcome, attempts FROM dedup_begin('lambda', 'ev-3', '{}', NULL, '2 hours');
SELECT expires_at - lease_expires_at AS takers_ttl FROM dedup_lookup('lambda', 'ev-3');
-- every kind of key has the form
SELECT outcome FROM dedup_begin('lambda', 42, '{}', NULL, '3 hours');
SELECT outcome FROM dedup_begin('lambda', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'::uuid, '{}', NULL, '3 hours');
SELECT outcome FROM dedup_begin('lambda', '\x01'::bytea, '{}', NULL, '3 hours');
SELECT outcome FROM dedup_begin('lambda', dedup_fingerprint('x'::text), '{}', NULL, '3 hours');
SELECT count(*) FILTER (WHERE expires_at - (record).lease_until = interval '3 hours') AS with_3_hours
FROM dedup.claims;

-- mismatch shows the stored request's fingerprint, so that a caller can
-- tell which request the key was used with; replay and in_progress too
SELECT outcome, request_fingerprint = dedup_fingerprint('{"order": 1}'::jsonb) AS stored_request,
       response
FROM dedup_begin('lambda', 'ev-1', '{"order": 2}');
SELECT outcome, request_fingerprint = dedup_fingerprint('{"order": 1}'::jsonb) AS stored_request
FROM dedup_begin('lambda', 'ev-1', '{"order": 1}');
-- as text, the fingerprint's 32 hex digits (a row a client reads holds
-- built-in types only), which compares with a dedup_fingerprint
SELECT pg_typeof(b.request_fingerprint) AS begin_type, pg_typeof(l.request_fingerprint) AS lookup_type,
       b.request_fingerprint = dedup_fingerprint('{"order": 1}'::jsonb)::text AS begin_text,
       l.request_fingerprint = dedup_fingerprint('{"order": 1}'::jsonb)::text AS lookup_text
FROM dedup_begin('lambda', 'ev-1', '{"order": 1}') AS b, dedup_lookup('lambda', 'ev-1') AS l;
SELECT outcome, request_fingerprint FROM dedup_begin('lambda', 'ev-2', '{"x": 1}');   -- stored none
SELECT outcome, request_fingerprint FROM dedup_begin('lambda', 'new-1');
SELECT dedup_claim('lambda', 'plain');
SELECT outcome, request_fingerprint FROM dedup_begin('lambda', 'plain', '{"x": 1}');

-- ignore: top-level fields left out of the request's fingerprint, as
-- dedup_fingerprint(jsonb, text[]) leaves them out
SELECT outcome, request_fingerprint = dedup_fingerprint('{"order": 7, "sent_at": "10:00"}'::jsonb, ARRAY['sent_at']) AS as_dedup_fingerprint
FROM dedup_begin('lambda', 'ev-7', '{"order": 7, "sent_at": "10:00"}', NULL, NULL, ARRAY['sent_at']);
SELECT outcome FROM dedup_begin('lambda', 'ev-7', '{"order": 7, "sent_at": "10:05"}', NULL, NULL, ARRAY['sent_at']);
SELECT outcome FROM dedup_begin('lambda', 'ev-7', '{"order": 8, "sent_at": "10:00"}', NULL, NULL, ARRAY['sent_at']);
-- without the ignore list the fields count
SELECT outcome FROM dedup_begin('lambda', 'ev-7', '{"order": 7, "sent_at": "10:05"}');
SELECT outcome FROM dedup_begin('lambda', 'ev-7', '{"order": 7}');
-- an empty list leaves nothing out; NULL elements are skipped
SELECT outcome FROM dedup_begin('lambda', 'ev-8', '{"a": 1}', NULL, NULL, '{}');
SELECT outcome FROM dedup_begin('lambda', 'ev-8', '{"a": 1}', NULL, NULL, ARRAY[NULL]::text[]);
-- to validate a part of a payload, pass that part
SELECT outcome FROM dedup_begin('lambda', 'ev-9', '{"body": {"amount": 5}, "headers": {"x-trace": "a"}}'::jsonb -> 'body');
SELECT outcome FROM dedup_begin('lambda', 'ev-9', '{"body": {"amount": 5}, "headers": {"x-trace": "b"}}'::jsonb -> 'body');

-- bad input: its SQLSTATE, and nothing written
CREATE TEMP TABLE before AS SELECT key, expires_at, record FROM dedup.claims;
SELECT regress_try($$SELECT dedup_begin('lambda', 'bad-1', '{}', NULL, '-1 hour')$$);
SELECT regress_try($$SELECT dedup_begin('lambda', 'bad-1', '{}', NULL, '0 seconds')$$);
SELECT regress_try($$SELECT dedup_begin('lambda', 'bad-1', '{}', NULL, '200 years')$$);
SELECT regress_try($$SELECT dedup_begin('lambda', 'bad-1', '{}', NULL, NULL, '{{a},{b}}')$$);
SELECT regress_try($$SELECT dedup_begin('lambda', 'bad-1', NULL, NULL, NULL, ARRAY['a'])$$);
SELECT regress_try($$SELECT dedup_begin('lambda', NULL::text, '{}', NULL, '1 hour')$$);
SELECT regress_try($$SELECT dedup_begin('lambda', 'bad-1', ttl => '1 hour')$$);
SELECT (SELECT count(*) FROM (SELECT key, expires_at, record FROM dedup.claims EXCEPT SELECT * FROM before) AS d)
     + (SELECT count(*) FROM (SELECT * FROM before EXCEPT SELECT key, expires_at, record FROM dedup.claims) AS d) AS rows_changed;
DROP TABLE before;
SELECT dedup_reset_scope('lambda');
TRUNCATE dedup.claims;
