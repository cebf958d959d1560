-- dedup_claim and dedup_claim_batch in one session: first time, duplicate,
-- scopes apart, rollback, savepoints, expiry, key types and batches.

-- The stored key, computed independently of the C code with the built-in
-- sha256(): the first 16 bytes of SHA-256 over the domain tag, the scope's
-- length and bytes, and the key's bytes.
CREATE FUNCTION pg_temp.stored_key(scope text, key bytea) RETURNS dedup_fingerprint
LANGUAGE sql IMMUTABLE AS $$
  SELECT encode(substring(sha256('dedup/v1/claim'::bytea || '\x00'::bytea
                                 || int4send(octet_length(scope))
                                 || convert_to(scope, 'UTF8') || key)
                          FROM 1 FOR 16), 'hex')::dedup_fingerprint
$$;
-- make a claim look expired, as time passing would
CREATE FUNCTION pg_temp.expire(text, text) RETURNS bigint
LANGUAGE sql AS $$
  WITH u AS (UPDATE dedup.claims SET expires_at = clock_timestamp() - interval '1 second'
             WHERE key = pg_temp.stored_key($1, convert_to($2, 'UTF8')) RETURNING 1)
  SELECT count(*) FROM u
$$;

-- true the first time, false for a live duplicate
SELECT dedup_claim('payments', 'msg-1') AS first;
SELECT dedup_claim('payments', 'msg-1') AS again;
-- another key, and the same key in another scope, are new
SELECT dedup_claim('payments', 'msg-2') AS other_key;
SELECT dedup_claim('refunds', 'msg-1') AS other_scope;
-- one row per claim, 16-byte keys
SELECT count(*), min(pg_column_size(key)), max(pg_column_size(key)) FROM dedup.claims;
-- the stored key is the fingerprint of scope and key
SELECT count(*) AS known_digests FROM dedup.claims
WHERE key IN (pg_temp.stored_key('payments', 'msg-1'), pg_temp.stored_key('payments', 'msg-2'),
              pg_temp.stored_key('refunds', 'msg-1'));
SELECT pg_temp.stored_key('s', 'k') = '7a6ec71be3fb8730f795bd8601b11853' AS helper_agrees;
-- the scope is length-prefixed: ('ab','c') and ('a','bc') are different keys
SELECT dedup_claim('ab', 'c') AS ab_c, dedup_claim('a', 'bc') AS a_bc;

-- a rolled-back claim leaves no trace
BEGIN;
SELECT dedup_claim('payments', 'msg-3') AS in_tx;
SELECT dedup_claim('payments', 'msg-3') AS dup_in_same_tx;
ROLLBACK;
SELECT count(*) AS after_rollback FROM dedup.claims;
SELECT dedup_claim('payments', 'msg-3') AS after_rollback_claim;

-- a claim rolled back to a savepoint leaves no trace either
BEGIN;
SAVEPOINT a;
SELECT dedup_claim('payments', 'msg-4') AS in_savepoint;
ROLLBACK TO SAVEPOINT a;
SELECT dedup_claim('payments', 'msg-4') AS after_savepoint;
COMMIT;
SELECT dedup_claim('payments', 'msg-4') AS committed;

-- expiry is decided at claim time from the stored expiry: an expired row
-- that is still present counts as absent, and the new claim replaces it
SELECT dedup_claim('short', 'e-1', ttl => '1 hour') AS fresh;
SELECT pg_temp.expire('short', 'e-1');
SELECT count(*) AS expired_rows FROM dedup.claims WHERE expires_at <= clock_timestamp();
SELECT dedup_claim('short', 'e-1', ttl => '1 hour') AS replaced;
SELECT count(*) AS expired_rows FROM dedup.claims WHERE expires_at <= clock_timestamp();
SELECT dedup_claim('short', 'e-1', ttl => '1 hour') AS live_again;
-- replacing did not add a row
SELECT count(*) AS rows_total FROM dedup.claims;
-- a replacement that rolls back leaves the expired row expired
SELECT pg_temp.expire('short', 'e-1');
BEGIN;
SELECT dedup_claim('short', 'e-1', ttl => '1 hour') AS replaced_in_tx;
ROLLBACK;
SELECT count(*) AS still_expired FROM dedup.claims WHERE expires_at <= clock_timestamp();
SELECT dedup_claim('short', 'e-1', ttl => '1 hour') AS replaced_after_rollback;
-- the replacement carries the new expiry
SELECT expires_at - clock_timestamp() BETWEEN interval '59 minutes' AND interval '1 hour' AS new_expiry
FROM dedup.claims WHERE key = pg_temp.stored_key('short', 'e-1');
-- a real short ttl runs out
SELECT dedup_claim('short', 'e-2', ttl => '10 milliseconds') AS tiny_ttl;
SELECT pg_sleep(0.05);
SELECT dedup_claim('short', 'e-2', ttl => '10 milliseconds') AS after_expiry;

-- key types: keys are byte strings
SELECT dedup_claim('types', 'abc'::text) AS text_key;
SELECT dedup_claim('types', '\x616263'::bytea) AS same_bytes_as_bytea;
SELECT dedup_claim('types', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'::uuid) AS uuid_key;
SELECT dedup_claim('types', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'::uuid) AS uuid_again;
SELECT dedup_claim('types', '\xa0eebc999c0b4ef8bb6d6bb9bd380a11'::bytea) AS uuid_as_bytea;
SELECT dedup_claim('types', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'::text) AS uuid_text_differs;
-- content keys: the fingerprint of a payload, whatever its key order
SELECT dedup_claim('content', dedup_fingerprint('{"order": 1, "total": 9.50}'::jsonb)) AS payload;
SELECT dedup_claim('content', dedup_fingerprint('{"total": 9.5, "order": 1}'::jsonb)) AS same_payload;
SELECT dedup_claim('content', dedup_fingerprint('{"order": 1, "total": 9.50, "attempt": 2}'::jsonb,
                                                ARRAY['attempt'])) AS retried_payload;
-- keys of any length, never truncated
SELECT dedup_claim('long', repeat('k', 1000000) || 'a') AS long_a;
SELECT dedup_claim('long', repeat('k', 1000000) || 'b') AS long_b;
SELECT dedup_claim('long', repeat('k', 1000000) || 'a') AS long_a_again;
-- any bytes valid in the encoding
SELECT dedup_claim('unicode', 'ключ-🔑') AS unicode, dedup_claim('unicode', 'ключ-🔑') AS unicode_again;

-- batches: the keys that were new, in the order given, each at most once
SELECT * FROM dedup_claim_batch('batch', ARRAY['b-3', 'b-1', 'b-2']);
SELECT * FROM dedup_claim_batch('batch', ARRAY['b-4', 'b-1', 'b-5', 'b-4', 'b-3', 'b-6']);
SELECT count(*) AS empty_batch FROM dedup_claim_batch('batch', ARRAY[]::text[]);
SELECT dedup_claim('batch', 'b-6') AS single_sees_batch;
SELECT * FROM dedup_claim_batch('batch', ARRAY['\x01', '\x02']::bytea[]);
SELECT * FROM dedup_claim_batch('batch', ARRAY['\x02', '\x03']::bytea[]);
SELECT * FROM dedup_claim_batch('batch', ARRAY['a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11',
                                               '00000000-0000-0000-0000-000000000001']::uuid[]);
SELECT * FROM dedup_claim_batch('batch', ARRAY[dedup_fingerprint('{"a":1}'::jsonb)]);
SELECT * FROM dedup_claim_batch('batch', ARRAY[dedup_fingerprint('{ "a" : 1.0 }'::jsonb)]);
-- a batch rolls back with its transaction
BEGIN;
SELECT count(*) FROM dedup_claim_batch('batch', ARRAY(SELECT 'r-' || i FROM generate_series(1, 500) i));
ROLLBACK;
SELECT count(*) FROM dedup_claim_batch('batch', ARRAY(SELECT 'r-' || i FROM generate_series(1, 500) i));
SELECT count(*) FROM dedup_claim_batch('batch', ARRAY(SELECT 'r-' || i FROM generate_series(1, 600) i));
-- a batch with expired keys replaces them, and only them
SELECT pg_temp.expire('batch', 'r-7') + pg_temp.expire('batch', 'r-555') AS expired;
SELECT count(*) AS claims_before FROM dedup.claims;
SELECT * FROM dedup_claim_batch('batch', ARRAY(SELECT 'r-' || i FROM generate_series(1, 600) i));
SELECT count(*) AS claims_after FROM dedup.claims;

-- the nowait form answers like the waiting one when nobody else holds the key
SELECT dedup_claim('nowait', 'n-1', nowait => true) AS nowait_first;
SELECT dedup_claim('nowait', 'n-1', nowait => true) AS nowait_dup;

-- a claim reads only what it decides on: a record's expiry and status, never
-- its stored response.  10 completed records with ~1 MB responses (random
-- hex: stored out of line, uncompressed, ~480 TOAST chunks each); claiming
-- their keys, by batch and one by one, may read at most a few TOAST blocks
-- a key (the first chunk), not the responses (1.0 read all ~4,800 chunks
-- and kept every response in memory until the batch ended).
DO $$
BEGIN
    FOR i IN 1..10 LOOP
        PERFORM dedup_begin('big', 'r-' || i);
        PERFORM dedup_complete('big', 'r-' || i, 200, jsonb_build_object('blob',
            (SELECT string_agg(md5(i || '-' || g), '') FROM generate_series(1, 30000) AS g)));
    END LOOP;
END
$$;
CREATE FUNCTION pg_temp.toast_blocks_fetched() RETURNS bigint LANGUAGE sql AS $$
  SELECT sum(pg_stat_get_xact_blocks_fetched(r))
  FROM pg_class AS c,
       LATERAL (SELECT c.reltoastrelid UNION ALL
                SELECT i.indexrelid FROM pg_index AS i WHERE i.indrelid = c.reltoastrelid) AS t(r)
  WHERE c.oid = 'dedup.claims'::regclass
$$;
SELECT pg_size_pretty(pg_relation_size(reltoastrelid)) AS toast_size
FROM pg_class WHERE oid = 'dedup.claims'::regclass;
BEGIN;
SELECT pg_temp.toast_blocks_fetched() AS before \gset
SELECT count(*) AS new_in_batch FROM dedup_claim_batch('big', ARRAY(SELECT 'r-' || i FROM generate_series(1, 10) i));
SELECT bool_or(dedup_claim('big', 'r-' || i)) AS any_new FROM generate_series(1, 10) AS i;
SELECT pg_temp.toast_blocks_fetched() - :before <= 20 * 4 AS read_only_the_heads;
COMMIT;
-- the record itself is whole: a begin replays the response
SELECT length((dedup_begin('big', 'r-3')).response->>'blob') AS replayed_length;

-- works from a SECURITY DEFINER-free role that was granted usage
CREATE ROLE regress_dedup_app NOLOGIN;
SELECT dedup_grant_usage('regress_dedup_app');
SET ROLE regress_dedup_app;
SELECT dedup_claim('roles', 'x') AS as_app;
SELECT dedup_claim('roles', 'x') AS as_app_dup;
SELECT * FROM dedup_claim_batch('roles', ARRAY['x', 'y']);
RESET ROLE;

DROP OWNED BY regress_dedup_app;
DROP ROLE regress_dedup_app;
TRUNCATE dedup.claims;
