#!/usr/bin/env bash
# Scripted test: upgrades.  1.0 is the first released version: its install
# script is frozen (sql/released.sha256; a change after a release goes into
# an update script and a new default_version, whose install script the
# Makefile builds from the parts in sql/, and whose update script it builds
# from the hand-written schema and data steps sql/updates/OLD--NEW.pre.sql
# and .post.sql around the same function parts; a released update script is
# kept as sql/updates/dedup--OLD--NEW.sql and frozen).  The test
# checks that every script shipped is the one installed (Makefile DATA), that
# every script of a version older than the default one is listed as released,
# that the default version has its own install script (so that the fresh
# install is not the update under test), that every installable version has
# an update path to the default version, and then, for every installable
# version V (the default one included): CREATE EXTENSION dedup VERSION 'V',
# fill it with every kind of row (test/fixture.sh), grant an application role
# and a relay role their functions, ALTER EXTENSION dedup UPDATE, and compare
#   - every dedup table, row for row, with what it held before the update;
#   - the roles' privileges: every function privilege they had before
#     (an update that recreates a function must grant it again; but for
#     dedup_scope and dedup_lookup(text, text), whose results 1.1 changed:
#     a grant by the update would become an initial privilege), then,
#     once the grant helpers are run again as the README says (an update
#     cannot grant functions it adds without making the grant an initial
#     privilege that pg_dump would leave out), equal to a fresh install's;
#     and their scope grants: 1.0's grants become every-scope grants of
#     dedup.grants, and the roles go on working on every scope;
#   - the extension's schema with a fresh install of the default version:
#     its version, configuration tables and their conditions, member objects
#     with their privileges and initial privileges, and pg_dump's schema of
#     every member (definitions, defaults, indexes, triggers, comments);
#   - behaviour: the old rows still deduplicate, replay and relay;
#   - DROP EXTENSION leaves no dedup object behind.
# An update over a 1.0 setting that 1.1 cannot apply is refused, naming it.
# The comparison is shown to fail: four copies of the fresh install, each
# with one difference an update script could leave (a privilege, a comment,
# a missing index, an object not made a member), must each compare unequal.
#
# Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.
set -euo pipefail
. "$(dirname "$0")/../../scripts/lib.sh"
. "$DEDUP_ROOT/test/fixture.sh"

sharedir=$(pg_config --sharedir)/extension
default=$(sed -n "s/^default_version = '\(.*\)'$/\1/p" "$DEDUP_ROOT/dedup.control")
check "the default version $default has its own install script, built from sql/'s parts" \
	"$([ -f "$DEDUP_ROOT/dedup--$default.sql" ] && echo yes)" yes
# the scripts shipped: released install scripts, update scripts, the built one
# (the update scripts of a version not yet released are built as well)
scripts=$(ls "$DEDUP_ROOT"/sql/dedup--*.sql "$DEDUP_ROOT"/sql/updates/dedup--*.sql \
	"$DEDUP_ROOT"/dedup--*.sql 2>/dev/null || true)
for f in $scripts; do
	check "$(basename "$f") is installed as it is in the repository (Makefile DATA)" \
		"$(cmp -s "$f" "$sharedir/$(basename "$f")" && echo same || echo differs)" same
done
check "released install and update scripts are unchanged (sql/released.sha256)" \
	"$(cd "$DEDUP_ROOT/sql" && sha256sum --check --quiet released.sha256 2>&1 && echo unchanged)" unchanged
unlisted=
for f in $scripts; do	# a script's version is the last one in its name
	v=$(basename "$f" .sql | sed 's/.*--//')
	if [ "$v" != "$default" ] && [ "$(printf '%s\n' "$v" "$default" | sort -V | head -n 1)" = "$v" ] &&
		! grep -q "  $(basename "$f")\$" "$DEDUP_ROOT/sql/released.sha256"; then
		unlisted="$unlisted $(basename "$f")"
	fi
done
check "every script of a version before $default is listed in sql/released.sha256" "${unlisted:- none}" " none"

test_server upgrade 70
check "the server's default version is the control file's" \
	"$(q -c "SELECT default_version FROM pg_available_extensions WHERE name = 'dedup'")" "$default"
q -c "CREATE ROLE upgrade_app" -c "CREATE ROLE upgrade_relay"
grant_roles() {
	q -d "$1" -c "SELECT dedup_grant_usage('upgrade_app'), dedup_grant_relay('upgrade_relay')" >/dev/null
}
# the functions each role may execute, one line
privileges_of() {
	q -d "$1" -c "SELECT r || ': ' || string_agg(p.oid::regprocedure::text, ' ' ORDER BY p.oid::regprocedure::text)
	                FROM unnest(ARRAY['upgrade_app', 'upgrade_relay']) AS r, pg_proc AS p
	               WHERE p.proname LIKE 'dedup%' AND has_function_privilege(r, p.oid, 'EXECUTE')
	                 AND NOT has_function_privilege('public', p.oid, 'EXECUTE')
	               GROUP BY r ORDER BY r"
	if [ "$(q -d "$1" -c "SELECT to_regclass('dedup.grants') IS NOT NULL")" = t ]; then
		q -d "$1" -c "SELECT 'scope grant: ' || role || ' ' || privilege || ' ' || coalesce(scope, 'every scope')
		                FROM dedup.grants ORDER BY 1"
	fi
}
versions=$(q -c "SELECT version FROM pg_available_extension_versions WHERE name = 'dedup'
                 ORDER BY string_to_array(version, '.')::int[]")
echo "installable versions: $(echo $versions); default $default"
check "every installable version has an update path to $default" \
	"$(q -c "SELECT coalesce(string_agg(source, ' '), 'all') FROM pg_extension_update_paths('dedup')
	         WHERE target = '$default' AND source <> target AND path IS NULL")" all

# The extension's schema in database $1, as a fresh install would show it.
# Member objects are dumped by pg_dump only as CREATE EXTENSION, so a copy of
# the database gives every member back to the schema (ALTER EXTENSION DROP,
# after listing the members and their privileges) and pg_dump -s describes
# them one by one.
schema_of() {
	local copy="$1_schema"
	q -c "CREATE DATABASE $copy TEMPLATE $1"
	q -d "$copy" <<'SQL'
SELECT 'extension ' || extversion || ' in ' || extnamespace::regnamespace
       || CASE WHEN extrelocatable THEN ' relocatable' ELSE '' END
  FROM pg_extension WHERE extname = 'dedup';
SELECT 'config ' || c::regclass || ' ' || quote_literal(cond)
  FROM pg_extension, unnest(extconfig, extcondition) AS u(c, cond)
 WHERE extname = 'dedup' ORDER BY 1;
-- a table's row type and a type's array type go with the table and the type:
-- 17 records them as members too (15 does not), and drops them with them
CREATE TEMP VIEW members AS
SELECT d.classid, d.objid, o.type, o.identity
  FROM pg_depend AS d CROSS JOIN LATERAL pg_identify_object(d.classid, d.objid, d.objsubid) AS o
 WHERE d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e'
   AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'dedup')
   AND NOT (d.classid = 'pg_type'::regclass AND d.objid IN (
       SELECT typarray FROM pg_type
       UNION ALL
       SELECT t.oid FROM pg_type AS t JOIN pg_class AS c ON c.oid = t.typrelid WHERE c.relkind <> 'c'));
SELECT 'member ' || m.type || ' ' || m.identity
       || coalesce(' acl ' || (SELECT string_agg(a::text, ',' ORDER BY a::text) FROM unnest(CASE m.classid
              WHEN 'pg_proc'::regclass THEN (SELECT proacl FROM pg_proc WHERE oid = m.objid)
              WHEN 'pg_class'::regclass THEN (SELECT relacl FROM pg_class WHERE oid = m.objid)
              WHEN 'pg_type'::regclass THEN (SELECT typacl FROM pg_type WHERE oid = m.objid)
              WHEN 'pg_namespace'::regclass THEN (SELECT nspacl FROM pg_namespace WHERE oid = m.objid)
          END) AS a), '')
       || coalesce(' init ' || (SELECT string_agg(p.objsubid || ' ' || p.initprivs::text, ' ')
                                  FROM pg_init_privs AS p
                                 WHERE p.classoid = m.classid AND p.objoid = m.objid), '')
  FROM members AS m ORDER BY 1;
SELECT format('ALTER EXTENSION dedup DROP %s %s', type, identity) FROM members \gexec
SQL
	as_server "$PG_BINDIR/pg_dump" -h "$dir" -p "$port" -U postgres --schema-only "$copy" |
		grep -v '^\\\(un\)\?restrict '
	q -c "DROP DATABASE $copy"
}

q -c "CREATE DATABASE fresh"
q -d fresh -c "CREATE EXTENSION dedup"
grant_roles fresh
fresh_privileges=$(privileges_of fresh)
echo "$fresh_privileges"
check "the application role may claim" "$(grep -c '^upgrade_app: .*dedup_claim(text,text,interval,boolean)' <<<"$fresh_privileges")" 1
check "the relay role may take" "$(grep -c '^upgrade_relay: .*dedup_outbox_take(text,integer)' <<<"$fresh_privileges")" 1
schema_of fresh >"$dir/fresh.schema"
check "the fresh install's schema lists its members" \
	"$(grep -c '^member function public.dedup_claim(' "$dir/fresh.schema")" 5

for v in $versions; do
	db="from_${v//[^0-9a-z]/_}"
	q -c "CREATE DATABASE $db"
	q -d "$db" -c "CREATE EXTENSION dedup VERSION '$v'"
	check "$db: installed at version $v" \
		"$(q -d "$db" -c "SELECT extversion FROM pg_extension WHERE extname = 'dedup'")" "$v"
	fixture_fill "$db"
	grant_roles "$db"
	before=$(fixture_snapshot "$db")
	# dedup_scope and dedup_lookup(text, text), whose results 1.1 changed,
	# are made again by the update: their grants come back with the grant
	# helpers, as a new function's do
	privileges_before=$(privileges_of "$db" | grep -v '^scope grant: ' |
		sed 's/ dedup_scope(text)//; s/ dedup_lookup(text,text)//')
	q -d "$db" -c "ALTER EXTENSION dedup UPDATE"
	check "$db: updated to $default" \
		"$(q -d "$db" -c "SELECT extversion FROM pg_extension WHERE extname = 'dedup'")" "$default"
	check "$db: every dedup table as before the update" "$(fixture_snapshot "$db")" "$before"
	check "$db: the roles keep every function privilege they had" \
		"$(privileges_of "$db" | grep -v '^scope grant: ' | awk -v before="$privileges_before" '
			BEGIN { n = split(before, lines, "\n")
			        for (i = 1; i <= n; i++) { m = split(lines[i], w, " "); for (j = 2; j <= m; j++) had[w[1] " " w[j]] = 1 } }
			{ out = $1; for (j = 2; j <= NF; j++) if (($1 " " $j) in had) out = out " " $j; print out }')" \
		"$privileges_before"
	# functions a version adds are not granted by its update (a GRANT in an
	# extension script becomes an initial privilege, which pg_dump leaves
	# out): the README says to run the grant helpers again, as here
	grant_roles "$db"
	check "$db: the roles' privileges as a fresh install's, once granted again" \
		"$(privileges_of "$db")" "$fresh_privileges"
	schema_of "$db" >"$dir/$db.schema"
	check "$db: schema equal to a fresh install of $default" \
		"$(diff "$dir/fresh.schema" "$dir/$db.schema" && echo equal)" equal
	check "$db: the application role claims and the relay role reads its figures, on every scope as in 1.0" \
		"$(q -d "$db" -c "SET ROLE upgrade_app" -c "SELECT dedup_claim('orders', 'o-1')" \
			-c "SET ROLE upgrade_relay" -c "SELECT count(*) FROM dedup_outbox_stats()")" "f
1"
	fixture_check "$db"
	# 1.0's table is bucket 0: after a switch to bucket 1 its claims still
	# count, and DROP EXTENSION takes the new bucket with it
	q -d "$db" -c "CALL dedup_cleanup()" >/dev/null
	q -d "$db" -c "UPDATE dedup.buckets SET opened_at = opened_at - interval '7 hours'"
	q -d "$db" -c "CALL dedup_cleanup()" >/dev/null
	check "$db: a switch to bucket 1 keeps the rows of bucket 0" \
		"$(q -d "$db" -c "SELECT string_agg(bucket || ':' || state::text || ':' || coalesce(claims + records, 0), ',' ORDER BY bucket) FROM dedup.buckets")" \
		"0:s:$(q -d "$db" -c "SELECT count(*) FROM ONLY dedup.claims"),1:c:0"
	check "$db: a claim of 1.0 is a duplicate across buckets, a new one goes into bucket 1" \
		"$(q -d "$db" -c "SELECT dedup_claim('orders', 'o-1'), dedup_claim('orders', 'o-new')" -c "SELECT count(*) FROM dedup.claims_1")" "f|t
1"
	# a scope of 1.0 given a history: its claims carry it, an expired one
	# stays a duplicate, and the fold of its bucket keeps it
	check "$db: a 1.0 scope given a history: an expired claim is still a duplicate" \
		"$(q -d "$db" -c "SELECT history FROM dedup_set_scope('orders', history => '1 day')" \
			-c "SELECT dedup_claim('orders', 'o-hist', ttl => '1 second')" -c "SELECT pg_sleep(1.1)" \
			-c "SELECT dedup_claim('orders', 'o-hist'), dedup_seen('orders', 'o-hist')")" "1 day
t

f|history"
	q -d "$db" -c "UPDATE dedup.buckets SET opened_at = opened_at - interval '7 hours' WHERE state = 'c'" >/dev/null
	q -d "$db" -c "CALL dedup_cleanup()" >/dev/null
	q -d "$db" -c "UPDATE dedup.buckets SET max_expires_at = now() - interval '1 minute'" >/dev/null
	q -d "$db" -c "CALL dedup_cleanup()" >/dev/null
	check "$db: once its bucket is folded and gone, the history answers" \
		"$(q -d "$db" -c "SELECT count(*) FROM dedup.buckets WHERE bucket = 1" -c "SELECT dedup_seen('orders', 'o-hist'), keys FROM dedup_history('orders')")" "0
history|1"
	q -d "$db" -c "DROP EXTENSION dedup"
	check "$db: DROP EXTENSION leaves nothing behind" \
		"$(q -d "$db" -c "SELECT (SELECT count(*) FROM pg_proc WHERE proname LIKE '%dedup%')
		                        + (SELECT count(*) FROM pg_type WHERE typname LIKE '%dedup%')
		                        + (SELECT count(*) FROM pg_class WHERE relname LIKE '%dedup%')
		                        + (SELECT count(*) FROM pg_namespace WHERE nspname = 'dedup')")" 0
done

# 1.0 stored intervals with negative parts, which 1.1 cannot apply (the 1.0
# library stored them; the rows are written directly here, since this
# library refuses them whatever the SQL version): the
# update refuses (22023, naming the scope), changes nothing, and goes
# through once the setting is set again.
if grep -qw 1.0 <<<"$versions" && [ "$default" != 1.0 ]; then
	q -c "CREATE DATABASE bad_setting"
	q -d bad_setting -c "CREATE EXTENSION dedup VERSION '1.0'" \
		-c "INSERT INTO dedup.scopes (scope, ttl) VALUES ('bent', '-1200 mon 36500 days')"
	check "an update over a setting 1.1 cannot apply is refused, naming it" \
		"$(q -d bad_setting -c "ALTER EXTENSION dedup UPDATE" 2>&1 | grep -o "ERROR:  dedup.scopes holds settings dedup 1.1 cannot apply\|'bent' (ttl -100 years +36500 days" | paste -sd'|')" \
		"ERROR:  dedup.scopes holds settings dedup 1.1 cannot apply|'bent' (ttl -100 years +36500 days"
	check "the refused update left version 1.0 and the setting" \
		"$(q -d bad_setting -c "SELECT extversion || ' ' || (SELECT ttl FROM dedup.scopes) FROM pg_extension WHERE extname = 'dedup'")" \
		"1.0 -100 years +36500 days"
	q -d bad_setting -c "SELECT FROM dedup_set_scope('bent', ttl => '25 days')" -c "ALTER EXTENSION dedup UPDATE"
	check "once set again, the update goes through" \
		"$(q -d bad_setting -c "SELECT extversion FROM pg_extension WHERE extname = 'dedup'")" "$default"
fi

# The comparison can fail: each of these differences must be seen.
n=0
while IFS='|' read -r what sql; do
	n=$((n + 1))
	q -c "CREATE DATABASE mutant$n TEMPLATE fresh"
	q -d "mutant$n" -c "$sql"
	schema_of "mutant$n" >"$dir/mutant$n.schema"
	check "the comparison sees $what" \
		"$(diff -q "$dir/fresh.schema" "$dir/mutant$n.schema" >/dev/null && echo equal || echo differs)" differs
done <<'EOF'
a privilege granted to PUBLIC|GRANT EXECUTE ON FUNCTION dedup_lookup(text, text) TO PUBLIC
a changed comment|COMMENT ON TABLE dedup.claims IS 'changed'
a missing index|DROP INDEX dedup.outbox_retry_aggregate_seq
a function that is not a member|CREATE FUNCTION dedup.left_out() RETURNS int LANGUAGE sql AS 'SELECT 1'
EOF
echo "upgrade: every installable version ($(echo $versions)) updates to $default with its rows, schema and behaviour"
