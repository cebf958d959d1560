-- Idempotency records: every outcome of dedup_begin, complete, release,
-- lookup, and every wrong transition with its SQLSTATE and nothing changed.
-- make a record look as if time had passed: its lease ended a second ago
CREATE FUNCTION pg_temp.end_lease() RETURNS void LANGUAGE sql AS $$
  UPDATE dedup.claims
  SET record.lease_until = clock_timestamp() - interval '1 second'
  WHERE (record).status = 'p'
$$;
CREATE FUNCTION pg_temp.expire_all() RETURNS void LANGUAGE sql AS $$
  UPDATE dedup.claims SET expires_at = clock_timestamp() - interval '1 second'
$$;
\pset null '(null)'

-- started: a processing record with a lease, attempt 1
SELECT outcome, status, response_code, response, attempts,
       lease_expires_at - first_seen_at BETWEEN interval '4 minutes 59 seconds' AND interval '5 minutes' AS default_lease
FROM dedup_begin('charges', 'idem-1', request => '{"amount": 100, "currency": "eur"}');
-- in_progress while the lease is live: another caller must not do the work
SELECT outcome, status, attempts FROM dedup_begin('charges', 'idem-1', request => '{"currency": "eur", "amount": 100}');
-- mismatch: the same key with another request (HTTP 422); no response leaks
SELECT outcome, status, response FROM dedup_begin('charges', 'idem-1', request => '{"amount": 999, "currency": "eur"}');
SELECT outcome FROM dedup_begin('charges', 'idem-1');
-- lookup shows the record and changes nothing
SELECT kind, status, attempts, completed_at, response_code, response,
       request_fingerprint = dedup_fingerprint('{"amount": 100, "currency": "eur"}'::jsonb) AS request_kept,
       expires_at - lease_expires_at BETWEEN interval '23 hours 59 minutes' AND interval '1 day' AS expires_ttl_after_lease
FROM dedup_lookup('charges', 'idem-1');

-- complete stores the response; begin then replays it
SELECT dedup_complete('charges', 'idem-1', 201, '{"charge": "ch_1", "status": "succeeded"}', attempt => 1);
SELECT outcome, status, response_code, response, attempts, lease_expires_at
FROM dedup_begin('charges', 'idem-1', request => '{"amount": 100, "currency": "eur"}');
SELECT kind, status, attempts, completed_at IS NOT NULL AS completed, response_code,
       expires_at - completed_at BETWEEN interval '23 hours 59 minutes' AND interval '1 day' AS expires_after_ttl
FROM dedup_lookup('charges', 'idem-1');
-- a replay never changes the record
SELECT outcome FROM dedup_begin('charges', 'idem-1', request => '{"amount": 100, "currency": "eur"}');
SELECT attempts FROM dedup_lookup('charges', 'idem-1');

-- error responses are stored and replayed too
SELECT outcome FROM dedup_begin('charges', 'idem-2');
SELECT dedup_complete('charges', 'idem-2', 402, '{"error": "card_declined"}');
SELECT outcome, response_code, response FROM dedup_begin('charges', 'idem-2');

-- release gives the key back: it reads as absent, and the next begin
-- starts fresh with the attempts counting on (2), so that the released
-- holder's attempt 1 can never pass for a later holder's
SELECT outcome, attempts FROM dedup_begin('charges', 'idem-3', lease => '10 minutes');
SELECT dedup_release('charges', 'idem-3');
SELECT count(*) AS released FROM dedup_lookup('charges', 'idem-3');
SELECT regress_try($$SELECT dedup_complete('charges', 'idem-3', 200, '{}', attempt => 1)$$);
SELECT regress_try($$SELECT dedup_release('charges', 'idem-3', attempt => 1)$$);
SELECT outcome, attempts FROM dedup_begin('charges', 'idem-3', request => '{"other": "body"}');
SELECT regress_try($$SELECT dedup_complete('charges', 'idem-3', 200, '{}', attempt => 1)$$);
SELECT status, attempts FROM dedup_lookup('charges', 'idem-3');
-- a released key can be claimed like an absent one
SELECT outcome FROM dedup_begin('charges', 'idem-5');
SELECT dedup_release('charges', 'idem-5', attempt => 1);
SELECT dedup_claim('charges', 'idem-5') AS claimed_after_release;
SELECT kind, status FROM dedup_lookup('charges', 'idem-5');

-- a lease that passed is taken over by the next begin: attempt + 1
SELECT pg_temp.end_lease();
SELECT outcome, status, attempts FROM dedup_begin('charges', 'idem-3', request => '{"other": "body"}');
-- the old holder (attempt 2) can neither complete nor release (55006)
SELECT regress_try($$SELECT dedup_complete('charges', 'idem-3', 200, '{}', attempt => 2)$$);
SELECT regress_try($$SELECT dedup_release('charges', 'idem-3', attempt => 2)$$);
SELECT status, attempts FROM dedup_lookup('charges', 'idem-3');
-- the new holder can
SELECT dedup_complete('charges', 'idem-3', 200, '{"ok": true}', attempt => 3);
SELECT outcome, response FROM dedup_begin('charges', 'idem-3', request => '{"other": "body"}');
-- the old holder coming back after the taker completed: still 55006, and
-- the taker's response stays
SELECT regress_try($$SELECT dedup_complete('charges', 'idem-3', 500, '{}', attempt => 2)$$);
SELECT regress_try($$SELECT dedup_release('charges', 'idem-3', attempt => 2)$$);
SELECT status, attempts, response_code, response FROM dedup_lookup('charges', 'idem-3');

-- without an attempt, a caller is the holder: once the key was taken over,
-- it is refused (55006) and the taker's record is left as it is,
-- whether the taker is still processing or has completed since
SELECT outcome, attempts FROM dedup_begin('pay', 'idem-7');
SELECT pg_temp.end_lease();
SELECT outcome, attempts FROM dedup_begin('pay', 'idem-7');
SELECT regress_try($$SELECT dedup_complete('pay', 'idem-7', 500, '{"by": "A (stale)"}')$$);
SELECT regress_try($$SELECT dedup_release('pay', 'idem-7')$$);
SELECT status, attempts, response_code, response FROM dedup_lookup('pay', 'idem-7');
SELECT dedup_complete('pay', 'idem-7', 201, '{"by": "B"}', attempt => 2);
SELECT regress_try($$SELECT dedup_complete('pay', 'idem-7', 500, '{"by": "A (stale)"}')$$);
SELECT outcome, response_code, response FROM dedup_begin('pay', 'idem-7');
-- a release is its holder giving the key back, not a takeover: the next
-- holder completes without an attempt, as an HTTP handler written with the
-- short signatures does (begin, release on a provider failure; begin,
-- complete on the retry), and so does the one after it
SELECT outcome, attempts FROM dedup_begin('pay', 'idem-8');
SELECT dedup_release('pay', 'idem-8');
SELECT outcome, attempts FROM dedup_begin('pay', 'idem-8');
SELECT dedup_release('pay', 'idem-8');
SELECT outcome, attempts FROM dedup_begin('pay', 'idem-8');
SELECT dedup_complete('pay', 'idem-8', 201, '{"by": "third"}');
SELECT status, attempts, response_code, response FROM dedup_lookup('pay', 'idem-8');
-- a takeover stays in the row's memory across a release: after it, a caller
-- without an attempt may still be the holder that lost its lease
SELECT outcome, attempts FROM dedup_begin('pay', 'idem-9');
SELECT pg_temp.end_lease();
SELECT outcome, attempts FROM dedup_begin('pay', 'idem-9');
SELECT dedup_release('pay', 'idem-9', attempt => 2);
SELECT outcome, attempts FROM dedup_begin('pay', 'idem-9');
SELECT regress_try($$SELECT dedup_complete('pay', 'idem-9', 500, '{"by": "A (stale)"}')$$);
SELECT status, attempts, response_code FROM dedup_lookup('pay', 'idem-9');
SELECT dedup_complete('pay', 'idem-9', 201, '{"by": "C"}', attempt => 3);
SELECT status, attempts, response_code, response FROM dedup_lookup('pay', 'idem-9');
-- never past an expiry: that holder has been gone a whole ttl, and the
-- next holder completes without an attempt, whether or not the cleanup has
-- deleted the expired row yet
UPDATE dedup.claims SET expires_at = clock_timestamp() - interval '1 second'
WHERE (record).response->>'by' = 'C';
SELECT outcome, attempts FROM dedup_begin('pay', 'idem-9');
SELECT dedup_complete('pay', 'idem-9', 201, '{"by": "D"}');
SELECT status, attempts, response FROM dedup_lookup('pay', 'idem-9');
-- no attempt number wraps: a key begun 2^31 - 1 times is refused (54000),
-- nothing written
UPDATE dedup.claims SET record.attempts = 2147483647, record.status = 'r'
WHERE (record).response->>'by' = 'D';
CREATE TEMP TABLE idem9 AS SELECT * FROM dedup.claims WHERE (record).response->>'by' = 'D';
SELECT regress_try($$SELECT * FROM dedup_begin('pay', 'idem-9')$$) AS no_attempt_left;
SELECT count(*) AS unchanged FROM dedup.claims AS c JOIN idem9 AS b ON b.key = c.key
WHERE c.record::text = b.record::text AND c.expires_at = b.expires_at;

-- without an attempt, complete needs a live lease (55006 once it passed)
SELECT outcome FROM dedup_begin('charges', 'idem-4');
SELECT pg_temp.end_lease();
SELECT regress_try($$SELECT dedup_complete('charges', 'idem-4', 200)$$);
SELECT regress_try($$SELECT dedup_release('charges', 'idem-4')$$);
-- with its attempt, a holder whose lease passed but was not taken over may finish
SELECT dedup_complete('charges', 'idem-4', 200, NULL, attempt => 1);
SELECT status, response_code, response FROM dedup_lookup('charges', 'idem-4');

-- wrong transitions: a clear error and nothing changed
SELECT regress_try($$SELECT dedup_complete('charges', 'never-begun', 200)$$);
SELECT regress_try($$SELECT dedup_release('charges', 'never-begun')$$);
SELECT regress_try($$SELECT dedup_complete('charges', 'idem-1', 200, '{}')$$);
SELECT regress_try($$SELECT dedup_release('charges', 'idem-1')$$);
SELECT regress_try($$SELECT dedup_complete('charges', 'idem-1', 200, '{}', attempt => 0)$$);
SELECT response_code, response FROM dedup_lookup('charges', 'idem-1');

-- begin and complete in one transaction: nothing visible until commit
BEGIN;
SELECT outcome FROM dedup_begin('orders', 'o-1', '{"sku": 7}');
SELECT dedup_complete('orders', 'o-1', 201, '{"order": 1}');
SELECT status FROM dedup_lookup('orders', 'o-1');
ROLLBACK;
SELECT count(*) AS nothing_after_rollback FROM dedup_lookup('orders', 'o-1');
SELECT outcome FROM dedup_begin('orders', 'o-1', '{"sku": 7}');

-- claims and records share one key space per scope
SELECT dedup_claim('shared', 'k-1') AS claimed;
SELECT outcome, status, response_code, attempts FROM dedup_begin('shared', 'k-1');
SELECT kind, status FROM dedup_lookup('shared', 'k-1');
SELECT regress_try($$SELECT dedup_complete('shared', 'k-1', 200)$$);
SELECT outcome FROM dedup_begin('shared', 'k-2');
SELECT dedup_claim('shared', 'k-2') AS claim_of_processing_key;
-- ...and other scopes do not see each other's keys
SELECT outcome FROM dedup_begin('other', 'k-1');

-- begin after expiry starts fresh (no old response), the attempts counting
-- on from the row the cleanup has not deleted yet: attempt 1 of the old life
-- cannot act on the new one
SELECT pg_temp.expire_all();
SELECT outcome, attempts, response FROM dedup_begin('charges', 'idem-1', request => '{"amount": 5}');
SELECT regress_try($$SELECT dedup_complete('charges', 'idem-1', 200, '{}', attempt => 1)$$);
SELECT count(*) AS expired_invisible FROM dedup_lookup('charges', 'idem-2');
SELECT regress_try($$SELECT dedup_complete('charges', 'idem-2', 200)$$);
-- once the row is gone (as the cleanup deletes it), the count starts over
SELECT pg_temp.expire_all();
DELETE FROM dedup.claims WHERE expires_at < clock_timestamp();
SELECT outcome, attempts FROM dedup_begin('charges', 'idem-1');

-- a scope's lease and ttl apply
SELECT ttl, lease FROM dedup_set_scope('short', ttl => '1 hour', lease => '30 seconds');
SELECT lease_expires_at - first_seen_at AS lease FROM dedup_begin('short', 's-1');
SELECT dedup_complete('short', 's-1', 204);
SELECT expires_at - completed_at AS ttl FROM dedup_lookup('short', 's-1');
SELECT dedup_reset_scope('short');

-- bad input
SELECT stmt, regress_try(stmt) FROM (VALUES
  ($$SELECT dedup_begin(NULL, 'k')$$),
  ($$SELECT dedup_begin('s', NULL)$$),
  ($$SELECT dedup_begin('', 'k')$$),
  ($$SELECT dedup_begin('s', '')$$),
  ($$SELECT dedup_begin('s', 'k', NULL, lease => '0')$$),
  ($$SELECT dedup_begin('s', 'k', NULL, lease => '-5 minutes')$$),
  ($$SELECT dedup_begin('s', 'k', '{bad json')$$),
  ($$SELECT dedup_complete(NULL, 'k', 200)$$),
  ($$SELECT dedup_complete('s', NULL, 200)$$),
  ($$SELECT dedup_release('s', '')$$),
  ($$SELECT dedup_release('s', 'k', attempt => -1)$$),
  ($$SELECT * FROM dedup_lookup(NULL, 'k')$$),
  ($$SELECT * FROM dedup_lookup('s', NULL)$$)) AS t(stmt);
SELECT count(*) FILTER (WHERE (record).status IS NOT NULL) AS records,
       count(*) FILTER (WHERE (record).status IS NULL) AS claims
FROM dedup.claims WHERE expires_at > clock_timestamp();

-- read-only transactions may look up, not begin
BEGIN READ ONLY;
SELECT kind, status FROM dedup_lookup('short', 's-1');
SELECT regress_try($$SELECT dedup_begin('orders', 'o-2')$$);
ROLLBACK;

TRUNCATE dedup.claims;

-- a large response is stored out of line (TOAST) and replayed whole
SELECT outcome FROM dedup_begin('big', 'b-1');
SELECT dedup_complete('big', 'b-1', 200, jsonb_build_object('blob', repeat('x', 2000000)));
SELECT outcome, length(response->>'blob') AS blob_length FROM dedup_begin('big', 'b-1');
SELECT pg_relation_size(reltoastrelid) > 0 AS toasted FROM pg_class WHERE oid = 'dedup.claims'::regclass;

-- several writes of one key in one statement see each other
SELECT (dedup_begin('stmt', 'k-1')).outcome AS began,
       dedup_complete('stmt', 'k-1', 200, '{"in": "one statement"}') AS completed,
       (dedup_begin('stmt', 'k-1')).outcome AS then;
SELECT dedup_claim('stmt', 'k-2', ttl => '1 microsecond') AS first,
       pg_sleep(0.001) IS NOT NULL AS slept,
       dedup_claim('stmt', 'k-2') AS after_its_expiry;
SELECT kind, status, response FROM dedup_lookup('stmt', 'k-1');
TRUNCATE dedup.claims;
