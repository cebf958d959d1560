-- The shape of dedup's API: functions and their signatures, the type and its
-- operator classes, the tables, and who may execute what.  Run by pg_prove.
BEGIN;
CREATE EXTENSION IF NOT EXISTS dedup;
SELECT plan(127);

-- the type and its operator classes
SELECT has_type('public', 'dedup_fingerprint', 'type dedup_fingerprint exists');
SELECT is((SELECT typlen FROM pg_type WHERE typname = 'dedup_fingerprint'), 16::smallint,
          'dedup_fingerprint is 16 bytes, fixed');
SELECT has_opclass('public', 'dedup_fingerprint_ops', 'btree operator class');
SELECT has_opclass('public', 'dedup_fingerprint_hash_ops', 'hash operator class');
SELECT has_cast('bytea', 'dedup_fingerprint', 'cast from bytea');
SELECT has_cast('uuid', 'dedup_fingerprint', 'cast from uuid');
SELECT has_cast('jsonb', 'dedup_fingerprint', 'cast from jsonb');
SELECT hasnt_cast('text', 'dedup_fingerprint', 'no cast from text: text is the hex form');
SELECT has_operator('text', 'public', '=', 'dedup_fingerprint', 'boolean',
                    'a fingerprint''s text = the fingerprint (rows hold it as text)');
SELECT has_operator('dedup_fingerprint', 'public', '<>', 'text', 'boolean',
                    'a fingerprint <> a text');

-- the public functions and their signatures
SELECT has_function('public', 'dedup_claim', ARRAY['text', 'text', 'interval', 'boolean']);
SELECT has_function('public', 'dedup_claim', ARRAY['text', 'bytea', 'interval', 'boolean']);
SELECT has_function('public', 'dedup_claim', ARRAY['text', 'uuid', 'interval', 'boolean']);
SELECT has_function('public', 'dedup_claim', ARRAY['text', 'dedup_fingerprint', 'interval', 'boolean']);
SELECT function_returns('public', 'dedup_claim', ARRAY['text', 'text', 'interval', 'boolean'], 'boolean');
SELECT volatility_is('public', 'dedup_claim', ARRAY['text', 'text', 'interval', 'boolean'], 'volatile');
SELECT isnt_strict('public', 'dedup_claim', ARRAY['text', 'text', 'interval', 'boolean'],
                   'dedup_claim is not strict: NULL is an error, not a silent NULL');
SELECT has_function('public', 'dedup_claim_batch', ARRAY['text', 'text[]', 'interval', 'boolean']);
SELECT has_function('public', 'dedup_claim_batch', ARRAY['text', 'bytea[]', 'interval', 'boolean']);
SELECT has_function('public', 'dedup_claim_batch', ARRAY['text', 'uuid[]', 'interval', 'boolean']);
SELECT has_function('public', 'dedup_claim_batch', ARRAY['text', 'dedup_fingerprint[]', 'interval', 'boolean']);
SELECT function_returns('public', 'dedup_claim_batch', ARRAY['text', 'text[]', 'interval', 'boolean'], 'setof text');
SELECT has_function('public', 'dedup_fingerprint', ARRAY['text']);
SELECT has_function('public', 'dedup_fingerprint', ARRAY['jsonb', 'text[]']);
SELECT volatility_is('public', 'dedup_fingerprint', ARRAY['jsonb', 'text[]'], 'immutable');
SELECT has_function('public', 'dedup_set_scope', ARRAY['text', 'interval', 'interval', 'interval', 'integer', 'text', 'interval', 'double precision']);
SELECT is_definer('public', 'dedup_set_scope', ARRAY['text', 'interval', 'interval', 'interval', 'integer', 'text', 'interval', 'double precision']);
SELECT ok((SELECT proconfig @> ARRAY['search_path=pg_catalog, pg_temp'] FROM pg_proc
           WHERE oid = 'public.dedup_set_scope(text, interval, interval, interval, integer, text, interval, double precision)'::regprocedure),
          'dedup_set_scope pins its search_path');
SELECT ok((SELECT bool_and(proconfig IS NOT NULL) FROM pg_proc
           WHERE prosecdef AND pronamespace = 'public'::regnamespace AND proname LIKE 'dedup%'),
          'every SECURITY DEFINER function pins its search_path');
SELECT has_function('public', 'dedup_reset_scope', ARRAY['text']);
SELECT has_function('public', 'dedup_scope', ARRAY['text']);

-- idempotency records: the result type and the signatures
SELECT has_type('public', 'dedup_begin_result', 'type dedup_begin_result exists');
SELECT is((SELECT array_agg(attname::text ORDER BY attnum) FROM pg_attribute
           WHERE attrelid = (SELECT typrelid FROM pg_type WHERE oid = 'dedup_begin_result'::regtype)
             AND attnum > 0),
          ARRAY['outcome', 'status', 'response_code', 'response', 'attempts',
                'lease_expires_at', 'first_seen_at', 'request_fingerprint'],
          'dedup_begin_result has the documented columns');
SELECT is((SELECT atttypid::regtype::text FROM pg_attribute
           WHERE attrelid = (SELECT typrelid FROM pg_type WHERE oid = 'dedup_begin_result'::regtype)
             AND attname = 'request_fingerprint'),
          'text', 'dedup_begin_result.request_fingerprint is text (a row holds built-in types only)');
SELECT is((SELECT t::regtype::text FROM pg_proc AS p, unnest(p.proallargtypes, p.proargnames) AS u(t, n)
           WHERE p.oid = 'dedup_lookup(text, text)'::regprocedure AND u.n = 'request_fingerprint'),
          'text', 'dedup_lookup''s request_fingerprint is text');
SELECT has_function('public', 'dedup_begin', ARRAY['text', 'text', 'jsonb', 'interval']);
SELECT function_returns('public', 'dedup_begin', ARRAY['text', 'text', 'jsonb', 'interval'], 'dedup_begin_result');
SELECT has_function('public', 'dedup_complete', ARRAY['text', 'text', 'integer', 'jsonb', 'integer']);
SELECT function_returns('public', 'dedup_complete', ARRAY['text', 'text', 'integer', 'jsonb', 'integer'], 'void');
SELECT has_function('public', 'dedup_release', ARRAY['text', 'text', 'integer']);
SELECT has_function('public', 'dedup_lookup', ARRAY['text', 'text']);
SELECT volatility_is('public', 'dedup_lookup', ARRAY['text', 'text'], 'stable');
SELECT function_privs_are('public', 'dedup_begin', ARRAY['text', 'text', 'jsonb', 'interval'],
                          'public', ARRAY[]::text[], 'PUBLIC cannot begin records');
-- 1.1: every kind of key for records, bigint keys for claims, the begin
-- with a ttl and an ignore list, the heartbeat, one epoch for many streams
SELECT has_function('public', 'dedup_begin', ARRAY['text', 'uuid', 'jsonb', 'interval']);
SELECT has_function('public', 'dedup_begin', ARRAY['text', 'bigint', 'jsonb', 'interval']);
SELECT has_function('public', 'dedup_begin', ARRAY['text', 'text', 'jsonb', 'interval', 'interval', 'text[]']);
SELECT has_function('public', 'dedup_complete', ARRAY['text', 'bigint', 'integer', 'jsonb', 'integer']);
SELECT has_function('public', 'dedup_claim', ARRAY['text', 'bigint', 'interval', 'boolean']);
SELECT has_function('public', 'dedup_claim_batch', ARRAY['text', 'bigint[]', 'interval', 'boolean']);
SELECT function_returns('public', 'dedup_extend', ARRAY['text', 'text', 'integer', 'interval'], 'timestamp with time zone');
SELECT volatility_is('public', 'dedup_extend', ARRAY['text', 'text', 'integer', 'interval'], 'volatile');
SELECT function_privs_are('public', 'dedup_extend', ARRAY['text', 'uuid', 'integer', 'interval'],
                          'public', ARRAY[]::text[], 'PUBLIC cannot extend leases');
SELECT function_returns('public', 'dedup_new_epoch_batch', ARRAY['text', 'text[]'], 'bigint');

-- the tables
SELECT has_table('dedup', 'claims', 'dedup.claims');
SELECT columns_are('dedup', 'claims', ARRAY['key', 'expires_at', 'record', 'history']);
-- the history tier: generations and their chunks, and the functions that read them
SELECT columns_are('dedup', 'history_generations',
    ARRAY['generation', 'history_id', 'opened_at', 'slice_end', 'rate', 'k', 'nblocks', 'capacity', 'keys', 'part']);
SELECT col_is_pk('dedup', 'history_blocks', ARRAY['generation', 'chunk']::name[], 'a chunk is keyed by its generation and number');
SELECT has_function('public', 'dedup_seen', ARRAY['text', 'text']);
SELECT has_function('public', 'dedup_seen', ARRAY['text', 'dedup_fingerprint']);
SELECT function_returns('public', 'dedup_history', ARRAY['text'], 'setof record');
SELECT function_privs_are('public', 'dedup_seen', ARRAY['text', 'text'], 'public', ARRAY[]::text[],
                          'PUBLIC cannot ask what a scope has seen');
SELECT col_type_is('dedup', 'claims', 'key', 'dedup_fingerprint', 'claims are keyed by fingerprint');
SELECT indexes_are('dedup', 'claims', ARRAY['claims_pkey'], 'one index: the unique fingerprint');
SELECT has_table('dedup', 'scopes', 'dedup.scopes');

-- privileges: PUBLIC may not claim, set scopes or read the tables
SELECT function_privs_are('public', 'dedup_claim', ARRAY['text', 'text', 'interval', 'boolean'],
                          'public', ARRAY[]::text[], 'PUBLIC cannot claim');
SELECT function_privs_are('public', 'dedup_set_scope', ARRAY['text', 'interval', 'interval', 'interval', 'integer', 'text', 'interval', 'double precision'],
                          'public', ARRAY[]::text[], 'PUBLIC cannot change scopes');
SELECT table_privs_are('dedup', 'claims', 'public', ARRAY[]::text[], 'PUBLIC cannot read claims');
SELECT schema_privs_are('dedup', 'public', ARRAY[]::text[], 'PUBLIC cannot use schema dedup');

-- dedup_grant_usage gives an application role the claim functions only
CREATE ROLE regress_dedup_tap_app NOLOGIN;
SELECT dedup_grant_usage('regress_dedup_tap_app');
SELECT function_privs_are('public', 'dedup_claim_batch', ARRAY['text', 'uuid[]', 'interval', 'boolean'],
                          'regress_dedup_tap_app', ARRAY['EXECUTE'], 'granted role can claim batches');
SELECT function_privs_are('public', 'dedup_set_scope', ARRAY['text', 'interval', 'interval', 'interval', 'integer', 'text', 'interval', 'double precision'],
                          'regress_dedup_tap_app', ARRAY[]::text[], 'granted role still cannot change scopes');
SELECT function_privs_are('public', 'dedup_claim', ARRAY['text', 'uuid', 'interval', 'boolean'],
                          'regress_dedup_tap_app', ARRAY['EXECUTE'], 'granted role can claim uuid keys');
SELECT function_privs_are('public', 'dedup_complete', ARRAY['text', 'text', 'integer', 'jsonb', 'integer'],
                          'regress_dedup_tap_app', ARRAY['EXECUTE'], 'granted role can complete records');
SELECT function_privs_are('public', 'dedup_cleanup_batch', ARRAY['bigint', 'integer'],
                          'regress_dedup_tap_app', ARRAY[]::text[], 'granted role cannot run the cleanup');

-- the cleanup figures: a function and a view, for monitoring roles only
SELECT has_function('public', 'dedup_cleanup_stats', ARRAY['boolean']);
SELECT has_view('public', 'dedup_cleanup_stats', 'view dedup_cleanup_stats exists');
SELECT columns_are('public', 'dedup_cleanup_stats',
    ARRAY['datname', 'kind', 'rows_deleted', 'rows_deleted_last_pass', 'last_pass_started_at',
          'last_pass_duration', 'batches', 'errors', 'cleanup_lag'],
    'the figures view has the documented columns');
SELECT col_type_is('public', 'dedup_cleanup_stats', 'cleanup_lag', 'interval', 'cleanup_lag is an interval');
SELECT function_privs_are('public', 'dedup_cleanup_stats', ARRAY['boolean'],
                          'public', ARRAY[]::text[], 'PUBLIC cannot read the figures');
SELECT function_privs_are('public', 'dedup_cleanup_stats', ARRAY['boolean'],
                          'pg_monitor', ARRAY['EXECUTE'], 'pg_monitor can read the figures');
SELECT table_privs_are('public', 'dedup_cleanup_stats', 'pg_monitor', ARRAY['SELECT'],
                       'pg_monitor can read the figures view');
SELECT table_privs_are('public', 'dedup_cleanup_stats', 'regress_dedup_tap_app', ARRAY[]::text[],
                       'an application role cannot read the figures view');
SELECT function_privs_are('public', 'dedup_cleanup_stats', ARRAY['boolean'],
                          'regress_dedup_tap_app', ARRAY[]::text[], 'dedup_grant_usage does not grant the figures');

-- the per-scope call counters: a function and a view, for monitoring roles only
SELECT has_function('public', 'dedup_scope_stats', ARRAY['boolean']);
SELECT has_view('public', 'dedup_scope_stats', 'view dedup_scope_stats exists');
SELECT columns_are('public', 'dedup_scope_stats',
    ARRAY['datname', 'scope', 'claims', 'duplicates', 'records_started', 'records_replayed',
          'records_completed', 'records_released', 'events_put', 'events_taken',
          'events_acked', 'events_nacked'],
    'the counters view has the documented columns');
SELECT function_privs_are('public', 'dedup_scope_stats', ARRAY['boolean'],
                          'public', ARRAY[]::text[], 'PUBLIC cannot read the counters');
SELECT function_privs_are('public', 'dedup_scope_stats', ARRAY['boolean'],
                          'pg_monitor', ARRAY['EXECUTE'], 'pg_monitor can read the counters');
SELECT table_privs_are('public', 'dedup_scope_stats', 'pg_monitor', ARRAY['SELECT'],
                       'pg_monitor can read the counters view');
SELECT function_privs_are('dedup', 'scope_count', ARRAY['text', 'text', 'bigint'],
                          'public', ARRAY[]::text[], 'PUBLIC cannot count');

-- the outbox: put for producers, take/ack/nack/stats for relays, redrive for
-- the owner; the relay functions run as the owner with a pinned search_path
SELECT has_function('public', 'dedup_outbox_put', ARRAY['text', 'text', 'jsonb', 'text', 'text', 'jsonb', 'text']);
SELECT function_returns('public', 'dedup_outbox_put', ARRAY['text', 'text', 'jsonb', 'text', 'text', 'jsonb', 'text'], 'uuid');
SELECT isnt_strict('public', 'dedup_outbox_put', ARRAY['text', 'text', 'jsonb', 'text', 'text', 'jsonb', 'text'],
                   'dedup_outbox_put is not strict: a NULL payload is an error');
SELECT has_function('public', 'dedup_outbox_take', ARRAY['text', 'integer']);
SELECT has_function('public', 'dedup_outbox_ack', ARRAY['uuid[]', 'integer[]']);
SELECT has_function('public', 'dedup_outbox_nack', ARRAY['uuid[]', 'interval', 'text', 'integer[]']);
SELECT has_function('public', 'dedup_outbox_redrive', ARRAY['text', 'uuid[]']);
SELECT has_function('public', 'dedup_outbox_stats', ARRAY['text']);
SELECT isnt_definer('public', 'dedup_outbox_take', ARRAY['text', 'integer'],
                    'dedup_outbox_take runs as its caller, then its work as the owner (the caller''s relay privilege is checked)');
SELECT is_definer('public', 'dedup_set_scope', ARRAY['text', 'interval', 'interval', 'interval', 'integer', 'text', 'interval', 'double precision'],
                  'dedup_set_scope writes the settings as the owner');
SELECT is((SELECT count(*)::integer FROM pg_proc
           WHERE proname LIKE 'dedup\_outbox\_%' AND prosecdef
             AND NOT coalesce(proconfig @> ARRAY['search_path=pg_catalog, pg_temp'], false)), 0,
          'every SECURITY DEFINER outbox function pins its search_path');
SELECT function_privs_are('public', 'dedup_outbox_put', ARRAY['text', 'text', 'jsonb', 'text', 'text', 'jsonb', 'text'],
                          'public', ARRAY[]::text[], 'PUBLIC cannot put');
SELECT function_privs_are('public', 'dedup_outbox_take', ARRAY['text', 'integer'],
                          'public', ARRAY[]::text[], 'PUBLIC cannot take');
SELECT function_privs_are('public', 'dedup_outbox_put', ARRAY['text', 'text', 'jsonb', 'text', 'text', 'jsonb', 'text'],
                          'regress_dedup_tap_app', ARRAY['EXECUTE'], 'dedup_grant_usage grants put');
SELECT function_privs_are('public', 'dedup_outbox_take', ARRAY['text', 'integer'],
                          'regress_dedup_tap_app', ARRAY[]::text[], 'dedup_grant_usage does not grant take');
SELECT has_table('dedup', 'outbox', 'table dedup.outbox exists');
SELECT columns_are('dedup', 'outbox',
    ARRAY['seq', 'id', 'topic', 'aggregatetype', 'aggregateid', 'type', 'payload', 'headers',
          'created_at', 'part'],
    'dedup.outbox is the log: Debezium''s columns and the partition, no relay state');
SELECT col_type_is('dedup', 'outbox', 'id', 'uuid', 'the event id is a uuid');
SELECT col_is_pk('dedup', 'outbox', 'id', 'the event id is the log''s primary key: a put is idempotent by it');
SELECT index_is_unique('dedup', 'outbox', 'outbox_topic_seq', 'the relay reads the log by (topic, seq)');
SELECT is((SELECT count(*) FROM pg_index AS i JOIN pg_class AS c ON c.oid = i.indrelid,
                  unnest(i.indkey) AS k(attnum)
           JOIN pg_attribute AS a ON a.attnum = k.attnum
           WHERE a.attrelid = i.indrelid AND c.relnamespace = 'dedup'::regnamespace
             AND c.relname LIKE 'outbox%' AND a.attname = 'part'),
          0::bigint, 'on one server, one partition: no index of the relay''s tables has the partition (dedup_distribute adds it)');
-- the batch API, for relays only
SELECT has_function('public', 'dedup_outbox_take_batch', ARRAY['text', 'integer', 'interval', 'interval']);
SELECT has_function('public', 'dedup_outbox_extend_batch', ARRAY['bigint', 'interval']);
SELECT has_function('public', 'dedup_outbox_dead', ARRAY['text', 'integer']);
SELECT has_function('public', 'dedup_outbox_ack_batch', ARRAY['bigint', 'uuid[]', 'interval', 'text']);
SELECT has_function('public', 'dedup_outbox_nack_batch', ARRAY['bigint', 'interval', 'text']);
SELECT function_privs_are('public', 'dedup_outbox_take_batch', ARRAY['text', 'integer', 'interval', 'interval'],
                          'public', ARRAY[]::text[], 'PUBLIC cannot take a batch');
SELECT function_privs_are('public', 'dedup_outbox_ack_batch', ARRAY['bigint', 'uuid[]', 'interval', 'text'],
                          'regress_dedup_tap_app', ARRAY[]::text[], 'dedup_grant_usage does not grant ack_batch');
SELECT is(ARRAY(SELECT p.oid::regprocedure::text FROM pg_proc AS p
                WHERE p.pronamespace = 'dedup'::regnamespace AND p.proname LIKE 'outbox\_%'
                  AND has_function_privilege('public', p.oid, 'EXECUTE')),
          ARRAY[]::text[], 'no internal outbox function is executable by PUBLIC');

-- Citus: the stored forms are for everyone, the distribution for the owner,
-- the forwarded call for everyone on purpose (it runs dedup's functions as
-- the caller, with their checks), the workers' grants for the helpers only
SELECT has_function('public', 'dedup_key', ARRAY['text', 'text']);
SELECT has_function('public', 'dedup_key', ARRAY['text', 'dedup_fingerprint']);
SELECT volatility_is('public', 'dedup_key', ARRAY['text', 'text'], 'immutable');
SELECT function_returns('public', 'dedup_stream_key', ARRAY['text', 'text'], 'dedup_fingerprint');
SELECT function_privs_are('public', 'dedup_distribute', ARRAY['integer'], 'public', ARRAY[]::text[],
                          'PUBLIC cannot distribute dedup');
SELECT function_returns('dedup', 'call_on_shard', ARRAY['dedup_fingerprint', 'text', 'text[]'], 'setof text[]');
SELECT function_privs_are('dedup', 'call_on_shard', ARRAY['dedup_fingerprint', 'text', 'text[]'],
                          'public', ARRAY['EXECUTE'], 'PUBLIC may forward a call: it runs only dedup''s functions, as the caller');
SELECT function_privs_are('dedup', 'run_everywhere', ARRAY['text'], 'public', ARRAY[]::text[],
                          'PUBLIC cannot run statements on every node');
SELECT throws_ok($$SELECT dedup.call_on_shard(dedup_key('s', 'k'), 'pg_catalog.pg_sleep(double precision)', '{0}')$$,
                 '42501', NULL, 'a forwarded call runs only dedup''s functions');

SELECT * FROM finish();
ROLLBACK;
