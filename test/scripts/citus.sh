#!/usr/bin/env bash
# Scripted test: dedup on a Citus cluster (a coordinator and two workers on
# this machine), as far as 1.1 goes: dedup's tables stay local to the
# coordinator, where every call runs, and a business table is distributed.
#   - a claim and a business row in a distributed table commit or roll back
#     together (Citus's two-phase commit across the coordinator and the
#     worker holding the row); two sessions claiming one key: one true;
#   - a call on a worker is refused (0A000), writing nothing there: a
#     worker's copy of dedup's tables is not the coordinator's;
#   - dedup.claims distributed with create_distributed_table is refused
#     (0A000) by every call, from a new session and from one that claimed
#     before, with nothing written; undistributed as the README says, the
#     claims are back, calls work again and pg_dump dumps the table's rows;
#   - the cleanup runs on the coordinator.
# Citus is installed from ../shared/citus when missing (about two minutes).
#
# Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.
set -euo pipefail
. "$(dirname "$0")/../../scripts/lib.sh"

if [ ! -f "$(pg_config --pkglibdir)/citus.so" ]; then
	installer=
	for candidate in "$DEDUP_ROOT/../shared/citus/install.sh" /work/shared/citus/install.sh; do
		[ -f "$candidate" ] && { installer=$candidate; break; }
	done
	[ -n "$installer" ] || { echo "FAIL: Citus is not installed and its installer is not found"; exit 1; }
	as_root bash "$installer" >/dev/null
fi

citus_conf=("shared_preload_libraries = 'citus, dedup'" "wal_level = logical"
	"max_prepared_transactions = 20" "dedup.cleanup_enabled = off")
test_server citus 80 "${citus_conf[@]}"
wdirs=()
for n in 1 2; do
	wdir=$(mktemp -d "/tmp/dedup-citus-w$n.XXXXXX")
	wdirs+=("$wdir")
	server_start "$wdir" "$((port + n))" "${citus_conf[@]}"
done
trap 'for w in "${wdirs[@]}"; do server_stop "$w"; done; server_stop "$dir";
      [ -n "${KEEP:-}" ] || rm -rf "$dir" "${wdirs[@]}"' EXIT
worker() {	# worker N ARGS...: psql on worker N
	local n=$1
	shift
	psql -X -q -At -v ON_ERROR_STOP=1 -h "${wdirs[$((n - 1))]}" -p "$((port + n))" -U postgres "$@"
}
sqlstate() {	# sqlstate PSQL_ARGS...: what psql prints, the error as its SQLSTATE
	psql -X -q -At -v VERBOSITY=sqlstate "$@" 2>&1 || true
}

q -c "CREATE EXTENSION citus" >/dev/null
for n in 1 2; do worker "$n" -c "CREATE EXTENSION citus" >/dev/null; done
q -c "SELECT citus_set_coordinator_host('$dir', $port)" \
  -c "SELECT citus_add_node('${wdirs[0]}', $((port + 1)))" \
  -c "SELECT citus_add_node('${wdirs[1]}', $((port + 2)))" >/dev/null
# created on the coordinator, Citus creates it on the workers too
q -c "CREATE EXTENSION dedup" >/dev/null
check "dedup on every node" "$(worker 1 -c "SELECT extversion FROM pg_extension WHERE extname = 'dedup'")" \
	"$(q -c "SELECT extversion FROM pg_extension WHERE extname = 'dedup'")"
q -c "CREATE TABLE orders (message_id text PRIMARY KEY, amount int NOT NULL)" \
  -c "SELECT create_distributed_table('orders', 'message_id')" >/dev/null
check "orders has shards on both workers" \
	"$(q -c "SELECT count(DISTINCT nodeport) FROM citus_shards WHERE table_name = 'orders'::regclass")" 2

# 1. the claim and the distributed business row, one transaction
q <<'SQL' >/dev/null
BEGIN;
INSERT INTO orders SELECT 'm-' || g, 1 FROM generate_series(1, 200) g
WHERE dedup_claim('citus', 'm-' || g);
COMMIT;
BEGIN;
INSERT INTO orders SELECT 'r-' || g, 1 FROM generate_series(1, 50) g
WHERE dedup_claim('citus', 'r-' || g);
ROLLBACK;
SQL
check "claims and business rows committed together" \
	"$(q -c "SELECT (SELECT count(*) FROM orders), (SELECT count(*) FROM dedup.claims)")" "200|200"
check "a rolled-back transaction left neither" \
	"$(q -c "SELECT count(*) FROM orders WHERE message_id LIKE 'r-%'")|$(q -c "SELECT count(*) FROM generate_series(1, 50) g WHERE dedup_claim('citus', 'r-' || g)")" \
	"0|50"
check "a redelivery is a duplicate, the business row not written twice" \
	"$(q -c "INSERT INTO orders SELECT 'm-' || g, 1 FROM generate_series(1, 200) g WHERE dedup_claim('citus', 'm-' || g) RETURNING 1" | wc -l)" 0
# two sessions claim one key: the second waits for the first, then false
psql -X -q -At -c "BEGIN" -c "SELECT dedup_claim('citus', 'race')" -c "INSERT INTO orders VALUES ('race', 1)" \
	-c "SELECT pg_sleep(1)" -c "COMMIT" >"$dir/race1" &
sleep 0.3
psql -X -q -At -c "SELECT dedup_claim('citus', 'race')" >"$dir/race2"
wait
check "two sessions, one key: one true" "$(grep -v '^$' "$dir/race1" | head -n 1),$(cat "$dir/race2")" "t,f"

# 2. a call on a worker is refused, nothing written there
check "dedup_claim on a worker: 0A000" \
	"$(sqlstate -h "${wdirs[0]}" -p "$((port + 1))" -U postgres -c "SELECT dedup_claim('citus', 'on-a-worker')")" \
	"ERROR:  0A000"
check "dedup_advance on a worker, in a new session: 0A000" \
	"$(sqlstate -h "${wdirs[0]}" -p "$((port + 1))" -U postgres -c "SELECT dedup_advance('citus', 'stream', 1)")" \
	"ERROR:  0A000"
check "dedup_outbox_put on a worker, in a new session: 0A000" \
	"$(sqlstate -h "${wdirs[1]}" -p "$((port + 2))" -U postgres -c "SELECT dedup_outbox_put('citus', 'a', '{}')")" \
	"ERROR:  0A000"
check "nothing written on the worker" \
	"$(worker 1 -c "SELECT (SELECT count(*) FROM ONLY dedup.claims) + (SELECT count(*) FROM dedup.streams)")" 0

# 3. dedup.claims distributed: refused, by a session that claimed before too
psql -X -q -At -v ON_ERROR_STOP=1 >"$dir/long-session" 2>&1 <<'SQL' &
SELECT dedup_claim('citus', 'before');
SELECT pg_sleep(3);
\set VERBOSITY sqlstate
SELECT dedup_claim('citus', 'after');
SQL
sleep 1
claims_before=$(q -c "SELECT count(*) FROM dedup.claims")
q -c "SELECT create_distributed_table('dedup.claims', 'key')" >/dev/null 2>&1
wait || true
check "a session that claimed before the distribution is refused after it" \
	"$(tail -n 1 "$dir/long-session")" "ERROR:  0A000"
check "a new session is refused" \
	"$(sqlstate -c "SELECT dedup_claim('citus', 'new-session')")" "ERROR:  0A000"
check "the message names the table" \
	"$(psql -X -q -At -c "SELECT dedup_claim('citus', 'x')" 2>&1 | grep -c 'Table "dedup.claims" is distributed')" 1
check "the distributed claims are all there, nothing written" \
	"$(q -c "SELECT count(*) FROM dedup.claims")" "$claims_before"
# the way back, as the README gives it
q <<'SQL' >/dev/null 2>&1
ALTER EXTENSION dedup DROP TABLE dedup.claims;
SELECT undistribute_table('dedup.claims');
ALTER EXTENSION dedup ADD TABLE dedup.claims;
UPDATE pg_catalog.pg_extension
   SET extconfig = extconfig || 'dedup.claims'::regclass::oid, extcondition = extcondition || ''::text
 WHERE extname = 'dedup' AND NOT 'dedup.claims'::regclass::oid = ANY (extconfig);
SQL
check "undistributed: claims work again, the old ones are duplicates" \
	"$(q -c "SELECT dedup_claim('citus', 'm-1'), dedup_claim('citus', 'after-undistribute')")" "f|t"
check "and pg_dump dumps its rows again" \
	"$(q -c "SELECT 'dedup.claims'::regclass::oid = ANY (extconfig) FROM pg_extension WHERE extname = 'dedup'")" t

# 4. the cleanup on the coordinator
q -c "SELECT dedup_claim('citus', 'short', ttl => '1 second')" >/dev/null
sleep 1.2
check "the cleanup deletes the expired claim on the coordinator" \
	"$(q -c "CALL dedup_cleanup()")" 1
