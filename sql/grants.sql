-------------------------------------------------------------------------
-- Privileges: the functions that read or write claims and settings are
-- for roles granted them, not for PUBLIC; figures are for monitoring
-- roles, as pg_stat_statements' are.
-------------------------------------------------------------------------
-- The functions a role of each privilege is granted EXECUTE on: the one
-- list the grant and revoke helpers read.
CREATE OR REPLACE FUNCTION dedup.functions_of(privilege text)
RETURNS regprocedure[]
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT CASE privilege
    WHEN 'usage' THEN ARRAY[
        '@extschema@.dedup_scope(text)',
        '@extschema@.dedup_claim(text, text, interval, boolean)',
        '@extschema@.dedup_claim(text, bytea, interval, boolean)',
        '@extschema@.dedup_claim(text, uuid, interval, boolean)',
        '@extschema@.dedup_claim(text, @extschema@.dedup_fingerprint, interval, boolean)',
        '@extschema@.dedup_claim(text, bigint, interval, boolean)',
        '@extschema@.dedup_claim_batch(text, text[], interval, boolean)',
        '@extschema@.dedup_claim_batch(text, bytea[], interval, boolean)',
        '@extschema@.dedup_claim_batch(text, uuid[], interval, boolean)',
        '@extschema@.dedup_claim_batch(text, @extschema@.dedup_fingerprint[], interval, boolean)',
        '@extschema@.dedup_claim_batch(text, bigint[], interval, boolean)',
        '@extschema@.dedup_begin(text, text, jsonb, interval)',
        '@extschema@.dedup_begin(text, text, jsonb, interval, interval, text[])',
        '@extschema@.dedup_begin(text, bytea, jsonb, interval, interval, text[])',
        '@extschema@.dedup_begin(text, uuid, jsonb, interval, interval, text[])',
        '@extschema@.dedup_begin(text, @extschema@.dedup_fingerprint, jsonb, interval, interval, text[])',
        '@extschema@.dedup_begin(text, bigint, jsonb, interval, interval, text[])',
        '@extschema@.dedup_begin(text, bytea, jsonb, interval)',
        '@extschema@.dedup_begin(text, uuid, jsonb, interval)',
        '@extschema@.dedup_begin(text, @extschema@.dedup_fingerprint, jsonb, interval)',
        '@extschema@.dedup_begin(text, bigint, jsonb, interval)',
        '@extschema@.dedup_extend(text, text, integer, interval)',
        '@extschema@.dedup_extend(text, bytea, integer, interval)',
        '@extschema@.dedup_extend(text, uuid, integer, interval)',
        '@extschema@.dedup_extend(text, @extschema@.dedup_fingerprint, integer, interval)',
        '@extschema@.dedup_extend(text, bigint, integer, interval)',
        '@extschema@.dedup_complete(text, text, integer, jsonb, integer)',
        '@extschema@.dedup_complete(text, bytea, integer, jsonb, integer)',
        '@extschema@.dedup_complete(text, uuid, integer, jsonb, integer)',
        '@extschema@.dedup_complete(text, @extschema@.dedup_fingerprint, integer, jsonb, integer)',
        '@extschema@.dedup_complete(text, bigint, integer, jsonb, integer)',
        '@extschema@.dedup_release(text, text, integer)',
        '@extschema@.dedup_release(text, bytea, integer)',
        '@extschema@.dedup_release(text, uuid, integer)',
        '@extschema@.dedup_release(text, @extschema@.dedup_fingerprint, integer)',
        '@extschema@.dedup_release(text, bigint, integer)',
        '@extschema@.dedup_lookup(text, text)',
        '@extschema@.dedup_lookup(text, bytea)',
        '@extschema@.dedup_lookup(text, uuid)',
        '@extschema@.dedup_lookup(text, @extschema@.dedup_fingerprint)',
        '@extschema@.dedup_lookup(text, bigint)',
        '@extschema@.dedup_seen(text, text)',
        '@extschema@.dedup_seen(text, bytea)',
        '@extschema@.dedup_seen(text, uuid)',
        '@extschema@.dedup_seen(text, @extschema@.dedup_fingerprint)',
        '@extschema@.dedup_seen(text, bigint)',
        '@extschema@.dedup_history(text)',
        '@extschema@.dedup_outbox_put(text, text, jsonb, text, text, jsonb, text)',
        '@extschema@.dedup_advance(text, text, bigint, bigint, boolean)',
        '@extschema@.dedup_advance_batch(text, text[], bigint[], bigint[], boolean)',
        '@extschema@.dedup_new_epoch(text, text)',
        '@extschema@.dedup_new_epoch_batch(text, text[])',
        '@extschema@.dedup_position(text, text)',
        '@extschema@.dedup_streams(text)'
    ]::regprocedure[]
    WHEN 'relay' THEN ARRAY[
        '@extschema@.dedup_outbox_take(text, integer)',
        '@extschema@.dedup_outbox_take_batch(text, integer, interval, interval)',
        '@extschema@.dedup_outbox_extend_batch(bigint, interval)',
        '@extschema@.dedup_outbox_ack_batch(bigint, uuid[], interval, text)',
        '@extschema@.dedup_outbox_nack_batch(bigint, interval, text)',
        '@extschema@.dedup_outbox_ack(uuid[], integer[])',
        '@extschema@.dedup_outbox_nack(uuid[], interval, text, integer[])',
        '@extschema@.dedup_outbox_stats(text)',
        '@extschema@.dedup_outbox_dead(text, integer)',
        'dedup.outbox_batch_group(bigint, bigint[])'
    ]::regprocedure[]
    END
$$;
REVOKE ALL ON FUNCTION dedup.functions_of(text) FROM PUBLIC;

-- Written once for the install script and for the update from 1.0, which
-- the Makefile builds from the same parts: a privilege statement run by
-- CREATE or ALTER EXTENSION records the object's privileges as its initial
-- ones (pg_init_privs), which pg_dump leaves out.  Run by the update on an
-- object 1.0 made, it would record the grants its users made since as
-- initial, and a dump of the database would lose them.  So these are run
-- only on the objects the script has just made, which have no privileges
-- set yet; 1.0's keep theirs.
DO $$
DECLARE
    f regprocedure;
    v regclass;
BEGIN
    -- what roles are granted (the one list), and the owner's
    FOREACH f IN ARRAY dedup.functions_of('usage') || dedup.functions_of('relay') || ARRAY[
        '@extschema@.dedup_set_scope(text, interval, interval, interval, integer, text, interval, double precision)',
        '@extschema@.dedup_reset_scope(text)',
        '@extschema@.dedup_cleanup_batch(bigint, integer)',
        '@extschema@.dedup_cleanup(integer, bigint)',
        '@extschema@.dedup_outbox_redrive(text, uuid[])'
    ]::regprocedure[] LOOP
        IF (SELECT p.proacl IS NULL FROM pg_catalog.pg_proc AS p WHERE p.oid = f) THEN
            EXECUTE pg_catalog.format('REVOKE ALL ON ROUTINE %s FROM PUBLIC', f);
        END IF;
    END LOOP;
    -- the figures, a function and a view of each kind
    FOREACH f IN ARRAY ARRAY[
        '@extschema@.dedup_cleanup_stats(boolean)',
        '@extschema@.dedup_scope_stats(boolean)'
    ]::regprocedure[] LOOP
        IF (SELECT p.proacl IS NULL FROM pg_catalog.pg_proc AS p WHERE p.oid = f) THEN
            EXECUTE pg_catalog.format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', f);
            EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION %s TO pg_monitor', f);
        END IF;
    END LOOP;
    FOREACH v IN ARRAY ARRAY[
        '@extschema@.dedup_cleanup_stats',
        '@extschema@.dedup_scope_stats'
    ]::regclass[] LOOP
        IF (SELECT c.relacl IS NULL FROM pg_catalog.pg_class AS c WHERE c.oid = v) THEN
            EXECUTE pg_catalog.format('REVOKE ALL ON %s FROM PUBLIC', v);
            EXECUTE pg_catalog.format('GRANT SELECT ON %s TO pg_monitor', v);
        END IF;
    END LOOP;
END
$$;

-- What the four helpers share: check the scopes, then add (GRANT EXECUTE on
-- the privilege's functions and a row of dedup.grants per scope, one NULL
-- row for every scope) or remove (the rows of the scopes given; with NULL,
-- every row of the privilege and the EXECUTE grants).  The GRANT and REVOKE
-- are run on a Citus cluster's workers too (dedup.run_everywhere).
CREATE OR REPLACE FUNCTION dedup.change_grant(role regrole, privilege text, scopes text[], adding boolean)
RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    fn regprocedure;
    s text;
BEGIN
    IF role IS NULL THEN
        RAISE EXCEPTION 'role must not be null' USING ERRCODE = '22004';
    END IF;
    IF array_ndims(scopes) > 1 THEN
        RAISE EXCEPTION 'scopes must be a one-dimensional array' USING ERRCODE = '2202E';
    END IF;
    FOREACH s IN ARRAY coalesce(scopes, '{}')
    LOOP
        IF s IS NULL THEN
            RAISE EXCEPTION 'scopes must not contain null' USING ERRCODE = '22004',
                HINT = 'Pass NULL instead of the array for every scope.';
        ELSIF s = '' THEN
            RAISE EXCEPTION 'scope must not be empty' USING ERRCODE = '22023';
        ELSIF octet_length(s) > 200 THEN
            RAISE EXCEPTION 'scope name is too long' USING ERRCODE = '22001',
                DETAIL = format('The scope name has %s bytes; the limit is 200.', octet_length(s));
        ELSIF strpos(s, '*') BETWEEN 1 AND length(s) - 1 THEN
            RAISE EXCEPTION 'scope % has a "*" before its end', quote_literal(s) USING ERRCODE = '22023',
                HINT = 'A "*" may only end a scope, which then names every scope it begins (''payments.*'').';
        END IF;
    END LOOP;
    IF adding THEN
        FOREACH fn IN ARRAY dedup.functions_of(privilege)
        LOOP
            PERFORM dedup.run_everywhere(format('GRANT EXECUTE ON FUNCTION %s TO %s', fn, role));
        END LOOP;
        -- the role by name: on a Citus cluster, where dedup.grants is a
        -- reference table, each node stores its own OID of it
        FOREACH s IN ARRAY coalesce(scopes, ARRAY[NULL::text])
        LOOP
            EXECUTE format('INSERT INTO dedup.grants AS g (role, privilege, scope)'
                           ' VALUES (%L::pg_catalog.regrole, %L, %L)'
                           ' ON CONFLICT ON CONSTRAINT grants_role_privilege_scope_key DO NOTHING',
                           role::text, privilege, s);
        END LOOP;
    ELSE
        DELETE FROM dedup.grants AS g
        WHERE g.role::oid = change_grant.role::oid AND g.privilege = change_grant.privilege
          AND (scopes IS NULL OR g.scope = ANY (scopes));
        IF scopes IS NULL THEN
            FOREACH fn IN ARRAY dedup.functions_of(privilege)
            LOOP
                PERFORM dedup.run_everywhere(format('REVOKE EXECUTE ON FUNCTION %s FROM %s', fn, role));
            END LOOP;
        END IF;
    END IF;
END
$$;
REVOKE ALL ON FUNCTION dedup.change_grant(regrole, text, text[], boolean) FROM PUBLIC;

-- What an application role needs to claim keys, use records, put outbox
-- events and read scope settings, on the scopes given (NULL: every scope).
CREATE OR REPLACE FUNCTION @extschema@.dedup_grant_usage(role regrole, scopes text[] DEFAULT NULL)
RETURNS void
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT dedup.change_grant(role, 'usage', scopes, true)
$$;
COMMENT ON FUNCTION @extschema@.dedup_grant_usage(regrole, text[]) IS
    'let an application role claim keys, use idempotency records and put outbox events of the scopes given (NULL: every scope; ''p*'': every scope beginning with p); grants add up';
REVOKE ALL ON FUNCTION @extschema@.dedup_grant_usage(regrole, text[]) FROM PUBLIC;

CREATE OR REPLACE FUNCTION @extschema@.dedup_revoke_usage(role regrole, scopes text[] DEFAULT NULL)
RETURNS void
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT dedup.change_grant(role, 'usage', scopes, false)
$$;
COMMENT ON FUNCTION @extschema@.dedup_revoke_usage(regrole, text[]) IS
    'take back an application role''s usage of the scopes given, as they were granted; NULL takes back every scope and the functions';
REVOKE ALL ON FUNCTION @extschema@.dedup_revoke_usage(regrole, text[]) FROM PUBLIC;

-- What a relay role needs to publish outbox events of the topics given.
CREATE OR REPLACE FUNCTION @extschema@.dedup_grant_relay(role regrole, topics text[] DEFAULT NULL)
RETURNS void
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT dedup.change_grant(role, 'relay', topics, true)
$$;
COMMENT ON FUNCTION @extschema@.dedup_grant_relay(regrole, text[]) IS
    'let a relay role take, ack and nack outbox events of the topics given and read their figures (NULL: every topic; ''p*'': every topic beginning with p); not redrive';
REVOKE ALL ON FUNCTION @extschema@.dedup_grant_relay(regrole, text[]) FROM PUBLIC;

CREATE OR REPLACE FUNCTION @extschema@.dedup_revoke_relay(role regrole, topics text[] DEFAULT NULL)
RETURNS void
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT dedup.change_grant(role, 'relay', topics, false)
$$;
COMMENT ON FUNCTION @extschema@.dedup_revoke_relay(regrole, text[]) IS
    'take back a relay role''s relay of the topics given, as they were granted; NULL takes back every topic and the functions';
REVOKE ALL ON FUNCTION @extschema@.dedup_revoke_relay(regrole, text[]) FROM PUBLIC;

-- Who may use or relay which scopes, as granted (members of a role have its
-- grants; superusers and the extension owner's roles need none).
CREATE OR REPLACE VIEW @extschema@.dedup_scope_privileges AS
    SELECT g.role, g.privilege, g.scope, g.granted_at
    FROM dedup.grants AS g;
COMMENT ON VIEW @extschema@.dedup_scope_privileges IS
    'the scopes (usage) and topics (relay) granted to each role; scope NULL is every scope, ''p*'' every scope beginning with p';
REVOKE ALL ON @extschema@.dedup_scope_privileges FROM PUBLIC;
