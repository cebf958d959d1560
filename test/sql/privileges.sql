-- Privileges with two application roles: what dedup_grant_usage and
-- dedup_grant_relay give, and that a role without grants is refused
-- (42501) by every function, table and view that is not meant for
-- everyone.  Nothing changes by a refused call.

CREATE ROLE regress_app NOLOGIN;
CREATE ROLE regress_relay NOLOGIN;
CREATE ROLE regress_none NOLOGIN;
SELECT dedup_grant_usage('regress_app');
SELECT dedup_grant_relay('regress_relay');

-- every function, procedure, table, sequence and view of the extension,
-- called or read by each role with NULL arguments: the privilege check
-- comes before any argument check.  A function taking internal (a type's
-- binary input) cannot be called from SQL at all: its call fails before
-- any privilege check, by an error that differs between minor releases
-- (42846 on 15.20 and 17, 0A000 on 15.18); those are listed apart.
SELECT p.oid::regprocedure AS internal_argument FROM pg_proc AS p
JOIN pg_depend AS d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'
WHERE d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'dedup')
  AND 'internal'::regtype = ANY (p.proargtypes)
ORDER BY 1;
CREATE TEMP TABLE objects AS
SELECT p.oid::regprocedure::text AS object,
       CASE p.prokind WHEN 'p' THEN 'CALL ' ELSE 'SELECT ' END
       || p.oid::regproc::text || '('
       || coalesce((SELECT string_agg('NULL::' || format_type(t, NULL), ', ')
                    FROM unnest(p.proargtypes) AS t), '')
       || ')' AS stmt
FROM pg_proc AS p
JOIN pg_depend AS d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'
WHERE d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'dedup')
  AND p.prorettype <> 'trigger'::regtype
  AND NOT 'internal'::regtype = ANY (p.proargtypes)
UNION ALL
SELECT c.oid::regclass::text, 'SELECT count(*) FROM ' || c.oid::regclass::text
FROM pg_class AS c
JOIN pg_depend AS d ON d.classid = 'pg_class'::regclass AND d.objid = c.oid AND d.deptype = 'e'
WHERE d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'dedup')
  AND c.relkind IN ('r', 'v', 'S');
SELECT count(*) AS objects FROM objects;

CREATE TEMP TABLE results (role text, object text, result text);
GRANT INSERT ON results TO PUBLIC;
GRANT SELECT ON objects TO PUBLIC;
CREATE TEMP TABLE before AS
SELECT (SELECT count(*) FROM dedup.claims) AS claims, (SELECT count(*) FROM dedup.scopes) AS scopes,
       (SELECT count(*) FROM dedup.outbox) AS outbox, (SELECT count(*) FROM dedup.outbox_keys) AS keys;

SET ROLE regress_none;
INSERT INTO results SELECT 'none', object, regress_try(stmt) FROM objects;
SET ROLE regress_app;
INSERT INTO results SELECT 'app', object, regress_try(stmt) FROM objects;
SET ROLE regress_relay;
INSERT INTO results SELECT 'relay', object, regress_try(stmt) FROM objects;
RESET ROLE;

-- a role without grants: refused everywhere but the fingerprint type
SELECT object, result FROM results WHERE role = 'none' AND result NOT LIKE '42501:%' ORDER BY object;
SELECT count(*) AS refused_for_none FROM results WHERE role = 'none' AND result LIKE '42501:%';
-- the application role: claims, records, lookups, scope settings read, puts
SELECT object FROM results
WHERE role = 'app' AND result NOT LIKE '42501:%' AND object NOT LIKE 'dedup_fingerprint%' ORDER BY object;
-- the relay role: take, ack, nack, figures
SELECT object FROM results
WHERE role = 'relay' AND result NOT LIKE '42501:%' AND object NOT LIKE 'dedup_fingerprint%' ORDER BY object;
-- what each allowed call did with NULL arguments: an argument error, never a privilege one
SELECT DISTINCT split_part(result, ':', 1) AS sqlstate FROM results
WHERE role IN ('app', 'relay') AND result NOT LIKE '42501:%' ORDER BY 1;

-- the two roles at work: the application claims and puts, the relay takes
-- and acks; neither reaches the tables
SET ROLE regress_app;
SELECT dedup_claim('priv', 'k-1') AS claimed;
SELECT dedup_outbox_put('priv', 'e-1', '{"n": 1}') IS NOT NULL AS put;
SELECT regress_try($$SELECT count(*) FROM dedup_outbox_take('priv')$$);
SELECT regress_try($$SELECT count(*) FROM dedup.claims$$);
SET ROLE regress_relay;
SELECT dedup_outbox_ack(array_agg(id)) AS acked FROM dedup_outbox_take('priv');
SELECT regress_try($$SELECT dedup_claim('priv', 'k-2')$$);
SELECT regress_try($$SELECT count(*) FROM dedup.outbox$$);
RESET ROLE;

-- nothing but those two calls changed anything: one event put, and published
SELECT (SELECT count(*) FROM dedup.claims) - claims AS new_claims,
       (SELECT count(*) FROM dedup.scopes) - scopes AS new_scopes,
       (SELECT count(*) FROM dedup.outbox) - outbox AS new_events,
       (SELECT count(*) FROM dedup.outbox_keys) - keys AS new_event_keys,
       (SELECT coalesce(sum(pending + in_flight), 0) FROM dedup_outbox_stats('priv')) AS unpublished
FROM before;

REVOKE ALL ON ALL FUNCTIONS IN SCHEMA public FROM regress_app, regress_relay;
-- (and the relay's internal function on a cluster, dedup.outbox_batch_group)
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA dedup FROM regress_app, regress_relay;
DROP ROLE regress_app;
DROP ROLE regress_relay;
DROP ROLE regress_none;
