#!/usr/bin/env bash
# Scripted test: dedup behind PgBouncer in transaction pooling, as the
# README's "Behind a connection pooler" says to use it.  Clients share one
# server connection (default_pool_size = 1, so that sharing is certain):
# - settings through dedup_set_scope and SET LOCAL reach only the claims
#   they were meant for: 20 claims of other clients keep the 1-day default;
# - a session-level SET through the pooler does leak to the next client on
#   the same server connection (the hazard the README warns of);
# - claims, records and the relay's take/ack work through the pooler, and a
#   relay listening on a direct connection hears one NOTIFY per put's commit.
#
# Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.
set -euo pipefail
. "$(dirname "$0")/../../scripts/lib.sh"

ensure_packages pgbouncer
test_server pgbouncer 14
server_port=$port
psql -X -q -v ON_ERROR_STOP=1 -c "CREATE EXTENSION dedup" \
	-c "SELECT dedup_set_scope('short-lived', ttl => '90 seconds')" >/dev/null

# PgBouncer, transaction pooling, on a socket of its own, as the server's user
bdir="$dir/pgbouncer"
as_server mkdir -p "$bdir"
bport=$((server_port + 100))
cat <<CONF | as_server tee "$bdir/pgbouncer.ini" >/dev/null
[databases]
postgres = host=$dir port=$server_port dbname=postgres user=postgres
[pgbouncer]
listen_addr =
listen_port = $bport
unix_socket_dir = $bdir
auth_type = trust
auth_file = $bdir/users.txt
pool_mode = transaction
default_pool_size = 1
max_client_conn = 50
logfile = $bdir/pgbouncer.log
pidfile = $bdir/pgbouncer.pid
CONF
echo '"postgres" ""' | as_server tee "$bdir/users.txt" >/dev/null
as_server /usr/sbin/pgbouncer -d "$bdir/pgbouncer.ini"
trap 'as_server kill "$(cat "$bdir/pgbouncer.pid" 2>/dev/null)" 2>/dev/null || true; server_stop "$dir"; rm -rf "$dir"' EXIT
wait_pooler() {
	for _ in $(seq 1 50); do
		psql -X -q -At -h "$bdir" -p "$bport" -c "SELECT 1" >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	echo "pgbouncer did not start"; cat "$bdir/pgbouncer.log"; exit 1
}
wait_pooler
pooled() { psql -X -q -At -v ON_ERROR_STOP=1 -h "$bdir" -p "$bport" "$@"; }
check() { [ "$2" = "$3" ] || { echo "$1: got [$2], want [$3]"; exit 1; }; }
# seconds from now to a claim's expiry, to the ten seconds
ttl_of() { q -c "SELECT round(extract(epoch FROM expires_at - now()) / 10) * 10 FROM dedup_lookup('$1', '$2')"; }

# the documented ways: a scope's own ttl, and SET LOCAL inside one transaction
check "a scope's ttl through the pooler" "$(pooled -c "SELECT dedup_claim('short-lived', 'a')")" t
check "SET LOCAL through the pooler" \
	"$(pooled -c "BEGIN" -c "SET LOCAL dedup.default_ttl = '90s'" -c "SELECT dedup_claim('local', 'a')" -c "COMMIT")" t
for i in $(seq 1 20); do
	pooled -c "SELECT dedup_claim('other-client', 'm-$i')" >/dev/null
done
check "the scope's ttl" "$(ttl_of short-lived a)" 90
check "the SET LOCAL ttl" "$(ttl_of local a)" 90
check "20 claims of other clients after them keep the default 1 day" \
	"$(q -c "SELECT count(*) FROM generate_series(1, 20) i, dedup_lookup('other-client', 'm-' || i) l
	         WHERE l.expires_at BETWEEN now() + interval '23 hours 59 minutes' AND now() + interval '1 day 1 minute'")" 20

# the hazard: a session-level SET stays on the shared server connection
pooled -c "SET dedup.default_ttl = '90s'" >/dev/null
pooled -c "SELECT dedup_claim('leaked', 'a')" >/dev/null
check "a session SET leaks to the next client of its server connection" "$(ttl_of leaked a)" 90
pooled -c "RESET dedup.default_ttl" >/dev/null

# records and the relay through the pooler; the relay listens directly
check "records through the pooler" \
	"$(pooled -c "SELECT (dedup_begin('http', 'idem-1')).outcome" \
	          -c "SELECT dedup_complete('http', 'idem-1', 201, '{\"id\": 7}')" \
	          -c "SELECT (dedup_begin('http', 'idem-1')).response")" 'started

{"id": 7}'
psql -X -q -At -c "LISTEN dedup_outbox" -c "SELECT pg_sleep(3)" >"$dir/listen.out" 2>&1 &
listener=$!
sleep 1
for i in 1 2 3; do
	pooled -c "BEGIN" -c "SELECT dedup_outbox_put('orders', 'e-$i-a', '{}')" \
	       -c "SELECT dedup_outbox_put('orders', 'e-$i-b', '{}')" -c "COMMIT" >/dev/null
done
wait "$listener"
check "a direct LISTEN hears one notification per committed put transaction" \
	"$(grep -c 'Asynchronous notification "dedup_outbox" with payload "orders"' "$dir/listen.out")" 3
check "take and ack through the pooler" \
	"$(pooled -c "SELECT dedup_outbox_ack(array_agg(id)) FROM dedup_outbox_take('orders', 10)")" 6
echo "pgbouncer: scope settings and SET LOCAL stay with their claims; session SET leaks as documented; records and the relay work"
