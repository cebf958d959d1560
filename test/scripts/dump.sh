#!/usr/bin/env bash
# Scripted test: pg_dump / pg_restore keep every claim, record, scope
# setting and outbox event.  A database with all of them (claims of three
# key types, processing and complete records with responses, a released
# record's tombstone, scope settings, outbox events pending, in flight and
# dead, outbox keys, the outbox's sequence advanced) is dumped in custom
# format and restored into a new database, and dumped as plain SQL and
# replayed into another; CREATE EXTENSION comes from the dump.  Every
# dedup table must compare equal row for row, and the restored copies must
# behave as the original (test/fixture.sh's fixture_check).
set -euo pipefail
. "$(dirname "$0")/../../scripts/lib.sh"

test_server dump 70
. "$DEDUP_ROOT/test/fixture.sh"
q -c "CREATE DATABASE src" -c "CREATE DATABASE restored" -c "CREATE DATABASE replayed"
q -d src -c "CREATE EXTENSION dedup"
fixture_fill src
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
	fixture_check $db
done
echo "dump: custom-format restore and plain SQL replay keep every dedup row and its behaviour"
