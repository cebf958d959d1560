# bench/stages/citus.sh: the citus stage of scripts/bench.
#
# Citus: a coordinator and two workers on this machine, dedup's tables
# distributed by dedup_distribute(), the business table co-located with
# dedup.claims (distributed by dedup_key): the claim + business
# transaction through the coordinator, each a single-node transaction on
# the worker of its key, against the same on the single server above; the
# same with the order's event (its partition in the same shard); then
# the business table distributed by another column (Citus's two-phase
# commit between two workers); and a relay draining the outbox through the
# coordinator against one on the single server, and a check that a take
# there fills its batch across the partitions (100 when 100 are free).  The CPU time each node
# spent per transaction gives the projection for N workers.
# Only with --only citus.
#
# Sourced by scripts/bench (the driver) at the top level, with bench/lib.sh's
# helpers and the driver's settings; defines citus_figures, which the driver
# calls for the stage's lines of figures.txt.
#
# Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.

if [ ! -f "$(pg_config --pkglibdir)/citus.so" ]; then
	for candidate in "$DEDUP_ROOT/../shared/citus/install.sh" /work/shared/citus/install.sh; do
		[ -f "$candidate" ] && { as_root bash "$candidate" >/dev/null; break; }
	done
fi
say "== Citus: a coordinator and two workers, dedup distributed"
cdirs=()
for n in 0 1 2; do
	cdirs+=("$dir/citus$n")
	server_start "$dir/citus$n" "$((port + 10 + n))" "shared_preload_libraries = 'citus, dedup'" \
		"shared_buffers = 256MB" "max_prepared_transactions = 40" "dedup.cleanup_enabled = off" \
		"wal_level = logical"
done
citus_stop() { for d in "${cdirs[@]}"; do server_stop "$d"; done; }
trap 'citus_stop; cleanup_all' EXIT
cq() { psql -X -q -At -v ON_ERROR_STOP=1 -h "$dir/citus0" -p "$((port + 10))" -U postgres "$@"; }
for n in 1 2; do psql -X -q -h "$dir/citus$n" -p "$((port + 10 + n))" -U postgres -c "CREATE EXTENSION citus"; done
cq -c "CREATE EXTENSION citus" -c "SELECT citus_set_coordinator_host('$dir/citus0', $((port + 10)))" \
   -c "SELECT citus_add_node('$dir/citus1', $((port + 11)))" \
   -c "SELECT citus_add_node('$dir/citus2', $((port + 12)))" -c "CREATE EXTENSION dedup" \
   -c "SET client_min_messages = warning" -c "SELECT dedup_distribute(32)" >/dev/null
citus_run() {	# NAME WORKLOAD
	local name=$1 workload=$2 before=() after=() n
	q -c "CHECKPOINT" >/dev/null
	say "run $name (${DURATION}s, $CLIENTS clients)"
	for n in 0 1 2; do before[n]=$(server_cpu "$dir/citus$n"); done
	"$PG_BINDIR/pgbench" -n -M prepared -c "$CLIENTS" -j "$CLIENTS" -T "$DURATION" \
		-h "$dir/citus0" -p "$((port + 10))" -U postgres -f "$W/$workload" \
		-l --log-prefix="$OUT/log/$name" >"$OUT/log/$name.txt" 2>&1 || { cat "$OUT/log/$name.txt"; exit 1; }
	for n in 0 1 2; do after[n]=$(server_cpu "$dir/citus$n"); done
	local tps p50 p99 xacts
	tps=$(sed -n 's/^tps = \([0-9.]*\) .*/\1/p' "$OUT/log/$name.txt" | tail -n 1)
	xacts=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$OUT/log/$name.txt")
	p50=$(cat "$OUT/log/$name".* | awk '{print $3}' | sort -n | awk '{a[NR]=$1} END {printf "%.3f", a[int(NR*0.5)]/1000}')
	p99=$(cat "$OUT/log/$name".* | awk '{print $3}' | sort -n | awk '{a[NR]=$1} END {printf "%.3f", a[int(NR*0.99)]/1000}')
	rm -f "$OUT/log/$name".[0-9]*
	RUNS_TPS[$name]="${RUNS_TPS[$name]:-} $tps"
	TPS[$name]=$(echo "${RUNS_TPS[$name]}" | median)
	TPS[$name-p50]=$p50
	TPS[$name-p99]=$p99
	# CPU microseconds a transaction cost on the coordinator and on the workers
	TPS[$name-coord-us]=$(calc "(${after[0]} - ${before[0]}) * 1000000 / $xacts")
	TPS[$name-workers-us]=$(calc "(${after[1]} - ${before[1]} + ${after[2]} - ${before[2]}) * 1000000 / $xacts")
	say "  $name: $tps tps, latency p50 $p50 ms p99 $p99 ms, CPU per transaction: coordinator ${TPS[$name-coord-us]} us, workers ${TPS[$name-workers-us]} us"
}
cq -c "CREATE TABLE orders (key dedup_fingerprint NOT NULL, id bigserial, message_id text NOT NULL,
                            amount integer NOT NULL, created_at timestamptz NOT NULL DEFAULT now(),
                            PRIMARY KEY (key, id))" \
   -c "SELECT create_distributed_table('orders', 'key', colocate_with => 'dedup.claims')" >/dev/null
for rep in $(seq 1 "$REPS"); do
	fresh
	run dedup_claim_business_single dedup_claim_business.sql
	cq -c "TRUNCATE dedup.claims, orders" >/dev/null
	citus_run citus_colocated dedup_claim_business_colocated.sql
	# the same with the order's event, its partition in the same shard
	fresh
	run dedup_claim_business_event_single dedup_claim_business_event.sql
	cq -c "TRUNCATE dedup.claims, orders, dedup.outbox, dedup.outbox_topics" >/dev/null
	citus_run citus_event_colocated dedup_claim_business_event_colocated.sql
done
# a relay draining the outbox, through the coordinator (a take fills its
# batch across the partitions), against the same on the single server
CITUS_DRAIN_BATCHES=500
citus_drain() {	# NAME PSQL_FUNCTION: fill, then drain CITUS_DRAIN_BATCHES batches of 100 events
	local name=$1 conn=$2 tps left
	$conn -c "SELECT count(*) FROM generate_series(1, $((CITUS_DRAIN_BATCHES * 100))) i,
	          LATERAL dedup_outbox_put('bench-drain', 'e-' || i, jsonb_build_object('order', i),
	                                   aggregate_id => 'agg-' || i)" -c "CHECKPOINT" >/dev/null
	say "run $name (1 client, $CITUS_DRAIN_BATCHES batches of 100)"
	"$PG_BINDIR/pgbench" -n -M prepared -c 1 -j 1 -t "$CITUS_DRAIN_BATCHES" \
		$([ "$conn" = cq ] && echo "-h $dir/citus0 -p $((port + 10)) -U postgres") \
		-f "$W/dedup_outbox_drain.sql" >"$OUT/log/$name.txt" 2>&1 || { cat "$OUT/log/$name.txt"; exit 1; }
	tps=$(sed -n 's/^tps = \([0-9.]*\) .*/\1/p' "$OUT/log/$name.txt" | tail -n 1)
	left=$($conn -c "SELECT coalesce(sum(pending + in_flight), 0) FROM dedup_outbox_stats('bench-drain')")
	# events drained a second
	RUNS_TPS[$name]="${RUNS_TPS[$name]:-} $(calc "($CITUS_DRAIN_BATCHES * 100 - $left) * $tps / $CITUS_DRAIN_BATCHES")"
	TPS[$name]=$(echo "${RUNS_TPS[$name]}" | median)
	TPS[$name-left]=$left
	say "  $name: $(calc "($CITUS_DRAIN_BATCHES * 100 - $left) * $tps / $CITUS_DRAIN_BATCHES") events/s; events left: $left"
}
for rep in $(seq 1 "$REPS"); do
	fresh
	citus_drain dedup_outbox_drain_single q
	cq -c "TRUNCATE dedup.outbox, dedup.outbox_topics, dedup.outbox_batches, dedup.outbox_retry" >/dev/null
	citus_drain citus_outbox_drain cq
	# a take fills its batch across the partitions: 100 when 100 are free
	# (150 events of 150 aggregates, put through the coordinator, over
	# its 32 partitions), in one batch, acked whole by its id
	cq -c "SELECT count(*) FROM generate_series(1, 150) i,
	       LATERAL dedup_outbox_put('bench-fill', 'f-$rep-' || i, '{}', aggregate_id => 'fill-' || i)" >/dev/null
	fill=$(cq -c "CREATE TEMP TABLE fill AS SELECT * FROM dedup_outbox_take_batch('bench-fill', 100)" \
	          -c "SELECT count(*) || '/' || count(DISTINCT batch_id) || '/' || dedup_outbox_ack_batch(max(batch_id)) FROM fill")
	say "  take_batch('bench-fill', 100) with 150 free: events/batches/acked $fill"
	RUNS_TPS[citus_take_fill]="${RUNS_TPS[citus_take_fill]:-} ${fill%%/*}"
	TPS[citus_take_fill]=$(echo "${RUNS_TPS[citus_take_fill]}" | tr ' ' '\n' | grep -v '^$' | sort -n | head -n 1)
	TPS[citus_take_fill-all]=$fill
	cq -c "TRUNCATE dedup.outbox, dedup.outbox_topics, dedup.outbox_batches, dedup.outbox_retry" >/dev/null
done
# the business table distributed by message_id, not co-located with the claims
cq -c "DROP TABLE orders" \
   -c "CREATE TABLE orders (id bigserial, message_id text NOT NULL, amount integer NOT NULL,
                            created_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (message_id, id))" \
   -c "SELECT create_distributed_table('orders', 'message_id')" >/dev/null
for rep in $(seq 1 "$REPS"); do
	cq -c "TRUNCATE dedup.claims, orders" >/dev/null
	citus_run citus_not_colocated dedup_claim_business.sql
done
# the projection: a worker's CPU per transaction over the two workers, the
# coordinator's per transaction; N workers of one core each serve at most
# N / worker cost, and the coordinator (one core) 1 / its cost
citus_figures() {
	local coord_us worker_us workers
	coord_us=${TPS[citus_colocated-coord-us]}
	worker_us=${TPS[citus_colocated-workers-us]}
	figure_vs "Citus: claim + co-located business vs one server, tps" \
		"${TPS[citus_colocated]}" "${TPS[dedup_claim_business_single]}" "-" ""
	figure "  (latency of claim + co-located business, p50 / p99 ms)" \
		"${TPS[citus_colocated-p50]}/${TPS[citus_colocated-p99]}" "" "" "-" ""
	figure_vs "Citus: claim + business not co-located (2PC) vs one server, tps" \
		"${TPS[citus_not_colocated]}" "${TPS[dedup_claim_business_single]}" "-" ""
	figure "  (latency of claim + business not co-located, p50 / p99 ms)" \
		"${TPS[citus_not_colocated-p50]}/${TPS[citus_not_colocated-p99]}" "" "" "-" ""
	figure_vs "Citus: claim + co-located business + its event vs one server, tps" \
		"${TPS[citus_event_colocated]}" "${TPS[dedup_claim_business_event_single]}" "-" ""
	figure "  (latency of claim + co-located business + event, p50 / p99 ms)" \
		"${TPS[citus_event_colocated-p50]}/${TPS[citus_event_colocated-p99]}" "" "" "-" ""
	figure_vs "Citus: outbox drain through the coordinator vs one server, events/s" \
		"${TPS[citus_outbox_drain]}" "${TPS[dedup_outbox_drain_single]}" "-" ""
	figure "Citus: take_batch(..., 100) with 150 free, events (least of the runs)" \
		"${TPS[citus_take_fill]}" "100" "$(calc "${TPS[citus_take_fill]} / 100")" ">=" "1"
	figure "  (events / batch ids / acked by one ack of its id, last run)" \
		"${TPS[citus_take_fill-all]}" "" "" "-" ""
	figure "  (events left undrained: cluster / one server)" \
		"${TPS[citus_outbox_drain-left]}/${TPS[dedup_outbox_drain_single-left]}" "" "" "-" ""
	figure "  (CPU per co-located transaction: coordinator / all workers, us)" \
		"$coord_us/$worker_us" "" "" "-" ""
	for workers in 2 4 8 16; do
		figure "  (projected tps, $workers one-core workers, coordinator routing)" \
			"$(calc "($workers * 1000000 / $worker_us < 1000000 / $coord_us) ? $workers * 1000000 / $worker_us : 1000000 / $coord_us")" "" "" "-" ""
	done
}
