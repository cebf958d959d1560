#!/usr/bin/env bash
# Scripted test: pg_dump / pg_restore keep every claim, record, scope
# setting, outbox event, per-scope grant and sequence mark.  A database with all of them (claims of three
# key types, processing and complete records with responses, a released
# record's tombstone, scope settings, outbox events pending, in flight and
# dead, outbox keys, the outbox's sequence advanced) is dumped in custom
# format and restored into a new database, and dumped as plain SQL and
# replayed into another; CREATE EXTENSION comes from the dump.  Every
# dedup table must compare equal row for row, and the restored copies must
# behave as the original (test/fixture.sh's fixture_check).
#
# Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.
set -euo pipefail
. "$(dirname "$0")/../../scripts/lib.sh"

test_server dump 70
. "$DEDUP_ROOT/test/fixture.sh"
q -c "CREATE DATABASE src" -c "CREATE DATABASE restored" -c "CREATE DATABASE replayed"
q -d src -c "CREATE EXTENSION dedup"
fixture_fill src
# per-scope privileges: the grants (dedup.grants) and the EXECUTE they come with
q -c "CREATE ROLE dump_app" -c "CREATE ROLE dump_relay"
q -d src -c "SELECT dedup_grant_usage('dump_app', ARRAY['orders', 'charges.*']),
                    dedup_grant_relay('dump_relay', ARRAY['events'])" >/dev/null
grants_of() {	# the grants, and what each role may do, in database $1
	q -d "$1" -c "SELECT role || ' ' || privilege || ' ' || coalesce(scope, '(every)')
	                FROM dedup_scope_privileges ORDER BY 1"
	q -d "$1" -c "SET ROLE dump_app" -c "SELECT dedup_claim('orders', 'o-1')" 2>&1
	{ q -d "$1" -c "SET ROLE dump_app" -c "SELECT dedup_claim('other', 'x-1')" 2>&1 || true; } |
		grep -o 'permission denied for scope "other"'
	q -d "$1" -c "SET ROLE dump_relay" -c "SELECT count(*) FROM dedup_outbox_stats('events')" 2>&1
	{ q -d "$1" -c "SET ROLE dump_relay" -c "SELECT count(*) FROM dedup_outbox_stats('orders')" 2>&1 || true; } |
		grep -o 'permission denied for scope "orders"'
}
# sequence marks: a strict scope, streams with and without an epoch
q -d src -c "SELECT dedup_set_scope('log', sequence_mode => 'strict')" \
	-c "SELECT dedup_advance('log', 'p-0', 41), dedup_advance('log', 'p-0', 42)" \
	-c "SELECT dedup_new_epoch('log', 'producer'), dedup_advance('log', 'producer', 7, epoch => 1)" >/dev/null
marks_of() {	# the marks, and how they decide, in database $1
	q -d "$1" -c "SELECT stream || ' ' || coalesce(mark::text, '-') || ' ' || coalesce(epoch::text, '-')
	                FROM dedup_streams('log') ORDER BY 1"
	q -d "$1" -c "BEGIN" -c "SELECT dedup_advance('log', 'p-0', 42), dedup_advance('log', 'p-0', 43)" -c "ROLLBACK"
	{ q -d "$1" -c "SELECT dedup_advance('log', 'producer', 8, epoch => 0)" 2>&1 || true; } | grep -o 'is fenced'
	{ q -d "$1" -c "SELECT dedup_advance('log', 'p-0', 45)" 2>&1 || true; } | grep -o 'leaves a gap'
}
# the claims in two time buckets: the fixture's in bucket 0, sealed, and one
# in bucket 1, a table of its own that inherits from dedup.claims
q -d src -c "CALL dedup_cleanup()" \
	-c "UPDATE dedup.buckets SET opened_at = opened_at - interval '7 hours'" \
	-c "CALL dedup_cleanup()" -c "SELECT dedup_claim('dump', 'in-bucket-1')" >/dev/null
buckets_of() {	# the buckets of database $1, and a claim of bucket 1's key
	q -d "$1" -c "SELECT string_agg(bucket || ':' || state::text || ':' || relid::text, ',' ORDER BY bucket) FROM dedup.buckets" \
		-c "SELECT dedup_claim('dump', 'in-bucket-1')"
}
marks_before=$(marks_of src)
echo "$marks_before"
grants_before=$(grants_of src)
echo "$grants_before"
before=$(fixture_snapshot src)
echo "$before"

as_server "$PG_BINDIR/pg_dump" -h "$dir" -p "$port" -U postgres -Fc -f "$dir/src.dump" src
as_server "$PG_BINDIR/pg_restore" -h "$dir" -p "$port" -U postgres --exit-on-error -d restored "$dir/src.dump"
as_server "$PG_BINDIR/pg_dump" -h "$dir" -p "$port" -U postgres -f "$dir/src.sql" src
q -d replayed -f "$dir/src.sql" >/dev/null

for db in restored replayed; do
	check "$db: every dedup table equal to the source" "$(fixture_snapshot $db)" "$before"
	check "$db: the extension is installed" \
		"$(q -d $db -c "SELECT extversion FROM pg_extension WHERE extname = 'dedup'")" \
		"$(q -d src -c "SELECT extversion FROM pg_extension WHERE extname = 'dedup'")"
	check "$db: the scope grants, and what they allow and refuse" "$(grants_of $db)" "$grants_before"
	check "$db: the sequence marks, epochs and strict mode, and how they decide" "$(marks_of $db)" "$marks_before"
	fixture_check $db
	check "$db: the buckets, and the claim in bucket 1 a duplicate" "$(buckets_of $db)" "0:s:dedup.claims,1:c:dedup.claims_1
f"
	# pg_dump does not restore a bucket's dependency on the extension; the
	# cleanup records it again, so that DROP EXTENSION takes the bucket along
	q -d $db -c "CALL dedup_cleanup()" -c "DROP EXTENSION dedup" >/dev/null
	check "$db: DROP EXTENSION after the cleanup leaves nothing behind" \
		"$(q -d $db -c "SELECT count(*) FROM pg_class WHERE relname LIKE 'claims%'")" 0
done
echo "dump: custom-format restore and plain SQL replay keep every dedup row and its behaviour"
