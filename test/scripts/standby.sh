#!/usr/bin/env bash
# Scripted test: dedup on a hot standby, and after its promotion.  A primary
# (cleanup off) holds 1000 live claims and 2000 that expire within 2 seconds;
# a streaming standby made with pg_basebackup has cleanup on.  Checks,
# polling (never sleeping blindly for a result):
#   - the standby replays the claims; no cleanup launcher runs there, and the
#     expired claims stay (a standby never cleans);
#   - on the standby, dedup_claim() and dedup_cleanup_batch() fail with
#     SQLSTATE 25006, and reads work;
#   - after the primary is stopped and the standby promoted, the postmaster
#     starts the launcher; its worker deletes exactly the expired claims, the
#     figures say 2000, and dedup_claim() writes again.
#
# Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.
set -euo pipefail
. "$(dirname "$0")/../../scripts/lib.sh"

test_server standby 40 \
	"wal_keep_size = '64MB'" \
	"hot_standby = on" \
	"dedup.cleanup_databases = 'app'" \
	"dedup.cleanup_interval = 1" \
	"dedup.cleanup_enabled = off"

# the standby: its own directory (socket and data), on the next port; stopped
# and removed on exit along with the primary
sdir=$(mktemp -d /tmp/dedup-standby-replica.XXXXXX)
sport=$((port + 1))
trap 'server_stop "$sdir"; server_stop "$dir"; [ -n "${KEEP:-}" ] || rm -rf "$sdir" "$dir"' EXIT
chown "$SERVER_USER" "$sdir" 2>/dev/null || true
chmod 755 "$sdir"

sqlstate() {	# sqlstate SQL: what psql prints, with the error as its SQLSTATE
	psql -X -q -At -v VERBOSITY=sqlstate -c "$1" 2>&1 || true
}
message() {	# message SQL: what psql prints, with the error's message
	psql -X -q -At -v VERBOSITY=terse -c "$1" 2>&1 || true
}
launchers() { q -c "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'dedup cleanup launcher'"; }

# 1. the primary: 1000 live claims, 2000 expiring within 2 seconds, and the
# list of the live ones
psql -X -q -v ON_ERROR_STOP=1 -c "CREATE DATABASE app"
export PGDATABASE=app
q <<'SQL' >/dev/null
CREATE EXTENSION dedup;
SELECT count(*) FROM dedup_claim_batch('long', ARRAY(SELECT 'live-' || i FROM generate_series(1, 1000) i), ttl => '1 hour');
SELECT count(*) FROM dedup_claim_batch('short', ARRAY(SELECT 'gone-' || i FROM generate_series(1, 2000) i), ttl => '2 seconds');
CREATE TABLE live AS SELECT key FROM dedup.claims WHERE expires_at > now() + interval '10 minutes';
SQL
# and in a second database: scope settings, records and outbox events
psql -X -q -v ON_ERROR_STOP=1 -c "CREATE DATABASE app2"
PGDATABASE=app2 q <<'SQL' >/dev/null
CREATE EXTENSION dedup;
SELECT dedup_set_scope('orders', ttl => '2 hours');
SELECT outcome FROM dedup_begin('charges', 'c-1', lease => '1 hour');
SELECT outcome FROM dedup_begin('charges', 'c-2');
SELECT dedup_complete('charges', 'c-2', 201, '{"ok": true}');
SELECT dedup_outbox_put('events', 'e-' || g, '{}') FROM generate_series(1, 2) AS g;
SELECT dedup_advance('log', 'p-0', 41);
SQL
check "primary holds 3000 claims, 1000 of them live" \
	"$(q -c "SELECT count(*) || ' ' || (SELECT count(*) FROM live) FROM dedup.claims")" "3000 1000"
# the launcher runs on a primary even with cleanup off (idle): the standby
# below must not have one
wait_for "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'dedup cleanup launcher'" 1
echo "ok: the primary runs the cleanup launcher (idle: cleanup is off)"

# 2. the standby: a base backup with the WAL it needs and a primary_conninfo
# (-R), then its own port and socket directory and cleanup on (later lines
# of postgresql.conf win over the copied primary's)
as_server "$PG_BINDIR/pg_basebackup" -h "$dir" -p "$port" -U postgres -D "$sdir/data" \
	-R -X stream -c fast >"$sdir/basebackup.log" 2>&1 || { cat "$sdir/basebackup.log"; exit 1; }
{
	echo "port = $sport"
	echo "unix_socket_directories = '$sdir'"
	echo "dedup.cleanup_enabled = on"
} | as_server tee -a "$sdir/data/postgresql.conf" >/dev/null
as_server "$PG_BINDIR/pg_ctl" -D "$sdir/data" -l "$sdir/server.log" -w -t 60 start >/dev/null ||
	{ cat "$sdir/server.log"; exit 1; }
export PGHOST=$sdir PGPORT=$sport
check "standby is in recovery" "$(q -c "SELECT pg_is_in_recovery()")" t
check "standby has cleanup on" "$(q -c "SHOW dedup.cleanup_enabled")" on
check "primary streams to the standby" \
	"$(PGHOST=$dir PGPORT=$port q -c "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'")" 1

# 3. on the standby: the claims are there, no launcher, nothing cleaned
wait_for "SELECT count(*) FROM dedup.claims" 3000
echo "ok: standby replayed the 3000 claims"
wait_for "SELECT count(*) FROM dedup.claims WHERE expires_at < now()" 2000
echo "ok: the 2000 short claims have expired on the standby"
sleep 2.5	# two cleanup intervals and more: nothing may be cleaned
check "no cleanup launcher on the standby" "$(launchers)" 0
check "no cleanup worker on the standby" \
	"$(q -c "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'dedup cleanup worker'")" 0
check "the standby cleaned nothing" "$(q -c "SELECT count(*) FROM dedup.claims")" 3000
check "the standby's figures show no pass" \
	"$(q -c "SELECT coalesce(sum(rows_deleted + batches), 0) FROM dedup_cleanup_stats()")" 0
check "standby still in recovery" "$(q -c "SELECT pg_is_in_recovery()")" t

check "dedup_claim of a new key fails with 25006 on the standby" \
	"$(sqlstate "SELECT dedup_claim('s', 'k', ttl => '1 hour')")" "ERROR:  25006"
check "dedup_claim of a live key fails with 25006 on the standby" \
	"$(sqlstate "SELECT dedup_claim('long', 'live-1', ttl => '1 hour')")" "ERROR:  25006"
check "dedup_claim_batch fails with 25006 on the standby" \
	"$(sqlstate "SELECT count(*) FROM dedup_claim_batch('s', ARRAY['a', 'b'], ttl => '1 hour')")" "ERROR:  25006"
check "dedup_cleanup_batch fails with 25006 on the standby" \
	"$(sqlstate "SELECT * FROM dedup_cleanup_batch()")" "ERROR:  25006"
check "the error says why" \
	"$(message "SELECT dedup_claim('s', 'k', ttl => '1 hour')")" \
	"ERROR:  cannot execute dedup_claim() during recovery"
check "dedup_lookup works on the standby: a live key" \
	"$(q -c "SELECT count(*) FROM dedup_lookup('long', 'live-1')")" 1
check "dedup_lookup works on the standby: an expired key is absent" \
	"$(q -c "SELECT count(*) FROM dedup_lookup('short', 'gone-1')")" 0
check "dedup_lookup works on the standby: an unknown key is absent" \
	"$(q -c "SELECT count(*) FROM dedup_lookup('s', 'k')")" 0

# every other write function is refused with 25006 naming the standby, and
# every read function works
for sql in "SELECT dedup_begin('charges', 'c-3')" \
	"SELECT dedup_complete('charges', 'c-1', 200)" \
	"SELECT dedup_release('charges', 'c-1')" \
	"SELECT dedup_set_scope('orders', ttl => '1 hour')" \
	"SELECT dedup_reset_scope('orders')" \
	"SELECT dedup_outbox_put('events', 'e-3', '{}')" \
	"SELECT count(*) FROM dedup_outbox_take('events')" \
	"SELECT dedup_outbox_ack(ARRAY['a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'::uuid])" \
	"SELECT dedup_outbox_nack(ARRAY['a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'::uuid])" \
	"SELECT dedup_outbox_redrive('events')" \
	"SELECT dedup_advance('log', 'p-0', 99)" \
	"SELECT count(*) FROM dedup_advance_batch('log', ARRAY['p-0'], ARRAY[99]::bigint[])" \
	"SELECT dedup_new_epoch('log', 'p-0')" \
	"CALL dedup_cleanup()"; do
	fn=$(sed -E 's/^(SELECT (count\(\*\) FROM )?|CALL )([a-z_]+).*/\3/' <<<"$sql")
	check "$fn fails with 25006 on the standby" "$(PGDATABASE=app2 sqlstate "$sql")" "ERROR:  25006"
	case "$fn" in dedup_cleanup) fn=dedup_cleanup_batch ;; esac
	check "$fn: the error names the standby" "$(PGDATABASE=app2 message "$sql")" \
		"ERROR:  cannot execute $fn() during recovery"
done
check "dedup_position and dedup_streams work on the standby" \
	"$(PGDATABASE=app2 q -c "SELECT (SELECT mark FROM dedup_position('log', 'p-0')) || ' ' || (SELECT count(*) FROM dedup_streams('log'))")" "41 1"
check "dedup_scope works on the standby" \
	"$(PGDATABASE=app2 q -c "SELECT ttl FROM dedup_scope('orders')")" "02:00:00"
check "dedup_lookup of records works on the standby" \
	"$(PGDATABASE=app2 q -c "SELECT string_agg(status, ',' ORDER BY status) FROM (SELECT status FROM dedup_lookup('charges', 'c-1') UNION ALL SELECT status FROM dedup_lookup('charges', 'c-2')) AS r")" \
	"complete,processing"
check "dedup_outbox_stats works on the standby" \
	"$(PGDATABASE=app2 q -c "SELECT pending || ' ' || in_flight || ' ' || dead FROM dedup_outbox_stats('events')")" "2 0 0"
check "dedup_cleanup_stats works on the standby" \
	"$(PGDATABASE=app2 q -c "SELECT count(*) >= 0 FROM dedup_cleanup_stats()")" t
check "fingerprints work on the standby" \
	"$(PGDATABASE=app2 q -c "SELECT dedup_fingerprint('x'::text) = dedup_fingerprint('x'::bytea)")" t

# 4. the primary goes away, the standby is promoted: the launcher starts and
# its worker deletes exactly the expired claims
server_stop "$dir"
as_server "$PG_BINDIR/pg_ctl" -D "$sdir/data" -w -t 60 promote >/dev/null
check "promoted: out of recovery" "$(q -c "SELECT pg_is_in_recovery()")" f
wait_for "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'dedup cleanup launcher'" 1
echo "ok: the postmaster started the cleanup launcher after promotion"
wait_for "SELECT count(*) FROM dedup.claims" 1000
echo "ok: the promoted server cleaned down to 1000 claims"
check "rows left are exactly the live ones" \
	"$(q -c "SELECT count(*) FROM dedup.claims c FULL JOIN live l USING (key) WHERE c.key IS NULL OR l.key IS NULL")" 0
check "figures: 2000 claims deleted, no errors" \
	"$(q -c "SELECT rows_deleted || ' ' || errors FROM dedup_cleanup_stats() WHERE kind = 'claim'")" "2000 0"
check "live claims are still duplicates" \
	"$(q -c "SELECT count(*) FROM dedup_claim_batch('long', ARRAY(SELECT 'live-' || i FROM generate_series(1, 1000) i))")" 0
check "dedup_claim writes on the promoted server" \
	"$(q -c "SELECT dedup_claim('s', 'k', ttl => '1 hour')")" t
check "and the same key again is a duplicate" \
	"$(q -c "SELECT dedup_claim('s', 'k', ttl => '1 hour')")" f
check "dedup_cleanup_batch runs on the promoted server" \
	"$(q -c "SELECT deleted FROM dedup_cleanup_batch()")" 0
echo "standby: all checks passed"
