/* dedup--1.0--1.1.sql: update of dedup from 1.0 to 1.1 */

\echo Use "ALTER EXTENSION dedup UPDATE TO '1.1'" to load this file. \quit

/*
 * Grown by each change of 1.1, in the order they were made; a fresh install
 * of 1.1 (built from the parts in sql/) must come out the same, which
 * test/scripts/upgrade.sh checks on a filled 1.0 database.
 */

-------------------------------------------------------------------------
-- Intervals (issue 21): one rule for every ttl, lease, retention and
-- delay, checked on the calendar; stored settings held to it
-------------------------------------------------------------------------
-- The rule for every interval taken as a ttl, lease, retention or delay
-- (22023 otherwise): no part negative, one part positive unless allow_zero,
-- and an end on the calendar, from the statement's start, at most 100
-- years later.  what names the argument in the error.
CREATE FUNCTION dedup.check_interval(value interval, what text, allow_zero boolean)
RETURNS void
AS 'MODULE_PATHNAME', 'dedup_check_interval_sql' LANGUAGE C VOLATILE;
REVOKE ALL ON FUNCTION dedup.check_interval(interval, text, boolean) FROM PUBLIC;

-- The part of that rule that does not depend on the time (no negative
-- part, one part positive, none over 100 years): the CHECK constraints of
-- dedup.scopes.
CREATE FUNCTION dedup.interval_is_valid(value interval) RETURNS boolean
AS 'MODULE_PATHNAME', 'dedup_interval_is_valid' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
REVOKE ALL ON FUNCTION dedup.interval_is_valid(interval) FROM PUBLIC;

-- 1.0 accepted intervals with negative parts (judged by a sum that counted
-- a month as 30 days): a stored one either lets a key be claimed twice or
-- makes every claim of its scope fail.  Refuse to update over one, naming
-- it, rather than change or drop a setting behind the owner's back.
DO $$
DECLARE
    bad text;
BEGIN
    SELECT string_agg(pg_catalog.format('%L (ttl %s, lease %s, retention %s)',
                                        s.scope, s.ttl, s.lease, s.retention), ', ' ORDER BY s.scope)
      INTO bad
      FROM dedup.scopes AS s
     WHERE NOT (dedup.interval_is_valid(s.ttl) AND dedup.interval_is_valid(s.lease)
                AND dedup.interval_is_valid(s.retention));
    IF bad IS NOT NULL THEN
        RAISE EXCEPTION 'dedup.scopes holds settings dedup 1.1 cannot apply'
            USING ERRCODE = '22023',
                  DETAIL = 'Scopes with an interval that has a negative part or a part over 100 years: ' || bad || '.',
                  HINT = 'Set each with dedup_set_scope() to an interval with no negative part, or forget it with dedup_reset_scope(), then update again.';
    END IF;
END
$$;
ALTER TABLE dedup.scopes
    ADD CONSTRAINT scopes_ttl_check CHECK (dedup.interval_is_valid(ttl)),
    ADD CONSTRAINT scopes_lease_check CHECK (dedup.interval_is_valid(lease)),
    ADD CONSTRAINT scopes_retention_check CHECK (dedup.interval_is_valid(retention));

CREATE OR REPLACE FUNCTION @extschema@.dedup_outbox_nack(ids uuid[],
    retry_delay interval DEFAULT '0', error text DEFAULT NULL, attempts integer[] DEFAULT NULL)
RETURNS integer
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    done uuid[];
BEGIN
    PERFORM dedup.check_writable('dedup_outbox_nack');
    PERFORM dedup.check_interval(retry_delay, 'retry_delay', true);
    WITH given AS (
        SELECT g.id, g.attempt FROM dedup.outbox_given(ids, attempts) AS g
    ), targets AS (
        SELECT o.id AS tid,
               o.attempts >= (SELECT s.max_attempts FROM @extschema@.dedup_scope(o.topic) AS s) AS dies
        FROM dedup.outbox AS o JOIN given AS g ON o.id = g.id
        WHERE o.status = 't' AND (g.attempt IS NULL OR o.attempts = g.attempt)
    ), dead AS (
        DELETE FROM dedup.outbox AS o USING targets AS t
        WHERE o.id = t.tid AND t.dies
        RETURNING o.*
    ), buried AS (
        INSERT INTO dedup.outbox_dead (seq, id, topic, aggregatetype, aggregateid, type,
                                       payload, headers, created_at, attempts, last_error)
        SELECT d.seq, d.id, d.topic, d.aggregatetype, d.aggregateid, d.type,
               d.payload, d.headers, d.created_at, d.attempts, coalesce(error, d.last_error)
        FROM dead AS d
        ON CONFLICT ON CONSTRAINT outbox_dead_pkey DO NOTHING
    ), back AS (
        UPDATE dedup.outbox AS o
        SET status = 'p', visible_at = pg_catalog.statement_timestamp() + retry_delay,
            last_error = coalesce(error, o.last_error)
        FROM targets AS t
        WHERE o.id = t.tid AND NOT t.dies
        RETURNING o.id
    )
    SELECT coalesce(array_agg(x.id), '{}') INTO done
    FROM (SELECT dead.id FROM dead UNION ALL SELECT back.id FROM back) AS x;
    IF cardinality(done) < cardinality(ids) THEN
        PERFORM dedup.outbox_check_ids(ids, done);
    END IF;
    RETURN cardinality(done);
END
$$;

