-- Who may use which scopes: a role with 'usage' of a scope may claim its
-- keys, begin, complete, release and look up its records, put outbox events
-- of it (as a topic) and read its settings; a role with 'relay' of a topic
-- may take, ack and nack its events and read their figures.  scope NULL is
-- every scope, present and future; a scope ending in '*' is a prefix
-- ('payments.*').  Members of a role have its grants (has_privs_of_role);
-- superusers and the extension owner's roles need none.  Changed through
-- dedup_grant_usage(), dedup_grant_relay() and their revoke twins; the
-- statement trigger empties every backend's cache of them.
CREATE TABLE dedup.grants (
    role       regrole NOT NULL,
    privilege  text COLLATE "C" NOT NULL CHECK (privilege IN ('usage', 'relay')),
    scope      text COLLATE "C" CHECK (scope <> '' AND octet_length(scope) <= 200),
    granted_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
    CONSTRAINT grants_role_privilege_scope_key UNIQUE NULLS NOT DISTINCT (role, privilege, scope)
) USING heap;
COMMENT ON TABLE dedup.grants IS 'scopes and topics each role may use (usage) or relay; change them with dedup_grant_usage() and dedup_grant_relay()';
CREATE TRIGGER grants_changed
    AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON dedup.grants
    FOR EACH STATEMENT EXECUTE FUNCTION dedup.scopes_changed();
SELECT pg_catalog.pg_extension_config_dump('dedup.grants', '');
