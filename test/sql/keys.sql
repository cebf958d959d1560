-- The keys users have: claims and records take text, bytea, uuid,
-- dedup_fingerprint and bigint keys, and one rule says when two are one key
-- (src/fingerprint.c): a key is its bytes; a bigint is its decimal text; a
-- uuid is its 16 bytes, as 1.0 stored it, not its text.
TRUNCATE dedup.claims;
\pset null '(null)'

-- the stored form, computed here from its definition: SHA-256 of the domain
-- tag (with its zero byte), the scope's length (4 bytes, big-endian) and
-- bytes, and the key's bytes; its first 16 bytes (written in hexadecimal:
-- a bytea cast to dedup_fingerprint is fingerprinted)
CREATE FUNCTION pg_temp.key_of(scope text, key bytea) RETURNS dedup_fingerprint
LANGUAGE sql IMMUTABLE AS $$
  SELECT encode(substr(sha256('dedup/v1/claim'::bytea || '\x00'::bytea
                              || int4send(octet_length(convert_to(scope, 'UTF8')))
                              || convert_to(scope, 'UTF8') || key), 1, 16), 'hex')::dedup_fingerprint
$$;

-- 1.0's forms are kept, so that keys stored before the update are found:
-- a text key is its bytes, a uuid its 16 bytes (the same key as those 16
-- bytes given as bytea), a fingerprint its 16 bytes
SELECT dedup_key('s', 'k-1') = pg_temp.key_of('s', 'k-1'::bytea) AS text_is_its_bytes,
       dedup_key('s', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'::uuid)
         = pg_temp.key_of('s', '\xa0eebc999c0b4ef8bb6d6bb9bd380a11'::bytea) AS uuid_is_its_16_bytes,
       dedup_key('s', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'::uuid)
         = dedup_key('s', '\xa0eebc999c0b4ef8bb6d6bb9bd380a11'::bytea) AS uuid_is_bytea_of_its_bytes,
-- a bigint is its decimal text: 42 and '42' are one key, '042' is another
       dedup_key('s', 42::bigint) = pg_temp.key_of('s', '42'::bytea) AS bigint_is_its_decimal_text,
       dedup_key('s', 42) = dedup_key('s', '42') AS bigint_42_is_text_42,
       dedup_key('s', -7) = dedup_key('s', '-7') AS negative_too,
       dedup_key('s', 9223372036854775807) = dedup_key('s', '9223372036854775807') AS largest,
       dedup_key('s', 42) <> dedup_key('s', '042') AS leading_zero_is_another_key;

-- claims: a bigint key, and the same id as text, are one key; an integer
-- literal or an integer column is taken as a bigint
SELECT dedup_claim('offsets', 1001::bigint) AS first, dedup_claim('offsets', '1001') AS as_text,
       dedup_claim('offsets', 1001) AS as_integer, dedup_claim('offsets', 1002) AS next;
SELECT * FROM dedup_claim_batch('offsets', ARRAY[1002, 1003, 1003, 1004]::bigint[]);
SELECT * FROM dedup_claim_batch('offsets', ARRAY['1004', '1005']);
SELECT dedup_seen('offsets', 1005) AS seen_as_bigint, dedup_seen('offsets', 1006) AS unseen;

-- uuid: case does not matter to a uuid, but a uuid and its text are two
-- keys (the documented rule: give a uuid as uuid, $1::uuid, everywhere)
SELECT dedup_claim('msgs', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'::uuid) AS first,
       dedup_claim('msgs', 'A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11'::uuid) AS upper_case_uuid,
       dedup_claim('msgs', '{a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11}'::uuid) AS braces,
       dedup_claim('msgs', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11') AS as_text_is_another_key,
       dedup_claim('msgs', 'A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11') AS text_is_case_sensitive;

-- records take every kind of key; a record begun with a bigint is the
-- record of the same id as text
SELECT outcome, attempts FROM dedup_begin('charges', 501, '{"amount": 5}');
SELECT outcome, attempts FROM dedup_begin('charges', '501', '{"amount": 5}');
SELECT dedup_complete('charges', 501, 201, '{"charge": "ch_501"}', attempt => 1);
SELECT outcome, response_code, response FROM dedup_begin('charges', '501', '{"amount": 5}');
SELECT kind, status, response FROM dedup_lookup('charges', 501::bigint);
SELECT outcome, attempts FROM dedup_begin('charges', 'b1b2c3d4-0000-4000-8000-000000000001'::uuid);
SELECT outcome FROM dedup_begin('charges', 'B1B2C3D4-0000-4000-8000-000000000001'::uuid);
SELECT dedup_release('charges', 'b1b2c3d4-0000-4000-8000-000000000001'::uuid, attempt => 1);
SELECT outcome, attempts FROM dedup_begin('charges', 'b1b2c3d4-0000-4000-8000-000000000001'::uuid);
SELECT dedup_complete('charges', 'b1b2c3d4-0000-4000-8000-000000000001'::uuid, 200, attempt => 2);
SELECT kind, status, attempts FROM dedup_lookup('charges', 'b1b2c3d4-0000-4000-8000-000000000001'::uuid);
SELECT outcome FROM dedup_begin('charges', '\x0102'::bytea);
SELECT dedup_complete('charges', '\x0102'::bytea, 204);
SELECT status FROM dedup_lookup('charges', '\x0102'::bytea);
SELECT outcome FROM dedup_begin('charges', dedup_fingerprint('fp-1'::text));
SELECT dedup_release('charges', dedup_fingerprint('fp-1'::text));
SELECT count(*) AS released_counts_as_absent FROM dedup_lookup('charges', dedup_fingerprint('fp-1'::text));
-- a claim and a record share the key space, whatever the type given
SELECT dedup_claim('charges', 501) AS claim_of_a_record;
SELECT outcome FROM dedup_begin('offsets', 1001);

-- bad input: its SQLSTATE, and nothing written
CREATE TEMP TABLE before AS SELECT key, expires_at, record FROM dedup.claims;
SELECT regress_try($$SELECT dedup_claim('offsets', NULL::bigint)$$);
SELECT regress_try($$SELECT dedup_begin('charges', NULL::bigint)$$);
SELECT regress_try($$SELECT dedup_begin('charges', NULL::uuid)$$);
SELECT regress_try($$SELECT dedup_complete('charges', 777, 200)$$);
SELECT regress_try($$SELECT dedup_release('charges', 777::bigint)$$);
SELECT regress_try($$SELECT dedup_complete('charges', 'c0c0c0c0-0000-4000-8000-000000000000'::uuid, 200)$$);
SELECT regress_try($$SELECT * FROM dedup_claim_batch('offsets', ARRAY[1, NULL]::bigint[])$$);
SELECT regress_try($$SELECT dedup_begin('', 1)$$);
SELECT regress_try($$SELECT dedup_claim('offsets', 1.5)$$);
SELECT (SELECT count(*) FROM (SELECT key, expires_at, record FROM dedup.claims EXCEPT SELECT * FROM before) AS d)
     + (SELECT count(*) FROM (SELECT * FROM before EXCEPT SELECT key, expires_at, record FROM dedup.claims) AS d) AS rows_changed;
DROP TABLE before;
TRUNCATE dedup.claims;
