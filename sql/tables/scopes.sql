-- Per-scope settings; a NULL setting, or no row, means the GUC default.
-- A stored interval is one every claim can apply: no negative part, none
-- over 100 years (dedup.interval_is_valid; dedup_set_scope also checks its
-- end on the calendar when it is set).
CREATE TABLE dedup.scopes (
    scope      text COLLATE "C" NOT NULL,
    ttl        interval,
    lease      interval,
    retention  interval,
    max_attempts integer CHECK (max_attempts >= 1),
    updated_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
    sequence_mode text COLLATE "C" CHECK (sequence_mode IN ('strict', 'monotonic')),
    history    interval CHECK (dedup.interval_is_valid(history)),
    false_positive_rate double precision
               CHECK (false_positive_rate BETWEEN 0.0001 AND 0.1),
    history_id integer UNIQUE,
    CONSTRAINT scopes_pkey PRIMARY KEY (scope),
    CONSTRAINT scopes_ttl_check CHECK (dedup.interval_is_valid(ttl)),
    CONSTRAINT scopes_lease_check CHECK (dedup.interval_is_valid(lease)),
    CONSTRAINT scopes_retention_check CHECK (dedup.interval_is_valid(retention))
) USING heap;
COMMENT ON TABLE dedup.scopes IS 'per-scope settings; change them with dedup_set_scope()';

-- every change to the settings empties the backends' caches of them
CREATE FUNCTION dedup.scopes_changed() RETURNS trigger
AS 'MODULE_PATHNAME', 'dedup_scopes_changed' LANGUAGE C;
REVOKE ALL ON FUNCTION dedup.scopes_changed() FROM PUBLIC;
CREATE TRIGGER scopes_changed
    AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON dedup.scopes
    FOR EACH STATEMENT EXECUTE FUNCTION dedup.scopes_changed();
SELECT pg_catalog.pg_extension_config_dump('dedup.scopes', '');
