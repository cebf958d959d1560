#!/usr/bin/env bash
# Scripted test: claims survive a crash.  Two clients claim keys (many of
# them duplicates) and write one business row per new claim, in one
# transaction; the server is killed with SIGKILL under that load, twice, and
# restarted (crash recovery replays the WAL that the claim path wrote
# directly); the third time while the time buckets of dedup.claims switch.  Then: exactly one business row per claimed key, no business row
# without its claim, no claim without its business row, and the claims'
# index of every bucket agrees with its table (amcheck, heapallindexed).
#
# Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.
set -euo pipefail
. "$(dirname "$0")/../../scripts/lib.sh"

test_server crash 11 "restart_after_crash = off"

q -c "CREATE EXTENSION dedup" -c "CREATE EXTENSION amcheck" \
  -c "CREATE TABLE orders (message_id text NOT NULL, created_at timestamptz DEFAULT now())"
cat >"$dir/load.sql" <<'SQL'
\set r random(1, 20000)
BEGIN;
INSERT INTO orders (message_id) SELECT 'm-' || :round || '-' || :r WHERE dedup_claim('crash', 'm-' || :round || '-' || :r);
COMMIT;
SQL
chmod 644 "$dir/load.sql"

# round 3: the time buckets of dedup.claims switch under the load, as fast
# as the cleanup can (each bucket aged past dedup.bucket_interval at once),
# so that the kill lands among the switch's steps
switch_buckets() {
	while :; do
		q -c "UPDATE dedup.buckets SET opened_at = opened_at - interval '7 hours' WHERE state = 'c'" \
			-c "CALL dedup_cleanup()" >/dev/null 2>&1 || true
	done
}
for round in 1 2 3; do
	"$PG_BINDIR/pgbench" -n -c 2 -j 2 -T 30 -D round="$round" -f "$dir/load.sql" >"$dir/pgbench-$round.log" 2>&1 &
	load=$!
	switcher=
	if [ "$round" = 3 ]; then
		switch_buckets &
		switcher=$!
		sleep 3
	else
		sleep 2
	fi
	server_crash "$dir"
	wait "$load" 2>/dev/null || true
	[ -z "$switcher" ] || { kill "$switcher"; wait "$switcher" 2>/dev/null || true; }
	echo "round $round: killed under load, recovered with $(q -c 'SELECT count(*) FROM orders') orders"
done
buckets=$(q -c "SELECT count(*) FROM dedup.buckets")
echo "buckets after round 3: $(q -c "SELECT string_agg(bucket || ':' || state::text, ' ' ORDER BY bucket) FROM dedup.buckets")"
[ "$buckets" -ge 3 ] || { echo "the buckets did not switch under the load"; exit 1; }
# the switch goes on after the crash, whatever step it was at
q -c "UPDATE dedup.buckets SET opened_at = opened_at - interval '7 hours' WHERE state = 'c'" \
	-c "CALL dedup_cleanup()" >/dev/null
[ "$(q -c "SELECT count(*) FROM dedup.buckets WHERE state IN ('n', 'x')")" = 0 ] ||
	{ echo "a switch the crash interrupted was not completed"; exit 1; }

result=$(q <<'SQL'
SELECT count(*) = count(DISTINCT message_id) FROM orders;
SELECT count(*) FROM orders;
SELECT count(*) FROM dedup.claims;
BEGIN;
SELECT count(*) FROM orders WHERE dedup_claim('crash', message_id);
ROLLBACK;
SELECT bool_and(bt_index_check(i.indexrelid, true) IS NOT NULL)
FROM dedup.buckets b JOIN pg_index i ON i.indrelid = b.relid AND i.indisprimary;
SQL
)
read -r -d '' unique orders claims unclaimed checked <<<"$result" || true
echo "orders unique: $unique, orders: $orders, claims: $claims, orders whose key was not claimed: $unclaimed, amcheck: $checked"
[ "$orders" -gt 0 ] || { echo "no orders were written"; exit 1; }
[ "$unique" = t ] || { echo "a message has two business effects"; exit 1; }
[ "$orders" = "$claims" ] || { echo "claims and orders differ"; exit 1; }
[ "$unclaimed" = 0 ] || { echo "an order's key was not claimed"; exit 1; }
[ "$checked" = t ] || { echo "amcheck failed"; exit 1; }
recoveries=$(grep -c "automatic recovery in progress" "$dir/server.log" || true)
[ "$recoveries" -ge 2 ] || { echo "the server did not go through crash recovery twice ($recoveries)"; exit 1; }
echo "crash: every committed claim and its business row survived; nothing else did"
