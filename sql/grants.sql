-------------------------------------------------------------------------
-- Privileges: the functions that read or write claims and settings are
-- for roles granted them, not for PUBLIC.
-------------------------------------------------------------------------
REVOKE ALL ON FUNCTION
    @extschema@.dedup_set_scope(text, interval, interval, interval, integer),
    @extschema@.dedup_reset_scope(text),
    @extschema@.dedup_scope(text),
    @extschema@.dedup_claim(text, text, interval, boolean),
    @extschema@.dedup_claim(text, bytea, interval, boolean),
    @extschema@.dedup_claim(text, uuid, interval, boolean),
    @extschema@.dedup_claim(text, @extschema@.dedup_fingerprint, interval, boolean),
    @extschema@.dedup_claim_batch(text, text[], interval, boolean),
    @extschema@.dedup_claim_batch(text, bytea[], interval, boolean),
    @extschema@.dedup_claim_batch(text, uuid[], interval, boolean),
    @extschema@.dedup_claim_batch(text, @extschema@.dedup_fingerprint[], interval, boolean),
    @extschema@.dedup_cleanup_batch(bigint, integer),
    @extschema@.dedup_begin(text, text, jsonb, interval),
    @extschema@.dedup_complete(text, text, integer, jsonb, integer),
    @extschema@.dedup_release(text, text, integer),
    @extschema@.dedup_lookup(text, text)
FROM PUBLIC;
REVOKE ALL ON PROCEDURE @extschema@.dedup_cleanup(integer, bigint) FROM PUBLIC;
REVOKE ALL ON FUNCTION
    @extschema@.dedup_outbox_put(text, text, jsonb, text, text, jsonb, text),
    @extschema@.dedup_outbox_take(text, integer),
    @extschema@.dedup_outbox_ack(uuid[], integer[]),
    @extschema@.dedup_outbox_nack(uuid[], interval, text, integer[]),
    @extschema@.dedup_outbox_redrive(text, uuid[]),
    @extschema@.dedup_outbox_stats(text)
FROM PUBLIC;
-- Figures are for monitoring roles, as pg_stat_statements' are.
REVOKE ALL ON FUNCTION @extschema@.dedup_cleanup_stats(boolean) FROM PUBLIC;
REVOKE ALL ON @extschema@.dedup_cleanup_stats FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.dedup_cleanup_stats(boolean) TO pg_monitor;
GRANT SELECT ON @extschema@.dedup_cleanup_stats TO pg_monitor;

-- GRANT EXECUTE on functions to a role: what the grant helpers share.
CREATE FUNCTION dedup.grant_execute(role regrole, functions regprocedure[])
RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    fn regprocedure;
BEGIN
    IF role IS NULL THEN
        RAISE EXCEPTION 'role must not be null' USING ERRCODE = '22004';
    END IF;
    FOREACH fn IN ARRAY functions
    LOOP
        EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO %s', fn, role);
    END LOOP;
END
$$;
REVOKE ALL ON FUNCTION dedup.grant_execute(regrole, regprocedure[]) FROM PUBLIC;

-- What an application role needs to claim keys and read scope settings.
CREATE FUNCTION @extschema@.dedup_grant_usage(role regrole)
RETURNS void
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT dedup.grant_execute(role, ARRAY[
        '@extschema@.dedup_scope(text)',
        '@extschema@.dedup_claim(text, text, interval, boolean)',
        '@extschema@.dedup_claim(text, bytea, interval, boolean)',
        '@extschema@.dedup_claim(text, uuid, interval, boolean)',
        '@extschema@.dedup_claim(text, @extschema@.dedup_fingerprint, interval, boolean)',
        '@extschema@.dedup_claim_batch(text, text[], interval, boolean)',
        '@extschema@.dedup_claim_batch(text, bytea[], interval, boolean)',
        '@extschema@.dedup_claim_batch(text, uuid[], interval, boolean)',
        '@extschema@.dedup_claim_batch(text, @extschema@.dedup_fingerprint[], interval, boolean)',
        '@extschema@.dedup_begin(text, text, jsonb, interval)',
        '@extschema@.dedup_complete(text, text, integer, jsonb, integer)',
        '@extschema@.dedup_release(text, text, integer)',
        '@extschema@.dedup_lookup(text, text)',
        '@extschema@.dedup_outbox_put(text, text, jsonb, text, text, jsonb, text)'
    ]::regprocedure[])
$$;
COMMENT ON FUNCTION @extschema@.dedup_grant_usage(regrole) IS
    'grant an application role what it needs to claim keys, use idempotency records and put outbox events (not to change scope settings or run the cleanup)';
REVOKE ALL ON FUNCTION @extschema@.dedup_grant_usage(regrole) FROM PUBLIC;

-- What a relay role needs to publish outbox events.
CREATE FUNCTION @extschema@.dedup_grant_relay(role regrole)
RETURNS void
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT dedup.grant_execute(role, ARRAY[
        '@extschema@.dedup_outbox_take(text, integer)',
        '@extschema@.dedup_outbox_ack(uuid[], integer[])',
        '@extschema@.dedup_outbox_nack(uuid[], interval, text, integer[])',
        '@extschema@.dedup_outbox_stats(text)'
    ]::regprocedure[])
$$;
COMMENT ON FUNCTION @extschema@.dedup_grant_relay(regrole) IS
    'grant a relay role what it needs to take, ack and nack outbox events and read their figures (not to redrive)';
REVOKE ALL ON FUNCTION @extschema@.dedup_grant_relay(regrole) FROM PUBLIC;
