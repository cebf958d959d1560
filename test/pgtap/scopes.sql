-- Per-scope privileges: every function that takes a scope or topic, called
-- by a role in each grant state, asserting the SQLSTATE and message of a
-- refusal and that no dedup table changed by it (the ack and nack by ids,
-- which anyone can compute, answer an id of a topic the role may not relay
-- as an unknown one: 42704).  States: no grant at all;
-- a grant of another scope; of this scope; of a prefix of it ('th*'); of
-- this scope to a group role the caller is a member of; of every scope
-- (NULL); of this scope, then revoked.  Run by pg_prove, in one transaction
-- that grants and revokes as it goes (the backend's privilege cache must
-- follow each change).
BEGIN;
CREATE EXTENSION IF NOT EXISTS dedup;
SELECT plan(229);

CREATE ROLE tap_scope_app NOLOGIN;
CREATE ROLE tap_scope_group NOLOGIN;

-- every dedup table, as one digest
CREATE FUNCTION pg_temp.state() RETURNS text LANGUAGE sql AS $$
  SELECT md5(concat_ws('|',
    (SELECT string_agg(t::text, ',' ORDER BY t::text) FROM dedup.claims AS t),
    (SELECT string_agg(t::text, ',' ORDER BY t::text) FROM dedup.outbox AS t),
    (SELECT string_agg(t::text, ',' ORDER BY t::text) FROM dedup.outbox_dead AS t),
    (SELECT string_agg(t::text, ',' ORDER BY t::text) FROM dedup.outbox_keys AS t),
    (SELECT string_agg(t::text, ',' ORDER BY t::text) FROM dedup.scopes AS t),
    (SELECT string_agg(t::text, ',' ORDER BY t::text) FROM dedup.grants AS t),
    (SELECT string_agg(t::text, ',' ORDER BY t::text) FROM dedup.streams AS t)))
$$;

-- run a statement as the application role
CREATE FUNCTION pg_temp.as_app(stmt text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    SET LOCAL ROLE tap_scope_app;
    BEGIN
        EXECUTE stmt;
    EXCEPTION WHEN OTHERS THEN
        RESET ROLE;
        RAISE;
    END;
    RESET ROLE;
END
$$;

-- the functions: name, privilege, statement (%1$s the key, %2$s an event id)
CREATE TEMP TABLE fns (fn text, privilege text, stmt text, ord serial);
INSERT INTO fns (fn, privilege, stmt) VALUES
  ('dedup_claim', 'usage', $$SELECT dedup_claim('this', '%1$s')$$),
  ('dedup_claim_batch', 'usage', $$SELECT count(*) FROM dedup_claim_batch('this', ARRAY['%1$s'])$$),
  ('dedup_begin', 'usage', $$SELECT dedup_begin('this', '%1$s')$$),
  ('dedup_complete', 'usage', $$SELECT dedup_complete('this', '%1$s', 200, '{"ok": 1}')$$),
  ('dedup_release', 'usage', $$SELECT dedup_release('this', '%1$s')$$),
  ('dedup_extend', 'usage', $$SELECT dedup_extend('this', '%1$s', 1)$$),
  ('dedup_lookup', 'usage', $$SELECT count(*) FROM dedup_lookup('this', '%1$s')$$),
  ('dedup_scope', 'usage', $$SELECT dedup_scope('this')$$),
  ('dedup_outbox_put', 'usage', $$SELECT dedup_outbox_put('this', '%1$s', '{}')$$),
  ('dedup_advance', 'usage', $$SELECT dedup_advance('this', '%1$s', 1)$$),
  ('dedup_advance_batch', 'usage', $$SELECT count(*) FROM dedup_advance_batch('this', ARRAY['%1$s'], ARRAY[1]::bigint[])$$),
  ('dedup_new_epoch', 'usage', $$SELECT dedup_new_epoch('this', '%1$s')$$),
  ('dedup_new_epoch_batch', 'usage', $$SELECT dedup_new_epoch_batch('this', ARRAY['%1$s'])$$),
  ('dedup_position', 'usage', $$SELECT count(*) FROM dedup_position('this', '%1$s')$$),
  ('dedup_streams', 'usage', $$SELECT count(*) FROM dedup_streams('this')$$),
  ('dedup_outbox_take_batch', 'relay', $$SELECT count(*) FROM dedup_outbox_take_batch('this', 100)$$),
  ('dedup_outbox_dead', 'relay', $$SELECT count(*) FROM dedup_outbox_dead('this')$$),
  ('dedup_outbox_take', 'relay', $$SELECT count(*) FROM dedup_outbox_take('this', 100)$$),
  ('dedup_outbox_ack', 'relay', $$SELECT dedup_outbox_ack(ARRAY['%2$s'::uuid])$$),
  ('dedup_outbox_nack', 'relay', $$SELECT dedup_outbox_nack(ARRAY['%2$s'::uuid])$$),
  ('dedup_outbox_stats', 'relay', $$SELECT count(*) FROM dedup_outbox_stats('this')$$);

-- the grant states: how to get there, and whether the call is allowed
CREATE TEMP TABLE states (state text, setup text, allowed boolean, ord serial);
INSERT INTO states (state, setup, allowed) VALUES
  ('no grant', $$SELECT 1$$, false),
  ('a grant of another scope', $$SELECT dedup_grant_%1$s('tap_scope_app', ARRAY['other'])$$, false),
  ('a grant of this scope', $$SELECT dedup_grant_%1$s('tap_scope_app', ARRAY['this'])$$, true),
  ('a prefix grant', $$SELECT dedup_grant_%1$s('tap_scope_app', ARRAY['th*'])$$, true),
  ('a group role''s grant', $$SELECT dedup_grant_%1$s('tap_scope_group', ARRAY['this']); GRANT tap_scope_group TO tap_scope_app$$, true),
  ('a grant of every scope', $$SELECT dedup_grant_%1$s('tap_scope_app')$$, true),
  ('a grant revoked', $$SELECT dedup_grant_%1$s('tap_scope_app', ARRAY['other', 'this']); SELECT dedup_revoke_%1$s('tap_scope_app', ARRAY['this'])$$, false);

CREATE FUNCTION pg_temp.matrix() RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
    f record;
    s record;
    n integer := 0;
    key text;
    event uuid;
    stmt text;
    before text;
    what text;
BEGIN
    FOR f IN SELECT * FROM fns ORDER BY ord LOOP
        FOR s IN SELECT * FROM states ORDER BY ord LOOP
            n := n + 1;
            key := 'k-' || n;
            -- back to nothing granted, then this state's grants
            PERFORM dedup_revoke_usage('tap_scope_app'), dedup_revoke_relay('tap_scope_app'),
                    dedup_revoke_usage('tap_scope_group'), dedup_revoke_relay('tap_scope_group');
            IF pg_has_role('tap_scope_app', 'tap_scope_group', 'MEMBER') THEN
                REVOKE tap_scope_group FROM tap_scope_app;
            END IF;
            EXECUTE format(s.setup, f.privilege);
            -- what the call needs to find: a processing record, a claim, a taken event
            IF f.fn IN ('dedup_complete', 'dedup_release', 'dedup_extend') THEN
                PERFORM dedup_begin('this', key);
            ELSIF f.fn = 'dedup_lookup' THEN
                PERFORM dedup_claim('this', key);
            END IF;
            IF f.privilege = 'relay' THEN
                event := dedup_outbox_put('this', key, '{}');
                IF f.fn IN ('dedup_outbox_ack', 'dedup_outbox_nack') THEN
                    PERFORM count(*) FROM dedup_outbox_take('this', 100);
                END IF;
            END IF;
            stmt := format('SELECT pg_temp.as_app(%L)', format(f.stmt, key, event));
            what := format('%s with %s', f.fn, s.state);
            IF s.allowed THEN
                RETURN NEXT lives_ok(stmt, what || ': allowed');
            ELSIF f.fn IN ('dedup_outbox_ack', 'dedup_outbox_nack') AND s.state <> 'no grant' THEN
                -- an id anyone can compute: one of a topic the role may
                -- not relay is answered as one found nowhere
                before := pg_temp.state();
                RETURN NEXT throws_ok(stmt, '42704', format('outbox event %s does not exist', event),
                    what || ': 42704, as an unknown id');
                RETURN NEXT is(pg_temp.state(), before, what || ': nothing changed');
            ELSE
                before := pg_temp.state();
                RETURN NEXT throws_ok(stmt, '42501',
                    CASE s.state WHEN 'no grant' THEN 'permission denied for function ' || f.fn
                                 ELSE 'permission denied for scope "this"' END,
                    what || ': 42501');
                RETURN NEXT is(pg_temp.state(), before, what || ': nothing changed');
            END IF;
        END LOOP;
    END LOOP;
END
$$;
SELECT * FROM pg_temp.matrix();

-- the message names the role; the figures of every topic list only those the role may relay
DO $$
BEGIN
    PERFORM dedup_revoke_usage('tap_scope_app'), dedup_revoke_relay('tap_scope_app');
    PERFORM dedup_grant_relay('tap_scope_app', ARRAY['this']);
    PERFORM dedup_outbox_put('other', 'o-1', '{}');
END
$$;
CREATE FUNCTION pg_temp.detail_of(stmt text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE d text;
BEGIN
    EXECUTE stmt;
    RETURN NULL;
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS d = PG_EXCEPTION_DETAIL;
    RETURN d;
END
$$;
SELECT is(pg_temp.detail_of($$SELECT pg_temp.as_app('SELECT count(*) FROM dedup_outbox_take(''other'')')$$),
          'Role "tap_scope_app" has no relay privilege on scope "other".',
          'the refusal names the role, the privilege and the scope');
SET LOCAL ROLE tap_scope_app;
CREATE TEMP TABLE seen_topics AS SELECT topic FROM dedup_outbox_stats();
RESET ROLE;
SELECT results_eq('SELECT topic COLLATE "default" FROM seen_topics', ARRAY['this'],
                  'dedup_outbox_stats() of every topic lists only the topics the role may relay');

-- redrive is the owner's; a role granted EXECUTE on it by hand still needs relay of the topic
GRANT EXECUTE ON FUNCTION dedup_outbox_redrive(text, uuid[]) TO tap_scope_app;
SELECT throws_ok($$SELECT pg_temp.as_app('SELECT dedup_outbox_redrive(''other'')')$$, '42501',
                 'permission denied for scope "other"', 'dedup_outbox_redrive checks the relay privilege');
SELECT lives_ok($$SELECT pg_temp.as_app('SELECT dedup_outbox_redrive(''this'')')$$,
                'dedup_outbox_redrive of a topic the role relays');

-- a revoke of every scope takes the functions back too; the view lists the grants
DO $$ BEGIN PERFORM dedup_grant_usage('tap_scope_app', ARRAY['a', 'b.*']); END $$;
SELECT results_eq($$SELECT (privilege || ' ' || coalesce(scope, '(every)')) COLLATE "default" FROM dedup_scope_privileges
                    WHERE role = 'tap_scope_app'::regrole ORDER BY 1$$,
                  ARRAY['relay this', 'usage a', 'usage b.*'], 'dedup_scope_privileges lists the grants');
DO $$ BEGIN PERFORM dedup_revoke_usage('tap_scope_app'); END $$;
SELECT ok(NOT has_function_privilege('tap_scope_app', 'dedup_claim(text, text, interval, boolean)', 'EXECUTE'),
          'a revoke of every scope revokes EXECUTE');
SELECT is((SELECT count(*) FROM dedup.grants WHERE role = 'tap_scope_app'::regrole AND privilege = 'usage'),
          0::bigint, 'and removes every usage grant');

-- bad scope lists: their SQLSTATE, nothing granted
SELECT throws_ok($$SELECT dedup_grant_usage('tap_scope_app', ARRAY['a*b'])$$, '22023', NULL,
                 'a "*" before the end of a scope is refused');
SELECT throws_ok($$SELECT dedup_grant_usage('tap_scope_app', ARRAY['a', NULL])$$, '22004', NULL,
                 'a NULL scope in the list is refused');
SELECT throws_ok($$SELECT dedup_grant_usage('tap_scope_app', ARRAY[''])$$, '22023', NULL,
                 'an empty scope is refused');
SELECT throws_ok($$SELECT dedup_grant_usage('tap_scope_app', ARRAY[repeat('s', 201)])$$, '22001', NULL,
                 'an over-long scope is refused');
SELECT throws_ok($$SELECT dedup_grant_usage(NULL, ARRAY['a'])$$, '22004', NULL, 'a NULL role is refused');
SELECT is((SELECT count(*) FROM dedup.grants WHERE role = 'tap_scope_app'::regrole AND privilege = 'usage'),
          0::bigint, 'nothing was granted by them');

-- the internal checks the relay's work calls: their own argument errors
SELECT throws_ok($$SELECT dedup.has_privilege('tap_scope_app'::regrole, 'this', 'bogus', false)$$, '22023',
                 'unknown dedup privilege "bogus"', 'an unknown privilege is refused');
SELECT throws_ok($$SELECT dedup.has_privilege(NULL, 'this', 'usage', false)$$, '22004',
                 'role must not be null', 'a NULL role is refused');
SELECT throws_ok($$SELECT dedup.has_privilege('tap_scope_app'::regrole, NULL, 'relay', true)$$, '22004',
                 'topic must not be null', 'a NULL scope with raise is refused');
SELECT results_eq($$SELECT dedup.has_privilege('tap_scope_app'::regrole, NULL, 'relay', false),
                           dedup.has_privilege('tap_scope_app'::regrole, NULL, 'usage', false),
                           dedup.has_privilege(current_user::regrole, NULL, 'relay', false)$$,
                  $$VALUES (false, false, true)$$,
                  'a NULL scope asks for every scope: not a grant of one scope, the owner''s');
SELECT throws_ok($$SELECT dedup.check_interval('1 day', NULL, true)$$, '22004',
                 'what and allow_zero must not be null', 'check_interval refuses a NULL name');

-- superusers and the owner need no grant
SELECT lives_ok($$SELECT dedup_claim('anything', 'k')$$, 'the owner needs no scope grant');

SELECT * FROM finish();
ROLLBACK;
