#!/usr/bin/env bash
# Scripted test: claims survive a crash.  Two clients claim keys (many of
# them duplicates) and write one business row per new claim, in one
# transaction; the server is killed with SIGKILL under that load, twice, and
# restarted (crash recovery replays the WAL that the claim path wrote
# directly).  Then: exactly one business row per claimed key, no business row
# without its claim, no claim without its business row, and the claims'
# index agrees with the table (amcheck, heapallindexed).
set -euo pipefail
. "$(dirname "$0")/../../scripts/lib.sh"

test_server crash 11 "restart_after_crash = off"

q -c "CREATE EXTENSION dedup" -c "CREATE EXTENSION amcheck" \
  -c "CREATE TABLE orders (message_id text NOT NULL, created_at timestamptz DEFAULT now())"
cat >"$dir/load.sql" <<'SQL'
\set r random(1, 20000)
BEGIN;
INSERT INTO orders (message_id) SELECT 'm-' || :r WHERE dedup_claim('crash', 'm-' || :r);
COMMIT;
SQL
chmod 644 "$dir/load.sql"

for round in 1 2; do
	"$PG_BINDIR/pgbench" -n -c 2 -j 2 -T 30 -f "$dir/load.sql" >"$dir/pgbench-$round.log" 2>&1 &
	load=$!
	sleep 2
	server_crash "$dir"
	wait "$load" 2>/dev/null || true
	echo "round $round: killed under load, recovered with $(q -c 'SELECT count(*) FROM orders') orders"
done

result=$(q <<'SQL'
SELECT count(*) = count(DISTINCT message_id) FROM orders;
SELECT count(*) FROM orders;
SELECT count(*) FROM dedup.claims;
BEGIN;
SELECT count(*) FROM orders WHERE dedup_claim('crash', message_id);
ROLLBACK;
SELECT bt_index_check('dedup.claims_pkey', true) IS NOT NULL;
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
