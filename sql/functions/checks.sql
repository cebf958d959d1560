-------------------------------------------------------------------------
-- Checks shared by the C functions and the plpgsql ones
-------------------------------------------------------------------------

-- What the C functions check before they write, for the relay's plpgsql
-- functions: a standby or a read-only transaction is refused with 25006
-- naming the function (and, on a standby, the standby).
CREATE OR REPLACE FUNCTION dedup.check_writable(funcname text) RETURNS void
AS 'MODULE_PATHNAME', 'dedup_check_writable_sql' LANGUAGE C STRICT VOLATILE;
REVOKE ALL ON FUNCTION dedup.check_writable(text) FROM PUBLIC;

-- The rule for every interval taken as a ttl, lease, retention or delay
-- (22023 otherwise): no part negative, one part positive unless allow_zero,
-- and an end on the calendar, from the statement's start, at most 100
-- years later.  what names the argument in the error.
CREATE OR REPLACE FUNCTION dedup.check_interval(value interval, what text, allow_zero boolean)
RETURNS void
AS 'MODULE_PATHNAME', 'dedup_check_interval_sql' LANGUAGE C VOLATILE;
REVOKE ALL ON FUNCTION dedup.check_interval(interval, text, boolean) FROM PUBLIC;

-- The part of that rule that does not depend on the time (no negative
-- part, one part positive, none over 100 years): the CHECK constraints of
-- dedup.scopes.
CREATE OR REPLACE FUNCTION dedup.interval_is_valid(value interval) RETURNS boolean
AS 'MODULE_PATHNAME', 'dedup_interval_is_valid' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
REVOKE ALL ON FUNCTION dedup.interval_is_valid(interval) FROM PUBLIC;

-- Whether a role has a privilege ('usage' or 'relay') on a scope, from
-- dedup.grants (superusers and the extension owner's roles have every one);
-- with raise, 42501 naming the scope and the role when it has not.  The
-- relay's functions, which run as the owner, check the role that called.
-- Scope NULL (without raise): whether it has the privilege on every scope.
CREATE OR REPLACE FUNCTION dedup.has_privilege(role oid, scope text, privilege text, raise boolean)
RETURNS boolean
AS 'MODULE_PATHNAME', 'dedup_has_privilege' LANGUAGE C STABLE;
REVOKE ALL ON FUNCTION dedup.has_privilege(oid, text, text, boolean) FROM PUBLIC;
