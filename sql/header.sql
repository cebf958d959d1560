/* dedup install script, built by the Makefile from the parts in sql/ (see SQL_PARTS)
 * Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE. */

\echo Use "CREATE EXTENSION dedup" to load this file. \quit

/*
 * Public functions and the fingerprint type live in the schema the
 * extension is created in (@extschema@, usually public); the tables live in
 * the fixed schema "dedup", which no role but the owner can use.  The
 * functions that write are executable by nobody but the owner until
 * granted; see dedup_grant_usage() in the README.
 */
CREATE SCHEMA dedup;
COMMENT ON SCHEMA dedup IS 'tables of the dedup extension; use its functions, not the tables';
REVOKE ALL ON SCHEMA dedup FROM PUBLIC;
