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
# spent per transaction gives the projection for N workers.  Then the time
# buckets on the cluster (issue 49): 1,000,000 claims of a 10 s ttl in one
# bucket, the coordinator's cleanup every second until that bucket is
# dropped on every node: the WAL of it a key, summed over the three nodes,
# and the rows deleted on the workers; and claims through the coordinator
# while such a bucket goes against the same without one.
# Only with --only citus; CITUS_PARTS chooses the parts (default "claims
# drain buckets").
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
   -c "SELECT dedup_set_scope('bench-hist', history => '1 hour', false_positive_rate => 0.01)" \
   -c "SET client_min_messages = warning" -c "SELECT dedup_distribute(32)" >/dev/null
CITUS_PARTS=${CITUS_PARTS:-claims drain buckets history}
citus_part() { case " $CITUS_PARTS " in *" $1 "*) return 0 ;; esac; return 1; }
cnode() {	# cnode N ARGS...: psql on node N (0 the coordinator)
	psql -X -q -At -v ON_ERROR_STOP=1 -h "$dir/citus$1" -p "$((port + 10 + $1))" -U postgres "${@:2}"
}
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
citus_part claims && for rep in $(seq 1 "$REPS"); do
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
citus_part drain && for rep in $(seq 1 "$REPS"); do
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
citus_part claims && for rep in $(seq 1 "$REPS"); do
	cq -c "TRUNCATE dedup.claims, orders" >/dev/null
	citus_run citus_not_colocated dedup_claim_business.sql
done

# time buckets on the cluster.  bucket_interval on every node: 1 hour
# while a bucket fills (it takes all the claims), 2 s to let it go
citus_bucket_interval() {
	local n
	for n in 0 1 2; do
		cnode "$n" -c "ALTER SYSTEM SET dedup.bucket_interval = '$1'" -c "SELECT pg_reload_conf()" >/dev/null
	done
	sleep 0.5
}
citus_pass() { cq -c "SET dedup.cleanup_pause = 0" -c "CALL dedup_cleanup()" >/dev/null; }
citus_current() { cq -c "SELECT bucket FROM dedup.buckets WHERE state = 'c'"; }
# citus_switch_from BUCKET: passes a second apart (bucket_interval 2 s)
# until another bucket is current, then bucket_interval 1 hour
citus_switch_from() {
	citus_bucket_interval 2s
	until [ "$(citus_current)" != "$1" ]; do
		citus_pass
		sleep 1
	done
	citus_bucket_interval 1h
}
# citus_fill_bucket N: a bucket of its own, N claims of a 10 s ttl in it,
# 10,000 a call through the coordinator; prints the bucket
citus_fill_bucket() {
	local n=$1 b i
	citus_pass	# the first pass lists bucket 0, dedup.claims itself
	citus_switch_from "$(citus_current)"
	b=$(citus_current)
	for i in $(seq 0 10000 $((n - 1))); do
		cq -c "SELECT count(*) FROM dedup_claim_batch('bench-bucket',
		       ARRAY(SELECT 'b$b-' || g FROM generate_series($i + 1, $i + 10000) g), ttl => '10 s')" >/dev/null
	done
	echo "$b"
}
citus_bucket_gone() {	# BUCKET: dropped on every node
	[ "$(cq -c "SELECT count(*) FROM dedup.buckets WHERE bucket = $1")$(cnode 1 -c "SELECT count(*) FROM dedup.buckets WHERE bucket = $1")$(cnode 2 -c "SELECT count(*) FROM dedup.buckets WHERE bucket = $1")" = 000 ]
}
citus_deleted() {	# rows deleted or dead in the claims' tables of both workers
	echo $(( $(cnode 1 -c "SELECT pg_stat_clear_snapshot()" -c "SELECT coalesce(sum(n_tup_del + n_tup_upd), 0) FROM pg_stat_user_tables WHERE schemaname = 'dedup' AND relname ~ '^claims'")
	       + $(cnode 2 -c "SELECT pg_stat_clear_snapshot()" -c "SELECT coalesce(sum(n_tup_del + n_tup_upd), 0) FROM pg_stat_user_tables WHERE schemaname = 'dedup' AND relname ~ '^claims'") ))
}
CITUS_BUCKET_KEYS=${CITUS_BUCKET_KEYS:-1000000}
if citus_part buckets; then
	cq -c "SELECT pg_stat_reset()" >/dev/null
	say "run citus_bucket_expiry ($CITUS_BUCKET_KEYS claims of a 10 s ttl in one bucket, then passes until it is dropped)"
	b=$(citus_fill_bucket "$CITUS_BUCKET_KEYS")
	say "  $(cq -c "SELECT string_agg(bucket || state, ' ' ORDER BY bucket) FROM dedup.buckets")"
	lsn=()
	for n in 0 1 2; do lsn[n]=$(cnode "$n" -c "SELECT pg_current_wal_lsn()"); done
	deleted0=$(citus_deleted)
	# what a bucket's life after its claims costs: the next bucket opened
	# and switched to (one, as at an interval of a quarter of the ttl),
	# then passes a second apart until the full one is sealed, retired and
	# dropped on every node
	t0=$SECONDS
	citus_switch_from "$b"
	until citus_bucket_gone "$b" || [ $((SECONDS - t0)) -gt 120 ]; do
		citus_pass
		sleep 1
	done
	citus_bucket_gone "$b" || { say "bucket $b not dropped in 120 s"; exit 1; }
	wal=0
	for n in 0 1 2; do
		d=$(cnode "$n" -c "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '${lsn[n]}')")
		wal=$((wal + ${d%.*}))
	done
	sleep 1	# a backend's table statistics reach the server within a second
	TPS[citus_bucket_wal]=$(calc "$wal / $CITUS_BUCKET_KEYS")
	TPS[citus_bucket_dead]=$(calc "($(citus_deleted) - $deleted0) / $CITUS_BUCKET_KEYS")
	TPS[citus_bucket_secs]=$((SECONDS - t0))
	say "  citus_bucket_expiry: bucket $b dropped in ${TPS[citus_bucket_secs]} s; WAL $wal B over the nodes: ${TPS[citus_bucket_wal]} B a key; deleted or updated a key ${TPS[citus_bucket_dead]}"
	# claims through the coordinator while a bucket of CITUS_BUCKET_KEYS
	# goes (its drop inside the run) against the same run with passes and
	# nothing to drop, interleaved
	for rep in $(seq 1 "$REPS"); do
		b=$(citus_fill_bucket "$CITUS_BUCKET_KEYS")
		# switched from, sealed, retired: the next pass drops it
		citus_switch_from "$b"
		t0=$SECONDS
		until [ "$(cq -c "SELECT state FROM dedup.buckets WHERE bucket = $b")" = r ] || [ $((SECONDS - t0)) -gt 60 ]; do
			citus_pass
			sleep 1
		done
		{ sleep 2; t0=$SECONDS; while [ $((SECONDS - t0)) -lt "$DURATION" ]; do citus_pass; sleep 1; done; } &
		passes=$!
		citus_run citus_claims_during_drop dedup_single.sql
		wait "$passes"
		citus_bucket_gone "$b" && RUNS_TPS[citus_drop_inside]="${RUNS_TPS[citus_drop_inside]:-} 1"
		{ sleep 2; t0=$SECONDS; while [ $((SECONDS - t0)) -lt "$DURATION" ]; do citus_pass; sleep 1; done; } &
		passes=$!
		citus_run citus_claims_no_drop dedup_single.sql
		wait "$passes"
	done
	TPS[citus_drop_inside]=$(echo "${RUNS_TPS[citus_drop_inside]:-}" | wc -w)
fi
# histories on the cluster: CITUS_HISTORY_KEYS claims of a 2 s ttl in a
# scope with a history (rate 0.01), their bucket folded on each node into
# its shards' filters and dropped; then every one claimed again through
# the coordinator (a claim that succeeds is a false negative), and as many
# keys never claimed (one the filter refuses is a false positive)
CITUS_HISTORY_KEYS=${CITUS_HISTORY_KEYS:-200000}
citus_claimed() {	# PREFIX N TTL: how many of keys PREFIX1..N a claim takes, 10,000 a call
	cq -c "SELECT coalesce(sum(n), 0) FROM generate_series(0, $2 - 1, 10000) s,
	       LATERAL (SELECT count(*) n FROM dedup_claim_batch('bench-hist', ARRAY(SELECT '$1' || g
	                FROM generate_series(s + 1, least(s + 10000, $2)) g), ttl => '$3')) c"
}
if citus_part history; then
	say "run citus_history ($CITUS_HISTORY_KEYS claims of a history scope, folded per shard)"
	citus_pass
	citus_switch_from "$(citus_current)"
	citus_bucket_interval 2s	# the claims' bucket switched from, sealed, folded
	t0=$SECONDS
	n=$(citus_claimed h- "$CITUS_HISTORY_KEYS" '2 s')
	folded="SELECT coalesce(sum(keys), 0) FROM dedup_history('bench-hist')"
	until [ "$(cq -c "$folded")" -ge "$n" ] || [ $((SECONDS - t0)) -gt 300 ]; do citus_pass; sleep 1; done
	TPS[citus_history_secs]=$((SECONDS - t0))
	TPS[citus_history_folded]=$(cq -c "$folded")
	TPS[citus_history_fn]=$(citus_claimed h- "$CITUS_HISTORY_KEYS" '2 s')
	TPS[citus_history_fp]=$(calc "($CITUS_HISTORY_KEYS - $(citus_claimed never- "$CITUS_HISTORY_KEYS" '1 hour')) / $CITUS_HISTORY_KEYS")
	say "  citus_history: $n claimed, ${TPS[citus_history_folded]} folded in ${TPS[citus_history_secs]} s (from the first claim); false negatives ${TPS[citus_history_fn]}; false positive share ${TPS[citus_history_fp]} (rate 0.01)"
fi

# the projection: a worker's CPU per transaction over the two workers, the
# coordinator's per transaction; N workers of one core each serve at most
# N / worker cost, and the coordinator (one core) 1 / its cost
citus_figures() {
	local coord_us worker_us workers
	citus_part buckets && citus_bucket_figures
	citus_part history && citus_history_figures
	citus_part claims || return 0
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
citus_bucket_figures() {
	figure "Citus buckets: WAL of a bucket's expiry a key, summed over the nodes, B" \
		"${TPS[citus_bucket_wal]}" "" "${TPS[citus_bucket_wal]}" "<=" "2"
	figure "Citus buckets: rows deleted or updated in the claims' tables a key expired" \
		"${TPS[citus_bucket_dead]}" "" "${TPS[citus_bucket_dead]}" "<" "0.01"
	figure_vs "Citus buckets: claims while a bucket of $CITUS_BUCKET_KEYS goes vs without, tps" \
		"${TPS[citus_claims_during_drop]}" "${TPS[citus_claims_no_drop]}" ">=" "0.9"
	figure "  (runs whose bucket was dropped inside the run / runs)" \
		"${TPS[citus_drop_inside]}/$REPS" "" "" "-" ""
	figure "  (CPU a claim while the bucket goes / without: coordinator + workers, us)" \
		"$(calc "${TPS[citus_claims_during_drop-coord-us]} + ${TPS[citus_claims_during_drop-workers-us]}")/$(calc "${TPS[citus_claims_no_drop-coord-us]} + ${TPS[citus_claims_no_drop-workers-us]}")" "" "" "-" ""
}
citus_history_figures() {
	figure "Citus history: false negatives of $CITUS_HISTORY_KEYS folded keys, claimed again" \
		"${TPS[citus_history_fn]}" "" "${TPS[citus_history_fn]}" "<=" "0"
	figure_vs "Citus history: false positives vs the rate (0.01)" \
		"${TPS[citus_history_fp]}" "0.01" "<=" "1.25"
	figure "  (keys folded / seconds from the first claim to the last fold)" \
		"${TPS[citus_history_folded]}/${TPS[citus_history_secs]}" "" "" "-" ""
}
