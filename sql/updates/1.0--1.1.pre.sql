/* dedup--1.0--1.1.sql: update of dedup from 1.0 to 1.1
 * Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE. */

\echo Use "ALTER EXTENSION dedup UPDATE TO '1.1'" to load this file. \quit

/*
 * The update from 1.0 to 1.1 is built by the Makefile (dedup--1.0--1.1.sql)
 * from parts written once for it and for the install script:
 *   sql/functions/checks.sql       the checks the steps below use
 *   this file                      schema steps on 1.0's objects, by hand
 *   the types and tables new in    sql/types/fingerprint_text.sql,
 *   1.1                            sql/tables/{grants,streams,buckets,
 *                                  history,outbox_relay}.sql
 *   the function parts, grants     sql/functions/ (each file), sql/grants.sql,
 *                                  every one CREATE OR REPLACE
 *   sql/updates/1.0--1.1.post.sql  data steps, by hand
 * Here: the checks that refuse a 1.0 database 1.1 cannot take, the columns
 * and constraints 1.1 adds to 1.0's tables and types (last in the install
 * script too), and the drops of 1.0's functions whose signature or result
 * changed.  A fresh install of 1.1 must come out the same as an updated
 * 1.0 database, which test/t/014_upgrade.pl checks on a filled one.
 */

-------------------------------------------------------------------------
-- Intervals (issue 21): one rule for every ttl, lease, retention and
-- delay, checked on the calendar (dedup.interval_is_valid, from
-- sql/functions/checks.sql, built in before this file); stored settings
-- held to it
-------------------------------------------------------------------------
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

-------------------------------------------------------------------------
-- Columns 1.1 adds to 1.0's tables and types
-------------------------------------------------------------------------
-- A scope's sequence_mode (sequence marks), and its history (the history
-- tier: claims carry their scope's history_id)
ALTER TABLE dedup.scopes
    ADD COLUMN sequence_mode text COLLATE "C" CHECK (sequence_mode IN ('strict', 'monotonic'));
ALTER TABLE dedup.scopes
    ADD COLUMN history interval CHECK (dedup.interval_is_valid(history)),
    ADD COLUMN false_positive_rate double precision
               CHECK (false_positive_rate BETWEEN 0.0001 AND 0.1),
    ADD COLUMN history_id integer UNIQUE;
ALTER TABLE dedup.claims ADD COLUMN history integer;

-- Whether a record's key was taken over from a holder whose lease had
-- passed, so that a caller without an attempt is refused only then (1.0's
-- records, with no such field, count as taken over once past attempt 1, as
-- 1.0 refused them)
ALTER TYPE dedup.record_state ADD ATTRIBUTE taken_over boolean;

-- The ttl a record was begun with (dedup_begin's 1.1 form), which its
-- expiry after its lease and after completion follows instead of the
-- scope's; and, in what dedup_begin returns, the fingerprint of the stored
-- request, so that a caller told "mismatch" can see which request the key
-- was used with: as text, as every column of a row a client reads is of a
-- built-in type (sql/types/records.sql)
ALTER TYPE dedup.record_state ADD ATTRIBUTE ttl interval;
ALTER TYPE @extschema@.dedup_begin_result
    ADD ATTRIBUTE request_fingerprint text;

-- 1.0's log and dead letters become those of the outbox's partition 0,
-- the one partition of one server (sql/tables/outbox.sql).
ALTER TABLE dedup.outbox
    ADD COLUMN part @extschema@.dedup_fingerprint NOT NULL DEFAULT '00000000000000000000000000000000';
ALTER TABLE dedup.outbox ALTER COLUMN part DROP DEFAULT;
ALTER TABLE dedup.outbox_dead
    ADD COLUMN part @extschema@.dedup_fingerprint NOT NULL DEFAULT '00000000000000000000000000000000';
ALTER TABLE dedup.outbox_dead ALTER COLUMN part DROP DEFAULT;

-------------------------------------------------------------------------
-- 1.0's functions whose signature or result changed
-------------------------------------------------------------------------
-- dedup_set_scope takes and returns the sequence_mode, history and
-- false_positive_rate (it is the owner's: EXECUTE granted on it by hand
-- must be granted again), and dedup_scope returns them too.  Roles that
-- 1.0 granted dedup_scope get it back when dedup_grant_usage is run
-- again, as for the functions 1.1 adds: a GRANT here would become an
-- initial privilege, which pg_dump leaves out.
DROP FUNCTION @extschema@.dedup_set_scope(text, interval, interval, interval, integer);
DROP FUNCTION @extschema@.dedup_scope(text);

-- The grant helpers take scopes, and have revoke twins (sql/grants.sql);
-- one list of functions per privilege.
DROP FUNCTION @extschema@.dedup_grant_usage(regrole);
DROP FUNCTION @extschema@.dedup_grant_relay(regrole);
DROP FUNCTION dedup.grant_execute(regrole, regprocedure[]);
-- The check of a batch's ids takes their partition (1.0's took none).
DROP FUNCTION dedup.outbox_check_ids(uuid[], uuid[]);
-- dedup_lookup's request_fingerprint becomes text, whose text is that of
-- 1.0's dedup_fingerprint: a driver that reads the row as one value in
-- binary (asyncpg) cannot read a dedup_fingerprint in it.  Its grants come
-- back with dedup_grant_usage, as dedup_scope's do.
DROP FUNCTION @extschema@.dedup_lookup(text, text);
