#!/usr/bin/env bash
# Scripted test: the metrics, through the real exporter.  A known workload
# (claims, a batch, records, outbox puts, takes, acks and nacks, a cleanup
# pass), then Debian's prometheus-postgres-exporter with
# monitoring/postgres_exporter.yaml, connected as a role with pg_monitor and
# relay of one topic, is scraped with curl: every dedup_* value must be what
# the workload did.  The alert rules pass promtool check rules.
#
# Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.
set -euo pipefail
. "$(dirname "$0")/../../scripts/lib.sh"

ensure_packages prometheus-postgres-exporter prometheus curl
test_server monitoring 15
q() { psql -X -q -At -v ON_ERROR_STOP=1 "$@"; }
q -c "CREATE EXTENSION dedup" \
  -c "CREATE ROLE dedup_monitor LOGIN IN ROLE pg_monitor" \
  -c "SELECT dedup_grant_relay('dedup_monitor', ARRAY['orders'])"

# the workload
q <<'SQL' >/dev/null
SELECT dedup_claim('payments', 'm-' || i) FROM generate_series(1, 5) i;      -- 5 new
SELECT dedup_claim('payments', 'm-' || i) FROM generate_series(1, 3) i;      -- 3 duplicates
SELECT count(*) FROM dedup_claim_batch('payments', ARRAY['m-1', 'm-6', 'm-7', 'm-7']);  -- 2 new, 1 duplicate
SELECT dedup_begin('http', 'k-1'), dedup_begin('http', 'k-2');               -- 2 started
SELECT dedup_complete('http', 'k-1', 200, '{}');                             -- 1 completed
SELECT dedup_begin('http', 'k-1');                                           -- 1 replay
SELECT dedup_release('http', 'k-2');                                         -- 1 released
SELECT dedup_outbox_put('orders', 'e-' || i, '{}') FROM generate_series(1, 3) i;  -- 3 put
SELECT dedup_outbox_put('orders', 'e-1', '{}');                              -- a retry: not new
CREATE TEMP TABLE taken AS SELECT id FROM dedup_outbox_take('orders', 2);   -- 2 taken
SELECT dedup_outbox_ack(ARRAY(SELECT id FROM taken ORDER BY id LIMIT 1));    -- 1 acked
SELECT dedup_outbox_nack(ARRAY(SELECT id FROM taken ORDER BY id OFFSET 1), '1 hour');  -- 1 nacked
-- 4 claims expired a minute ago, deleted by one cleanup pass
SELECT dedup_claim('expiring', 'x-' || i, ttl => '1 second') FROM generate_series(1, 4) i;
SQL
q -c "UPDATE dedup.claims SET expires_at = now() - interval '1 minute' WHERE expires_at < now() + interval '1 minute'" \
  -c "VACUUM ANALYZE dedup.claims" -c "CALL dedup_cleanup()"

# the exporter, as dedup_monitor, with dedup's query file only
eport=$((port + 200))
DATA_SOURCE_NAME="host=$dir port=$port user=dedup_monitor dbname=postgres sslmode=disable" \
	/usr/bin/prometheus-postgres-exporter --web.listen-address="127.0.0.1:$eport" \
	--extend.query-path="$DEDUP_ROOT/monitoring/postgres_exporter.yaml" \
	--disable-default-metrics --disable-settings-metrics >"$dir/exporter.log" 2>&1 &
exporter=$!
trap 'kill $exporter 2>/dev/null || true; server_stop "$dir"; rm -rf "$dir"' EXIT
for _ in $(seq 1 50); do
	curl -sf "http://127.0.0.1:$eport/metrics" >"$dir/metrics" 2>/dev/null && grep -q '^dedup_' "$dir/metrics" && break
	sleep 0.2
done
grep -q '^dedup_' "$dir/metrics" || { echo "no dedup_ metric scraped"; cat "$dir/exporter.log"; exit 1; }

# value NAME LABEL=VALUE...: the sample of NAME whose labels include them all
value() {
	local name=$1
	shift
	awk -v name="$name" -v want="$*" '
		BEGIN { n = split(want, w, " ") }
		index($0, name "{") == 1 {
			ok = 1
			for (i = 1; i <= n; i++) {
				split(w[i], kv, "=")
				if (index($0, kv[1] "=\"" kv[2] "\"") == 0) ok = 0
			}
			if (ok) print $NF
		}' "$dir/metrics"
}
type_of() { awk -v name="$1" '$1 == "#" && $2 == "TYPE" && $3 == name { print $4 }' "$dir/metrics"; }
fail=0
check() { [ "$2" = "$3" ] || { echo "$1: got [$2], want [$3]"; fail=1; }; }
check claims "$(value dedup_scope_claims scope=payments datname=postgres)" 7
check duplicates "$(value dedup_scope_duplicates scope=payments)" 4
check "records started" "$(value dedup_scope_records_started scope=http)" 2
check "records replayed" "$(value dedup_scope_records_replayed scope=http)" 1
check "records completed" "$(value dedup_scope_records_completed scope=http)" 1
check "records released" "$(value dedup_scope_records_released scope=http)" 1
check "events put" "$(value dedup_topic_events_put topic=orders)" 3
check "events taken" "$(value dedup_topic_events_taken topic=orders)" 2
check "events acked" "$(value dedup_topic_events_acked topic=orders)" 1
check "events nacked" "$(value dedup_topic_events_nacked topic=orders)" 1
check "outbox pending" "$(value dedup_outbox_pending topic=orders)" 2
check "outbox in flight" "$(value dedup_outbox_in_flight topic=orders)" 0
check "outbox dead" "$(value dedup_outbox_dead topic=orders)" 0
check "claims deleted" "$(value dedup_cleanup_rows_deleted kind=claim datname=postgres)" 4
check "cleanup errors" "$(value dedup_cleanup_errors kind=claim)" 0
check "default ttl" "$(value dedup_settings_default_ttl_seconds)" 86400
check "claims table rows" "$(value dedup_table_rows_estimate table=claims)" 13
check "a counter is a counter" "$(type_of dedup_scope_claims)" counter
check "a gauge is a gauge" "$(type_of dedup_outbox_pending)" gauge
lag=$(value dedup_cleanup_lag_seconds kind=claim)
awk -v l="$lag" 'BEGIN { exit !(l > 0 && l < 60) }' || { echo "cleanup lag [$lag] not within (0, 60) s"; fail=1; }
promtool check rules "$DEDUP_ROOT/monitoring/dedup-alerts.yml" >"$dir/promtool.log" 2>&1 ||
	{ cat "$dir/promtool.log"; fail=1; }
if [ "$fail" -ne 0 ]; then
	grep '^dedup_' "$dir/metrics"
	exit 1
fi
echo "monitoring: the exporter's scrape has every dedup_* value of the workload; the alert rules pass promtool"
grep '^dedup_' "$dir/metrics" | sed -e 's/,server="[^"]*"//' -e 's/{server="[^"]*"}//'
