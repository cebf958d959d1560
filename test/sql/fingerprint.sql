-- The dedup_fingerprint type: I/O, known digests, canonical jsonb, operators
-- and the btree and hash operator classes.

-- text form: 32 hex digits, case-insensitive on input, lowercase on output
SELECT '00112233445566778899AABBCCDDEEFF'::dedup_fingerprint;
SELECT '00112233445566778899aabbccddeeff'::dedup_fingerprint::text;


-- bad text forms are rejected with invalid_text_representation (22P02)
SELECT stmt, regress_try(stmt) FROM (VALUES
  ($$SELECT ''::dedup_fingerprint$$),
  ($$SELECT '00112233445566778899aabbccddeef'::dedup_fingerprint$$),
  ($$SELECT '00112233445566778899aabbccddeeff0'::dedup_fingerprint$$),
  ($$SELECT '0011223344556677889xaabbccddeeff'::dedup_fingerprint$$),
  ($$SELECT '\x00112233445566778899aabbccddee'::dedup_fingerprint$$),
  ($$SELECT ' 00112233445566778899aabbccddeeff'::dedup_fingerprint$$)) AS t(stmt);

-- binary form: the 16 bytes
SELECT dedup_fingerprint_send('00112233445566778899aabbccddeeff');

-- known digests (first 128 bits of SHA-256 over the domain tag and the bytes,
-- computed independently): 'abc' and the empty string
SELECT dedup_fingerprint('abc'::text) = '8a7327015b92e6bd72f488bf0d65cdae' AS abc_digest;
SELECT dedup_fingerprint(''::text) = '3f14b304a14c27783520015f2dfda456' AS empty_digest;
SELECT dedup_fingerprint('{"a": 1}'::jsonb) = 'c50f9bbd75a7cc8e97cfd5f646a7392d' AS jsonb_digest;

-- keys are byte strings: text and bytea of the same bytes agree, uuid is its 16 bytes
SELECT dedup_fingerprint('abc'::text) = dedup_fingerprint('\x616263'::bytea) AS text_is_bytes;
SELECT dedup_fingerprint('a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'::uuid)
     = dedup_fingerprint('\xa0eebc999c0b4ef8bb6d6bb9bd380a11'::bytea) AS uuid_is_bytes;
SELECT dedup_fingerprint('abc'::text) <> dedup_fingerprint('abd'::text) AS differs;
-- nothing is truncated: two 1 MB keys that differ only in their last byte
SELECT dedup_fingerprint(repeat('x', 1048576) || 'a')
    <> dedup_fingerprint(repeat('x', 1048576) || 'b') AS long_keys_differ;

-- casts from bytea, uuid and jsonb
SELECT '\x616263'::bytea::dedup_fingerprint = dedup_fingerprint('abc'::text) AS bytea_cast;
SELECT 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'::uuid::dedup_fingerprint
     = dedup_fingerprint('a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'::uuid) AS uuid_cast;
SELECT '{"a": 1}'::jsonb::dedup_fingerprint = dedup_fingerprint('{"a":1}'::jsonb) AS jsonb_cast;

-- canonical jsonb: key order, white space and number spelling do not matter
SELECT dedup_fingerprint('{"b": 2, "a": [1, {"y": true, "x": null}]}'::jsonb)
     = dedup_fingerprint('{"a":[1.0,{"x":null,"y":true}],"b":2.00}'::jsonb) AS same_value;
SELECT dedup_fingerprint('{"a": 1e2}'::jsonb) = dedup_fingerprint('{"a": 100}'::jsonb) AS same_number;
-- ...but values do: types, array order, nesting, null versus missing
SELECT dedup_fingerprint('{"a": 1}'::jsonb) <> dedup_fingerprint('{"a": "1"}'::jsonb) AS number_vs_string;
SELECT dedup_fingerprint('[1, 2]'::jsonb) <> dedup_fingerprint('[2, 1]'::jsonb) AS array_order;
SELECT dedup_fingerprint('{"a": {"b": 1}}'::jsonb) <> dedup_fingerprint('{"a": 1, "b": 1}'::jsonb) AS nesting;
SELECT dedup_fingerprint('{"a": null}'::jsonb) <> dedup_fingerprint('{}'::jsonb) AS null_vs_missing;
SELECT dedup_fingerprint('[["a"], "b"]'::jsonb) <> dedup_fingerprint('[["a", "b"]]'::jsonb) AS array_bounds;
SELECT dedup_fingerprint('"x"'::jsonb) <> dedup_fingerprint('["x"]'::jsonb) AS scalar_vs_array;
SELECT dedup_fingerprint('true'::jsonb) <> dedup_fingerprint('false'::jsonb) AS booleans;
-- the jsonb domain is apart from the bytes domain
SELECT dedup_fingerprint('"abc"'::jsonb) <> dedup_fingerprint('abc'::text) AS domains_apart;

-- ignored fields: top-level fields named in ignore are left out
SELECT dedup_fingerprint('{"order": 42, "attempt": 3, "delivery_id": "d-9"}'::jsonb,
                         ARRAY['attempt', 'delivery_id'])
     = dedup_fingerprint('{"order": 42}'::jsonb) AS ignored;
SELECT dedup_fingerprint('{"order": 42, "attempt": 3}'::jsonb, ARRAY['attempt'])
     = dedup_fingerprint('{"attempt": 7, "order": 42}'::jsonb, ARRAY['attempt']) AS retries_agree;
-- only top-level fields: a nested "attempt" still counts
SELECT dedup_fingerprint('{"m": {"attempt": 1}}'::jsonb, ARRAY['attempt'])
    <> dedup_fingerprint('{"m": {"attempt": 2}}'::jsonb, ARRAY['attempt']) AS nested_kept;
-- an empty ignore list, and a NULL element in it, change nothing
SELECT dedup_fingerprint('{"a": 1}'::jsonb, '{}') = dedup_fingerprint('{"a": 1}'::jsonb) AS empty_ignore;
SELECT dedup_fingerprint('{"a": 1}'::jsonb, ARRAY[NULL]::text[]) = dedup_fingerprint('{"a": 1}'::jsonb) AS null_ignore;
-- a two-dimensional ignore list is an error (2202E)
SELECT regress_try($$SELECT dedup_fingerprint('{"a": 1}'::jsonb, ARRAY[['a'], ['b']])$$);
-- NULL in, NULL out (these are pure functions)
SELECT dedup_fingerprint(NULL::text) IS NULL AS null_text, dedup_fingerprint(NULL::jsonb) IS NULL AS null_jsonb;

-- operators order bytewise
SELECT '00000000000000000000000000000001'::dedup_fingerprint < 'ff000000000000000000000000000000' AS lt,
       '00000000000000000000000000000001'::dedup_fingerprint <= '00000000000000000000000000000001' AS le,
       'ff000000000000000000000000000000'::dedup_fingerprint > '00000000000000000000000000000001' AS gt,
       'ff000000000000000000000000000000'::dedup_fingerprint >= 'ff000000000000000000000000000000' AS ge,
       'ff000000000000000000000000000000'::dedup_fingerprint <> '00000000000000000000000000000001' AS ne;

-- btree and hash operator classes at work
CREATE TABLE fp_test (fp dedup_fingerprint, n int);
INSERT INTO fp_test SELECT dedup_fingerprint(i::text), i FROM generate_series(1, 1000) i;
CREATE INDEX fp_test_hash ON fp_test USING hash (fp);
ANALYZE fp_test;
SET enable_seqscan = off;
EXPLAIN (COSTS OFF) SELECT n FROM fp_test WHERE fp = dedup_fingerprint('777'::text);
SELECT n FROM fp_test WHERE fp = dedup_fingerprint('777'::text);
DROP INDEX fp_test_hash;
CREATE UNIQUE INDEX fp_test_btree ON fp_test (fp);
EXPLAIN (COSTS OFF) SELECT n FROM fp_test WHERE fp = dedup_fingerprint('778'::text);
SELECT n FROM fp_test WHERE fp = dedup_fingerprint('778'::text);
SELECT count(*) FROM fp_test WHERE fp < '80000000000000000000000000000000'
                               AND fp >= '00000000000000000000000000000000';
-- a quoted literal against a fingerprint is read as a fingerprint, beside
-- the operators of a fingerprint and its text (below): the index serves it
EXPLAIN (COSTS OFF) SELECT n FROM fp_test WHERE fp = '06d5518ef6b752e4897171bff86d2120';
SELECT n FROM fp_test WHERE fp = '06d5518ef6b752e4897171bff86d2120';
RESET enable_seqscan;
-- the unique index refuses a second equal fingerprint (23505)
SELECT regress_try($$INSERT INTO fp_test VALUES (dedup_fingerprint('1'::text), 0)$$);
-- hash aggregation and hash joins use the hash opclass
SET enable_sort = off;
SELECT count(DISTINCT fp) FROM (SELECT fp FROM fp_test UNION ALL SELECT fp FROM fp_test) s;
SELECT count(*) FROM fp_test a JOIN fp_test b USING (fp);
RESET enable_sort;
-- sorting agrees with the hex text
SELECT bool_and(ok) AS sorted_as_hex FROM (
  SELECT (lag(fp::text) OVER (ORDER BY fp)) < fp::text OR lag(fp::text) OVER (ORDER BY fp) IS NULL AS ok
  FROM fp_test) s;
DROP TABLE fp_test;

-- a fingerprint against its text, as the rows dedup returns hold it
-- (dedup_begin's and dedup_lookup's request_fingerprint): equal when the
-- text is the fingerprint's, in either case, either side; a text that is
-- no fingerprint's equals none, with no error; NULL gives NULL
SELECT dedup_fingerprint('a'::text)::text = dedup_fingerprint('a'::text) AS text_eq,
       dedup_fingerprint('a'::text) = dedup_fingerprint('a'::text)::text AS eq_text,
       upper(dedup_fingerprint('a'::text)::text) = dedup_fingerprint('a'::text) AS upper_eq,
       dedup_fingerprint('b'::text)::text = dedup_fingerprint('a'::text) AS other_eq,
       dedup_fingerprint('b'::text)::text <> dedup_fingerprint('a'::text) AS other_ne,
       dedup_fingerprint('a'::text) <> dedup_fingerprint('a'::text)::text AS same_ne,
       'not a fingerprint'::text = dedup_fingerprint('a'::text) AS not_one_eq,
       dedup_fingerprint('a'::text) <> 'zz' || repeat('0', 30) AS not_hex_ne,
       NULL::text = dedup_fingerprint('a'::text) AS null_eq;
-- their negators: NOT (t = f) is t <> f, and NOT (f = t) is f <> t
CREATE TEMP TABLE fp_texts (t text);
EXPLAIN (COSTS OFF) SELECT t FROM fp_texts WHERE NOT (t = dedup_fingerprint('a'::text))
                                          AND NOT (dedup_fingerprint('b'::text) = t);
DROP TABLE fp_texts;
