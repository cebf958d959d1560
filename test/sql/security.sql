-- search_path safety: hostile functions and operators, in public (the
-- extension's schema) and in a schema first on the caller's search_path,
-- both placed before pg_catalog, are never called by dedup's functions.
-- Each hostile object raises "hijacked"; every dedup function is called
-- under that search_path and must not raise it.

CREATE SCHEMA evil;
CREATE FUNCTION evil.hijacked(what text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'hijacked: %', what;
END
$$;
CREATE FUNCTION evil.make_hostile(s text) RETURNS void LANGUAGE plpgsql AS $make$
DECLARE
  t text;
  op text;
  n int := 0;
BEGIN
  -- functions dedup's SQL and plpgsql use, by name (the helper itself calls
  -- only qualified names: a hostile format(text, text[]) would win over
  -- pg_catalog's format(text, "any") even with pg_catalog first)
  EXECUTE pg_catalog.format($f$CREATE FUNCTION %I.now() RETURNS timestamptz LANGUAGE plpgsql AS
    $b$BEGIN PERFORM evil.hijacked('%s.now'); RETURN NULL; END$b$$f$, s, s);
  EXECUTE pg_catalog.format($f$CREATE FUNCTION %I.statement_timestamp() RETURNS timestamptz LANGUAGE plpgsql AS
    $b$BEGIN PERFORM evil.hijacked('%s.statement_timestamp'); RETURN NULL; END$b$$f$, s, s);
  EXECUTE pg_catalog.format($f$CREATE FUNCTION %I.clock_timestamp() RETURNS timestamptz LANGUAGE plpgsql AS
    $b$BEGIN PERFORM evil.hijacked('%s.clock_timestamp'); RETURN NULL; END$b$$f$, s, s);
  EXECUTE pg_catalog.format($f$CREATE FUNCTION %I.current_setting(text) RETURNS text LANGUAGE plpgsql AS
    $b$BEGIN PERFORM evil.hijacked('%s.current_setting'); RETURN NULL; END$b$$f$, s, s);
  EXECUTE pg_catalog.format($f$CREATE FUNCTION %I.pg_sleep(float8) RETURNS void LANGUAGE plpgsql AS
    $b$BEGIN PERFORM evil.hijacked('%s.pg_sleep'); END$b$$f$, s, s);
  EXECUTE pg_catalog.format($f$CREATE FUNCTION %I.array_length(anyarray, int) RETURNS int LANGUAGE plpgsql AS
    $b$BEGIN PERFORM evil.hijacked('%s.array_length'); RETURN NULL; END$b$$f$, s, s);
  EXECUTE pg_catalog.format($f$CREATE FUNCTION %I.cardinality(anyarray) RETURNS int LANGUAGE plpgsql AS
    $b$BEGIN PERFORM evil.hijacked('%s.cardinality'); RETURN NULL; END$b$$f$, s, s);
  EXECUTE pg_catalog.format($f$CREATE FUNCTION %I.format(text, VARIADIC text[]) RETURNS text LANGUAGE plpgsql AS
    $b$BEGIN PERFORM evil.hijacked('%s.format'); RETURN NULL; END$b$$f$, s, s);
  -- comparison and arithmetic operators on the types dedup compares
  FOREACH t IN ARRAY ARRAY['text', 'uuid', 'bigint', 'integer', 'timestamptz', '"char"', 'boolean']
  LOOP
    FOREACH op IN ARRAY ARRAY['=', '<>', '<', '<=', '>', '>=']
    LOOP
      n := n + 1;
      EXECUTE pg_catalog.format($f$CREATE FUNCTION %I.hostile_%s(%s, %s) RETURNS boolean LANGUAGE plpgsql AS
        $b$BEGIN PERFORM evil.hijacked('%s.%s(%s)'); RETURN NULL; END$b$$f$, s, n, t, t, s, op, t);
      EXECUTE pg_catalog.format('CREATE OPERATOR %I.%s (LEFTARG = %s, RIGHTARG = %s, FUNCTION = %I.hostile_%s)',
        s, op, t, t, s, n);
    END LOOP;
  END LOOP;
  EXECUTE pg_catalog.format($f$CREATE FUNCTION %I.hostile_plus(timestamptz, interval) RETURNS timestamptz LANGUAGE plpgsql AS
    $b$BEGIN PERFORM evil.hijacked('%s.+(timestamptz, interval)'); RETURN NULL; END$b$$f$, s, s);
  EXECUTE pg_catalog.format('CREATE OPERATOR %I.+ (LEFTARG = timestamptz, RIGHTARG = interval, FUNCTION = %I.hostile_plus)', s, s);
  EXECUTE pg_catalog.format($f$CREATE FUNCTION %I.hostile_plus(bigint, bigint) RETURNS bigint LANGUAGE plpgsql AS
    $b$BEGIN PERFORM evil.hijacked('%s.+(bigint)'); RETURN NULL; END$b$$f$, s, s);
  EXECUTE pg_catalog.format('CREATE OPERATOR %I.+ (LEFTARG = bigint, RIGHTARG = bigint, FUNCTION = %I.hostile_plus)', s, s);
  EXECUTE pg_catalog.format($f$CREATE FUNCTION %I.hostile_minus(timestamptz, timestamptz) RETURNS interval LANGUAGE plpgsql AS
    $b$BEGIN PERFORM evil.hijacked('%s.-(timestamptz)'); RETURN NULL; END$b$$f$, s, s);
  EXECUTE pg_catalog.format('CREATE OPERATOR %I.- (LEFTARG = timestamptz, RIGHTARG = timestamptz, FUNCTION = %I.hostile_minus)', s, s);
END
$make$;
SELECT evil.make_hostile('evil');
SELECT evil.make_hostile('public');
SELECT count(*) AS hostile_operators FROM pg_operator
WHERE oprnamespace IN ('evil'::regnamespace, 'public'::regnamespace)
  AND oprcode::text LIKE '%hostile%';
-- they work: a hostile operator is hit when the caller's own SQL uses it
SET search_path = evil, public, pg_catalog;
SELECT 'a'::text = 'a'::text;
RESET search_path;

CREATE ROLE regress_sec_app;
CREATE ROLE regress_sec_relay;

-- the caller's search_path: the hostile schema, then public, then pg_catalog
SET search_path = evil, public, pg_catalog;
SELECT dedup_fingerprint('k'::text) IS NOT NULL AS fingerprint,
       dedup_fingerprint('{"a": 1, "b": [1, 2]}'::jsonb, ARRAY['b']) IS NOT NULL AS content_key;
SELECT scope, ttl, lease, retention, max_attempts
FROM dedup_set_scope('sec', ttl => '1 hour', lease => '1 minute', retention => '1 day', max_attempts => 2);
SELECT scope, configured FROM dedup_scope('sec');
SELECT dedup_claim('sec', 'k-1') AS text_key, dedup_claim('sec', '\x01'::bytea) AS bytea_key,
       dedup_claim('sec', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'::uuid) AS uuid_key,
       dedup_claim('sec', dedup_fingerprint('fp'::text)) AS fingerprint_key,
       dedup_claim('sec', 'k-1', nowait => true) AS again;
SELECT count(*) AS new_in_batch FROM dedup_claim_batch('sec', ARRAY['k-1', 'k-2', 'k-3']);
SELECT outcome, attempts FROM dedup_begin('sec', 'r-1', '{"x": 1}');
SELECT dedup_complete('sec', 'r-1', 200, '{"ok": true}', attempt => 1);
SELECT outcome, response FROM dedup_begin('sec', 'r-1', '{"x": 1}');
SELECT outcome FROM dedup_begin('sec', 'r-2');
SELECT dedup_release('sec', 'r-2', attempt => 1);
SELECT kind, status FROM dedup_lookup('sec', 'r-1');
SELECT dedup_outbox_put('sec', 'e-1', '{"n": 1}', aggregate_id => 'a') IS NOT NULL AS put;
SELECT dedup_outbox_put('sec', 'e-2', '{"n": 2}') IS NOT NULL AS put;
SELECT count(*) AS taken FROM dedup_outbox_take('sec', 10);
SELECT dedup_outbox_ack(ARRAY[dedup_outbox_put('sec', 'e-1', '{"n": 1}', aggregate_id => 'a')]) AS acked;
SELECT dedup_outbox_nack(ARRAY[dedup_outbox_put('sec', 'e-2', '{"n": 2}')], '0 seconds', 'err') AS nacked;
SELECT pending, in_flight, dead FROM dedup_outbox_stats('sec');
SELECT dedup_outbox_nack(array_agg(id), '0 seconds', 'err') AS nacked_to_dead FROM dedup_outbox_take('sec', 10);
SELECT dedup_outbox_redrive('sec') AS redriven;
SELECT deleted FROM dedup_cleanup_batch();
CALL dedup_cleanup();
SELECT count(*) > 0 AS figures FROM dedup_cleanup_stats();
SELECT count(*) > 0 AS figures_view FROM dedup_cleanup_stats;
SELECT count(*) > 0 AS scope_figures FROM dedup_scope_stats();
SELECT count(*) > 0 AS scope_figures_view FROM dedup_scope_stats;
SELECT dedup_grant_usage('regress_sec_app');
SELECT dedup_grant_relay('regress_sec_relay');
SELECT dedup_grant_usage('regress_sec_app', ARRAY['sec', 'sec.*']);
SELECT dedup_revoke_usage('regress_sec_app', ARRAY['sec.*']);
SELECT dedup_grant_relay('regress_sec_relay', ARRAY['sec']);
SELECT dedup_revoke_relay('regress_sec_relay', ARRAY['sec']);
SELECT count(*) AS scope_grants FROM dedup_scope_privileges WHERE role::text LIKE 'regress_sec%';
SELECT sequence_mode FROM dedup_set_scope('sec', sequence_mode => 'strict');
SELECT dedup_advance('sec', 'p-0', 1) AS first, dedup_advance('sec', 'p-0', 2) AS next,
       dedup_advance('sec', 'p-0', 2) AS dup;
SELECT count(*) AS moved FROM dedup_advance_batch('sec', ARRAY['p-1', 'p-0'], ARRAY[1, 3]::bigint[]);
SELECT dedup_new_epoch('sec', 'producer') AS epoch;
SELECT dedup_advance('sec', 'producer', 0, epoch => 1, nowait => true) AS producer;
SELECT mark, epoch FROM dedup_position('sec', 'p-0');
SELECT count(*) AS streams FROM dedup_streams('sec');
SELECT dedup_reset_scope('sec');
RESET search_path;

-- nothing hostile ran, and the calls did their work
SELECT count(*) AS sec_claims FROM dedup_claim_batch('sec', ARRAY['k-1', 'k-2', 'k-3', 'k-4']);
SELECT has_function_privilege('regress_sec_app', 'dedup_claim(text, text, interval, boolean)', 'EXECUTE') AS app_claims,
       has_function_privilege('regress_sec_relay', 'dedup_outbox_take(text, integer)', 'EXECUTE') AS relay_takes;

-- clean up
TRUNCATE dedup.streams;
SET client_min_messages = warning;
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA public FROM regress_sec_app, regress_sec_relay;
-- (and the relay's internal function on a cluster, dedup.outbox_batch_group)
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA dedup FROM regress_sec_app, regress_sec_relay;
DROP ROLE regress_sec_app;
DROP ROLE regress_sec_relay;
DO $$
DECLARE f regprocedure;
BEGIN
  FOR f IN SELECT p.oid::regprocedure FROM pg_proc AS p
           WHERE p.pronamespace = 'public'::regnamespace
             AND (p.proname LIKE 'hostile%' OR p.proname IN ('now', 'statement_timestamp',
                  'clock_timestamp', 'current_setting', 'pg_sleep', 'array_length',
                  'cardinality', 'format'))
  LOOP
    EXECUTE pg_catalog.format('DROP FUNCTION %s CASCADE', f);
  END LOOP;
END
$$;
DROP SCHEMA evil CASCADE;
RESET client_min_messages;
SELECT count(*) AS hostile_left FROM pg_proc
WHERE pronamespace = 'public'::regnamespace
  AND (proname LIKE 'hostile%' OR proname IN ('now', 'statement_timestamp', 'clock_timestamp',
       'current_setting', 'pg_sleep', 'array_length', 'cardinality', 'format'));
