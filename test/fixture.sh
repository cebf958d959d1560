# test/fixture.sh: a database holding every kind of dedup row, for the
# scripted tests that must show rows survive an operation (pg_upgrade:
# test/integration/pg_upgrade.sh; the TAP tests' pg_dump and ALTER
# EXTENSION UPDATE use test/perl/DedupNode.pm's).  Source it after
# scripts/lib.sh.
# The SQL is in test/fixture/*.sql, which test/perl/DedupNode.pm runs too.
#
#   fixture_fill DB      claims of three key types, processing and complete
#                        records with responses, a released record's
#                        tombstone, scope settings, outbox events pending,
#                        in flight and dead, outbox keys, the outbox's
#                        sequence advanced
#   fixture_snapshot DB  what every dedup table holds, one line per table
#   fixture_check DB     the rows behave as they did where they were made:
#                        a claimed key is a duplicate, a completed record
#                        replays its response, a processing record is in
#                        progress with its attempt, a released one goes on
#                        at attempt 2, new events are numbered after the
#                        old ones, the dead event can be redriven (changes
#                        the database)
#
# Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.

fixture_dir=$DEDUP_ROOT/test/fixture

fixture_fill() {
	q -d "$1" -f "$fixture_dir/fill.sql" >/dev/null
	check "$1: the fixture's outbox has 9 pending, 2 in flight and 1 dead event" \
		"$(q -d "$1" -c "SELECT pending || ' ' || in_flight || ' ' || dead FROM dedup_outbox_stats('events')")" \
		"9 2 1"
}

fixture_snapshot() {
	q -d "$1" -f "$fixture_dir/snapshot.sql"
}

fixture_check() {	# one check per line "what|got|want" of check.sql
	local db=$1 out label got want n=0
	out=$(q -d "$db" -f "$fixture_dir/check.sql") || { echo "FAIL: $db: test/fixture/check.sql failed"; exit 1; }
	while IFS='|' read -r label got want; do
		check "$db: $label" "$got" "$want"
		n=$((n + 1))
	done <<<"$out"
	check "$db: every check of the fixture ran" "$n" 13
}
