-- One rule for every interval taken as a ttl, lease, retention or delay:
-- no negative part, one part positive (a delay may be 0), and an end on
-- the calendar at most 100 years after the call.  Each refusal asserts its
-- SQLSTATE and message and that nothing was written.
\pset null '(null)'
CREATE FUNCTION pg_temp.state() RETURNS text LANGUAGE sql AS $$
  SELECT md5(coalesce((SELECT string_agg(c::text, ',' ORDER BY c::text) FROM dedup.claims AS c), '')
             || coalesce((SELECT string_agg(s.scope || s.ttl::text || s.lease::text, ',' ORDER BY s.scope)
                          FROM dedup.scopes AS s), ''))
$$;
CREATE TEMP TABLE before AS SELECT pg_temp.state() AS state;

-- 1.0 judged '-1200 mon 36500 days' as +500 days (30-day months), while
-- it ends ~25 days in the past: the key was claimed twice.  Now refused.
SELECT now() + interval '-1200 mon 36500 days' < now() AS ends_in_the_past;
SELECT regress_try($$SELECT dedup_claim('s', 'msg-1', ttl => '-1200 mon 36500 days')$$);
SELECT regress_try($$SELECT dedup_claim('s', 'msg-1', ttl => '-1200 mon 36500 days')$$);
SELECT regress_try($$SELECT * FROM dedup_claim_batch('s', ARRAY['msg-1'], ttl => '-1200 mon 36500 days')$$);
SELECT regress_try($$SELECT dedup_set_scope('s2', ttl => '-1200 mon 36500 days')$$);
SELECT regress_try($$SELECT (dedup_begin('r', 'req-1', lease => '-1200 mon 36500 days')).outcome$$);
-- mixed signs, even when the parts seem to add up to more than zero
SELECT regress_try($$SELECT dedup_claim('s', 'msg-1', ttl => '1 mon -29 days')$$);
SELECT regress_try($$SELECT dedup_claim('s', 'msg-1', ttl => '1 day -1 second')$$);
SELECT regress_try($$SELECT dedup_set_scope('s2', lease => '1 mon -29 days')$$);
SELECT regress_try($$SELECT dedup_set_scope('s2', retention => '-1 mon 40 days')$$);
-- 1.0 judged '4000000 mon -119999000 days' as +1000 days; every claim with
-- it failed with 22008, and stored as a setting it bricked the scope
SELECT regress_try($$SELECT dedup_claim('s', 'msg-1', ttl => '4000000 mon -119999000 days')$$);
SELECT regress_try($$SELECT dedup_set_scope('orders', ttl => '4000000 mon -119999000 days')$$);
SELECT regress_try($$SELECT (dedup_begin('orders', 'o-1', lease => '4000000 mon -119999000 days')).outcome$$);
-- a part over 100 years, or an end more than 100 years on
SELECT regress_try($$SELECT dedup_claim('s', 'msg-1', ttl => '4000000 mon')$$);
SELECT regress_try($$SELECT dedup_claim('s', 'msg-1', ttl => '100 years 1 day')$$);
SELECT regress_try($$SELECT dedup_claim('s', 'msg-1', ttl => '36526 days')$$);
SELECT regress_try($$SELECT dedup_claim('s', 'msg-1', ttl => '99 years 12 mons 1 second')$$);
SELECT regress_try($$SELECT dedup_set_scope('s2', ttl => '1200 mons 00:00:01')$$);
-- nothing was written by any of them
SELECT pg_temp.state() = (SELECT state FROM before) AS nothing_changed;
SELECT count(*) AS scopes FROM dedup.scopes;

-- the settings table itself refuses what no claim could apply (its CHECK
-- constraints), also for the owner's own writes
SELECT regress_try($$INSERT INTO dedup.scopes (scope, ttl) VALUES ('x', '-1200 mon 36500 days')$$);
SELECT regress_try($$INSERT INTO dedup.scopes (scope, lease) VALUES ('x', '0')$$);
SELECT regress_try($$INSERT INTO dedup.scopes (scope, retention) VALUES ('x', '1201 mons')$$);

-- what is accepted: one sign, up to 100 years to the day
SELECT dedup_claim('s', 'msg-1', ttl => '100 years');
SELECT dedup_claim('s', 'msg-1', ttl => '1 hour') AS again;
SELECT dedup_claim('s', 'msg-2', ttl => '1 mon 1 day 00:00:01');
SELECT ttl, lease FROM dedup_set_scope('orders', ttl => '7 days', lease => '30 seconds');
SELECT dedup_claim('orders', 'o-1'), dedup_claim('orders', 'o-1');
SELECT (dedup_begin('r', 'req-1', lease => '1 minute')).outcome,
       (dedup_begin('r', 'req-1', lease => '1 minute')).outcome AS again;

-- the relay's retry_delay: the same rule, but 0 is allowed
SELECT regress_try($$SELECT dedup_outbox_nack(ARRAY['00000000-0000-0000-0000-000000000001'::uuid], '-1 mon 30 days')$$);
SELECT regress_try($$SELECT dedup_outbox_nack(ARRAY['00000000-0000-0000-0000-000000000001'::uuid], '101 years')$$);
SELECT regress_try($$SELECT dedup_outbox_nack(ARRAY['00000000-0000-0000-0000-000000000001'::uuid], NULL)$$);
SELECT regress_try($$SELECT dedup_outbox_nack(ARRAY['00000000-0000-0000-0000-000000000001'::uuid], '0')$$);
