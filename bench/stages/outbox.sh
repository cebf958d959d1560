# bench/stages/outbox.sh: the outbox stage of scripts/bench.
#
# The outbox: put + business insert against the seed's plain INSERT, and
# against the same seed made idempotent by hand (a unique event key and
# INSERT ... ON CONFLICT DO NOTHING: what a put promises, and costs); the
# drain of a prefilled outbox by one relay in batches of 100 (the batch
# API, and the 1.0 API by ids) against the seed's poller and PgQ; four
# relays at once on one topic of many aggregates; and a live run: producers
# at a steady rate, one relay waiting on NOTIFY (bench/outbox_relay.c), the
# cleanup worker trimming the log every second, for OUTBOX_CYCLES retention
# cycles: the latency from put to take, and the outbox's size after each
# cycle.  Then hot aggregates: HOT_EVENTS events over 1, 10 and 1,000
# aggregates drained by one relay in batches of 100 (and over 1 by two
# relays at once), as events/s; and a held xmin horizon: a relay keeping
# up with producers at HOLD_RATE puts/s, its take + ack latency and the
# dead tuples of schema dedup per event put, with and without a
# transaction holding the horizon for HOLD_SECONDS, and PgQ's (of schema
HOLD_LONG=${HOLD_LONG:-120}
HOLD_PRE=${HOLD_PRE:-40}
PACED_RATE=${PACED_RATE:-200}
PACED_SECONDS=${PACED_SECONDS:-20}
OUTBOX_PARTS=${OUTBOX_PARTS:-put drain live hot hold holdlive paced}
#
# Sourced by scripts/bench (the driver) at the top level, with bench/lib.sh's
# helpers and the driver's settings; defines outbox_figures, which the driver
# calls for the stage's lines of figures.txt.
#
# Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.

OUTBOX_RETENTION=${OUTBOX_RETENTION:-10}
OUTBOX_CYCLES=5
OUTBOX_RATE=${OUTBOX_RATE:-2000}
DRAIN_BATCHES=3000
HOT_EVENTS=${HOT_EVENTS:-20000}
HOLD_RATE=${HOLD_RATE:-1000}
HOLD_SECONDS=${HOLD_SECONDS:-20}
HOLD_LONG=${HOLD_LONG:-120}
HOLD_PRE=${HOLD_PRE:-40}
PACED_RATE=${PACED_RATE:-200}
PACED_SECONDS=${PACED_SECONDS:-20}
OUTBOX_PARTS=${OUTBOX_PARTS:-put drain live hot hold holdlive paced}
outbox_part() { case " $OUTBOX_PARTS " in *" $1 "*) return 0 ;; esac; return 1; }
hot_fill() {	# TOPIC N AGGREGATES: N events over that many aggregates, in one transaction
	q -c "SELECT count(*) FROM generate_series(1, $2) i,
	        LATERAL dedup_outbox_put('$1', 'e-' || i, jsonb_build_object('order', i),
	                                 aggregate_id => 'agg-' || (i % $3), type => 'OrderCreated')" \
	  -c "VACUUM ANALYZE dedup.outbox" -c "CHECKPOINT" >/dev/null
}
hot_run() {	# NAME CLIENTS: relays drain bench-hot in batches of 100 until it is empty
	local name=$1 clients=$2 t0 t1 left rate
	say "run $name ($clients relay(s), $HOT_EVENTS events)"
	t0=$(date +%s.%N)
	while :; do
		"$PG_BINDIR/pgbench" -n -M prepared -c "$clients" -j "$clients" -t $((HOT_EVENTS / 100 / clients + 1)) \
			-f "$W/dedup_outbox_hot.sql" >"$OUT/log/$name.txt" 2>&1 || { cat "$OUT/log/$name.txt"; exit 1; }
		left=$(q -c "SELECT coalesce(sum(pending + in_flight), 0) FROM dedup_outbox_stats('bench-hot')")
		[ "$left" -eq 0 ] && break
	done
	t1=$(date +%s.%N)
	rate=$(calc "$HOT_EVENTS / ($t1 - $t0)")
	RUNS_TPS[$name]="${RUNS_TPS[$name]:-} $rate"
	TPS[$name]=$(echo "${RUNS_TPS[$name]}" | median)
	echo "$name,$rate,,,,,,$HOT_EVENTS,$(relation_bytes)" >>"$OUT/results.csv"
	say "  $name: $rate events/s; held rows left $(q -c "SELECT count(*) FROM dedup.outbox_held"), retry rows $(q -c "SELECT count(*) FROM dedup.outbox_retry")"
}
hold_run() {	# NAME HOLD [pgq]: producers at HOLD_RATE puts/s and a relay for HOLD_SECONDS, the horizon held or not; pgq: PgQ's
	local name=$1 hold=$2 sys=${3:-dedup} holder= dead0 dead1 puts lat
	say "run $name (${HOLD_SECONDS}s, $HOLD_RATE puts/s, horizon held: $hold)"
	if [ "$hold" = yes ]; then
		psql -X -q -h "$dir" -p "$port" -U postgres -d postgres \
			-c "BEGIN ISOLATION LEVEL REPEATABLE READ" -c "SELECT count(*) FROM dedup.outbox" \
			-c "SELECT pg_sleep($HOLD_SECONDS + 3)" -c "COMMIT" >/dev/null 2>&1 &
		holder=$!
		sleep 1
	fi
	dead0=$(q -c "SELECT coalesce(sum(n_dead_tup), 0) FROM pg_stat_user_tables WHERE schemaname = '$sys'")
	"$PG_BINDIR/pgbench" -n -M prepared -c 1 -j 1 -R "$HOLD_RATE" -T "$HOLD_SECONDS" \
		-f "$W/${sys}_outbox_hold_put.sql" >"$OUT/log/${name}_puts.txt" 2>&1 &
	local producers=$!
	"$PG_BINDIR/pgbench" -n -M prepared -c 1 -j 1 -R 50 -T "$HOLD_SECONDS" \
		-f "$W/${sys}_outbox_hold_relay.sql" >"$OUT/log/$name.txt" 2>&1 || { cat "$OUT/log/$name.txt"; exit 1; }
	wait "$producers" || { cat "$OUT/log/${name}_puts.txt"; exit 1; }
	sleep 1.2	# let the backends' statistics reach the shared counters
	dead1=$(q -c "SELECT coalesce(sum(n_dead_tup), 0) FROM pg_stat_user_tables WHERE schemaname = '$sys'")
	puts=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$OUT/log/${name}_puts.txt")
	lat=$(sed -n 's/^latency average = \([0-9.]*\) ms/\1/p' "$OUT/log/$name.txt")
	[ -n "$holder" ] && wait "$holder"
	TPS[$name]=$lat
	TPS[${name}_dead]=$(calc "($dead1 - $dead0) / $puts")
	echo "$name,,$lat,,,,$(calc "($dead1 - $dead0) / $puts"),$puts,$(relation_bytes)" >>"$OUT/results.csv"
	say "  $name: take + ack $lat ms; $((dead1 - dead0)) dead tuples in schema $sys for $puts events put"
}
# The server's side of the relay backend named bench-relay: the total time
# (ms) of the top-level functions of a cycle, the number of cycles, and the
# backend's CPU (clock ticks), space-separated.
relay_sample() {	# FUNCS CYCLE_FUNC
	local pid cpu
	pid=$(q -c "SELECT pid FROM pg_stat_activity WHERE application_name = 'bench-relay' LIMIT 1")
	cpu=$(awk '{print $14 + $15}' "/proc/$pid/stat" 2>/dev/null) || cpu=0
	q -F ' ' -c "SELECT coalesce(sum(total_time), 0),
	                    coalesce(sum(calls) FILTER (WHERE funcid = '$2'::regprocedure), 0), $cpu
	             FROM pg_stat_user_functions WHERE funcid = ANY (ARRAY[$1]::regprocedure[]::oid[])"
}
hold_live_run() {	# NAME SYS: unthrottled relay, the horizon held HOLD_LONG s after HOLD_PRE s
	local name=$1 sys=$2 funcs cyc seqsql logsize t0 b0 b1 e0 e1 dead0 dead1 seq0 seq1 holder producers relay tick
	if [ "$sys" = dedup ]; then
		funcs="'dedup_outbox_take_batch(text,integer,interval,interval)', 'dedup_outbox_ack_batch(bigint,uuid[],interval,text)'"
		cyc='dedup_outbox_take_batch(text,integer,interval,interval)'
		seqsql="SELECT pg_sequence_last_value('dedup.outbox_seq_seq')"
		logsize="SELECT pg_total_relation_size('dedup.outbox')"
	else
		funcs="'pgq.ticker(text)', 'pgq.next_batch(text,text)', 'pgq.get_batch_events(bigint)', 'pgq.finish_batch(bigint)'"
		cyc='pgq.next_batch(text,text)'
		seqsql="SELECT pg_sequence_last_value(queue_event_seq::regclass) FROM pgq.queue WHERE queue_name = 'bench-hold'"
		logsize="SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		         WHERE n.nspname = 'pgq' AND c.relkind = 'r' AND c.relname LIKE 'event\\_%'"
	fi
	say "run $name (unthrottled relay; ${HOLD_PRE}s, then the horizon held ${HOLD_LONG}s; $HOLD_RATE puts/s)"
	"$PG_BINDIR/pgbench" -n -M prepared -c 1 -j 1 -R "$HOLD_RATE" -T $((HOLD_PRE + HOLD_LONG + 2)) \
		-f "$W/${sys}_outbox_hold_put.sql" >"$OUT/log/${name}_puts.txt" 2>&1 &
	producers=$!
	PGAPPNAME=bench-relay PGOPTIONS="-c track_functions=all" \
	"$PG_BINDIR/pgbench" -n -M prepared -c 1 -j 1 -T $((HOLD_PRE + HOLD_LONG + 5)) \
		-f "$W/${sys}_outbox_hold_relay.sql" >"$OUT/log/$name.txt" 2>&1 &
	relay=$!
	t0=$(date +%s)
	tick() { sleep $(( $1 - ($(date +%s) - t0) )) 2>/dev/null || :; }
	tick $((HOLD_PRE - 10)); b0=$(relay_sample "$funcs" "$cyc")
	tick "$HOLD_PRE"; b1=$(relay_sample "$funcs" "$cyc")
	psql -X -q -h "$dir" -p "$port" -U postgres -d postgres \
		-c "BEGIN ISOLATION LEVEL REPEATABLE READ" -c "SELECT count(*) FROM orders" \
		-c "SELECT pg_sleep($HOLD_LONG)" -c "COMMIT" >/dev/null 2>&1 &
	holder=$!
	sleep 0.5
	dead0=$(q -c "SELECT coalesce(sum(n_tup_upd + n_tup_del), 0) FROM pg_stat_user_tables WHERE schemaname = '$sys'")
	seq0=$(q -c "$seqsql")
	tick $((HOLD_PRE + HOLD_LONG - 10)); e0=$(relay_sample "$funcs" "$cyc")
	tick $((HOLD_PRE + HOLD_LONG)); e1=$(relay_sample "$funcs" "$cyc")
	seq1=$(q -c "$seqsql")
	echo "samples (ms calls cpu_ticks): $b0 / $b1 / $e0 / $e1" >>"$OUT/log/$name.txt"
	sleep 1.2	# let the backends' statistics reach the shared counters
	dead1=$(q -c "SELECT coalesce(sum(n_tup_upd + n_tup_del), 0) FROM pg_stat_user_tables WHERE schemaname = '$sys'")
	wait "$holder"
	wait "$relay" || { cat "$OUT/log/$name.txt"; exit 1; }
	wait "$producers" || { cat "$OUT/log/${name}_puts.txt"; exit 1; }
	local schema events
	schema=$(q -c "SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
	               WHERE n.nspname = '$sys' AND c.relkind = 'r'")
	events=$(q -c "$logsize")
	# per cycle: server-side ms of its calls, and CPU ms of the backend
	set -- $b0 $b1 $e0 $e1
	local before=$(calc "($4 - $1) / ($5 - $2)") end=$(calc "(${10} - $7) / (${11} - $8)")
	local cpu_before=$(calc "($6 - $3) * 10 / ($5 - $2)") cpu_end=$(calc "(${12} - $9) * 10 / (${11} - $8)")
	# (a backend not found, its CPU read as 0: no figure)
	[ "$3" -gt 0 ] && [ "$6" -gt 0 ] || cpu_before=nan
	[ "$9" -gt 0 ] && [ "${12}" -gt 0 ] || cpu_end=nan
	TPS[${name}_before]=$before
	TPS[${name}_end]=$end
	TPS[${name}_cpu_before]=$cpu_before
	TPS[${name}_cpu_end]=$cpu_end
	TPS[${name}_dead]=$(calc "($dead1 - $dead0) / ($seq1 - $seq0)")
	TPS[${name}_size]=$(calc "$schema / $events")
	echo "$name,,$end,,,,${TPS[${name}_dead]},$((seq1 - seq0)),$schema" >>"$OUT/results.csv"
	say "  $name: cycle (server) $before ms before the hold, $end ms at its end ($(calc "$end / $before")x);" \
		"CPU $cpu_before -> $cpu_end ms; $(($5 - $2)) -> $((${11} - $8)) cycles in 10 s"
	say "  $name: $((dead1 - dead0)) dead tuples in schema $sys for $((seq1 - seq0)) events put during the hold;" \
		"schema $(numfmt --to=iec "$schema")B, events' table $(numfmt --to=iec "$events")B"
}
drain_run() {	# NAME SCRIPT CHECK_SQL [CLIENTS]
	local name=$1 script=$2 check=$3 clients=${4:-1} tps left
	say "run $name ($clients client(s), $DRAIN_BATCHES batches of 100)"
	"$PG_BINDIR/pgbench" -n -M prepared -c "$clients" -j "$clients" -t $((DRAIN_BATCHES / clients)) \
		-f "$W/$script" >"$OUT/log/$name.txt" 2>&1 || { cat "$OUT/log/$name.txt"; exit 1; }
	tps=$(sed -n 's/^tps = \([0-9.]*\) .*/\1/p' "$OUT/log/$name.txt" | tail -n 1)
	left=$(q -c "$check")
	RUNS_TPS[$name]="${RUNS_TPS[$name]:-} $(calc "$tps * 100")"
	TPS[$name]=$(echo "${RUNS_TPS[$name]}" | median)
	echo "$name,$(calc "$tps * 100"),,,,,,$((DRAIN_BATCHES * 100)),$(relation_bytes)" >>"$OUT/results.csv"
	say "  $name: $(calc "$tps * 100") events/s; events left undelivered: $left"
}
dedup_fill() {	# TOPIC N: N events of N aggregates, put 10,000 a transaction
	# (a transaction holds a lock of each aggregate it put until it ends:
	# dedup.outbox_aggregate_locks, 65,536 by default, are all there are)
	q -c "DO \$\$ BEGIN FOR c IN 0..($2 - 1) / 10000 LOOP
	        PERFORM dedup_outbox_put('$1', 'e-' || i, jsonb_build_object('order', i),
	                                 aggregate_id => 'agg-' || i, type => 'OrderCreated')
	        FROM generate_series(c * 10000 + 1, least($2, (c + 1) * 10000)) i;
	        COMMIT;
	      END LOOP; END \$\$" \
	  -c "VACUUM ANALYZE dedup.outbox" -c "CHECKPOINT" >/dev/null
}
outbox_bytes() {
	q -c "SELECT sum(pg_total_relation_size(c)) FROM unnest(ARRAY['dedup.outbox', 'dedup.outbox_keys',
	        'dedup.outbox_topics', 'dedup.outbox_batches', 'dedup.outbox_retry', 'dedup.outbox_held', 'dedup.outbox_dead']::regclass[]) AS c"
}
if outbox_part put; then
say "== outbox: put + business insert"
for rep in $(seq 1 "$REPS"); do
	for w in seed_outbox_business seed_outbox_idem_business dedup_outbox_business; do
		fresh
		run "$w" "$w.sql"
	done
done
fi

if outbox_part drain; then
say "== outbox drain, one relay, batches of 100 ($REPS times each, interleaved)"
n=$((DRAIN_BATCHES * 100))
unpublished="SELECT coalesce(sum(pending + in_flight), 0) FROM dedup_outbox_stats('bench-drain')"
for rep in $(seq 1 "$REPS"); do
	fresh
	q -c "INSERT INTO seed_outbox (aggregatetype, aggregateid, type, payload)
	      SELECT 'orders', 'agg-' || i, 'OrderCreated', jsonb_build_object('order', i)
	      FROM generate_series(1, $n) i" -c "VACUUM ANALYZE seed_outbox" -c "CHECKPOINT" >/dev/null
	drain_run seed_outbox_drain seed_outbox_drain.sql "SELECT count(*) FROM seed_outbox WHERE NOT published"
	fresh
	dedup_fill bench-drain "$n"
	drain_run dedup_outbox_drain dedup_outbox_drain.sql "$unpublished"
	# PgQ: batches are cut by ticks; a tick after every 100 events, each its
	# own transaction (pgq.ticker ticks once ticker_max_count new events are there)
	q -c "SELECT pgq.create_queue('bench')" -c "SELECT pgq.set_queue_config('bench', 'ticker_max_count', '100')" \
		-c "SELECT pgq.register_consumer('bench', 'relay')" \
		-c "DO \$\$ BEGIN FOR b IN 1..$((DRAIN_BATCHES + 1)) LOOP
		      PERFORM pgq.insert_event('bench', 'OrderCreated', jsonb_build_object('order', i)::text)
		      FROM generate_series(1, 100) i;
		      COMMIT;
		      PERFORM pgq.ticker('bench');
		      COMMIT;
		    END LOOP; END \$\$" -c "CHECKPOINT" >/dev/null
	drain_run pgq_drain pgq_drain.sql "SELECT pending_events FROM pgq.get_consumer_info('bench', 'relay')"
	q -c "SELECT pgq.unregister_consumer('bench', 'relay')" -c "SELECT pgq.drop_queue('bench')" >/dev/null
done
fresh
dedup_fill bench-drain "$n"
drain_run dedup_outbox_drain_ids dedup_outbox_drain_ids.sql "$unpublished"
fresh
dedup_fill bench-drain "$n"
drain_run dedup_outbox_drain_4 dedup_outbox_drain.sql "$unpublished" 4
fi

if outbox_part hot; then
say "== outbox hot aggregates: $HOT_EVENTS events over 1, 10 and 1,000 aggregates, batches of 100 ($REPS times each, interleaved)"
for rep in $(seq 1 "$REPS"); do
	for aggs in 1 10 1000; do
		fresh
		hot_fill bench-hot "$HOT_EVENTS" "$aggs"
		hot_run "dedup_outbox_hot_$aggs" 1
	done
done
fresh
hot_fill bench-hot "$HOT_EVENTS" 1
hot_run dedup_outbox_hot_1_2relays 2
fi

if outbox_part hold; then
say "== outbox under a held xmin horizon: $HOLD_RATE puts/s, one relay, ${HOLD_SECONDS}s"
fresh
hold_run dedup_outbox_hold_none no
fresh
hold_run dedup_outbox_hold_held yes
# PgQ at the same cadence: a tick before each batch (ticker_max_count 1),
# next_batch, get_batch_events, finish_batch
if [ -n "$(q -c "SELECT 1 FROM pg_extension WHERE extname = 'pgq'")" ]; then
	fresh
	q -c "SELECT pgq.create_queue('bench-hold')" -c "SELECT pgq.set_queue_config('bench-hold', 'ticker_max_count', '1')" \
	  -c "SELECT pgq.register_consumer('bench-hold', 'relay')" -c "CHECKPOINT" >/dev/null
	hold_run pgq_hold_held yes pgq
	q -c "SELECT pgq.unregister_consumer('bench-hold', 'relay')" -c "SELECT pgq.drop_queue('bench-hold')" >/dev/null
fi
fi

if outbox_part holdlive; then
say "== outbox under a held xmin horizon, relay back to back: $HOLD_RATE puts/s, held ${HOLD_LONG}s after ${HOLD_PRE}s"
fresh
hold_live_run dedup_outbox_holdlive dedup
if [ -n "$(q -c "SELECT 1 FROM pg_extension WHERE extname = 'pgq'")" ]; then
	fresh
	q -c "SELECT pgq.create_queue('bench-hold')" -c "SELECT pgq.set_queue_config('bench-hold', 'ticker_max_count', '1')" \
	  -c "SELECT pgq.register_consumer('bench-hold', 'relay')" -c "CHECKPOINT" >/dev/null
	hold_live_run pgq_holdlive pgq
	q -c "SELECT pgq.unregister_consumer('bench-hold', 'relay')" -c "SELECT pgq.drop_queue('bench-hold')" >/dev/null
fi
fi

if outbox_part live; then
say "== outbox live: $OUTBOX_RATE puts/s, one relay on NOTIFY, retention ${OUTBOX_RETENTION}s, $OUTBOX_CYCLES cycles"
fresh
gcc -O2 -Wall -Werror -I"$(pg_config --includedir)" -o "$dir/outbox_relay" "$DEDUP_ROOT/bench/outbox_relay.c" \
	-L"$(pg_config --libdir)" -lpq
q -c "SELECT FROM dedup_set_scope('bench-live', retention => '$OUTBOX_RETENTION s')"
worker on 1s
"$dir/outbox_relay" "host=$dir port=$port user=postgres dbname=postgres" bench-live \
	$((OUTBOX_RETENTION * (OUTBOX_CYCLES + 1) + 2)) >"$OUT/log/outbox_latency.txt" 2>"$OUT/log/outbox_relay.txt" &
relay_pid=$!
"$PG_BINDIR/pgbench" -n -M prepared -c 2 -j 2 -R "$OUTBOX_RATE" -T $((OUTBOX_RETENTION * (OUTBOX_CYCLES + 1))) \
	-f "$W/dedup_outbox_live.sql" >"$OUT/log/dedup_outbox_live.txt" 2>&1 &
producers_pid=$!
sleep "$OUTBOX_RETENTION"	# the first cycle fills the keys' retention
for c in $(seq 1 "$OUTBOX_CYCLES"); do
	sleep "$OUTBOX_RETENTION"
	OUTBOX_SIZES[$c]=$(outbox_bytes)
	say "  after cycle $c: outbox tables $(numfmt --to=iec "${OUTBOX_SIZES[$c]}")B," \
		"$(q -c "SELECT coalesce(sum(pending + in_flight), 0) FROM dedup_outbox_stats('bench-live')") unpublished"
done
wait "$producers_pid" || { cat "$OUT/log/dedup_outbox_live.txt"; exit 1; }
wait "$relay_pid" || { cat "$OUT/log/outbox_relay.txt"; exit 1; }
worker off
TPS[outbox_live_growth]=$(calc "${OUTBOX_SIZES[$OUTBOX_CYCLES]} / ${OUTBOX_SIZES[1]}")
TPS[outbox_latency_p50]=$(sort -g "$OUT/log/outbox_latency.txt" | awk '{a[NR]=$1} END {printf "%.6f", a[int(NR*0.5)] * 1000}')
TPS[outbox_latency_p99]=$(sort -g "$OUT/log/outbox_latency.txt" | awk '{a[NR]=$1} END {printf "%.6f", a[int(NR*0.99)] * 1000}')
TPS[outbox_live_events]=$(wc -l <"$OUT/log/outbox_latency.txt")
say "  $(cat "$OUT/log/outbox_relay.txt"); latency p50 ${TPS[outbox_latency_p50]} ms, p99 ${TPS[outbox_latency_p99]} ms"
fi
if outbox_part paced; then
say "== outbox paced: $PACED_RATE business transactions/s for ${PACED_SECONDS}s, commit to receipt: dedup relay (wait => 1 s) vs graphile-worker"
node_packages
npm_ci paced packages "outbox paced"
paced_mods=$NPM_MODS
cp "$DEDUP_ROOT/bench/paced/paced.js" "$paced_mods/"
fresh
for sys in dedup graphile; do
	PGHOST=$dir PGPORT=$port PGUSER=postgres PGDATABASE=postgres \
		node "$paced_mods/paced.js" "$sys" "$PACED_RATE" "$PACED_SECONDS" >"$OUT/log/paced_$sys.txt" 2>&1 ||
		{ cat "$OUT/log/paced_$sys.txt"; exit 1; }
	line=$(tail -n 1 "$OUT/log/paced_$sys.txt")
	TPS[paced_${sys}_p50]=$(echo "$line" | sed -n 's/.* p50_ms=\([0-9.]*\).*/\1/p')
	TPS[paced_${sys}_p99]=$(echo "$line" | sed -n 's/.* p99_ms=\([0-9.]*\).*/\1/p')
	say "  $line"
done
fi
outbox_figures() {
	if outbox_part put; then
	figure_vs "outbox put + business insert: tps vs seed outbox INSERT + business" \
		"${TPS[dedup_outbox_business]}" "${TPS[seed_outbox_business]}" ">=" 1.0
	figure_vs "outbox: WAL bytes per event, outbox tables; seed's in baseline" \
		"${RELWALTX[dedup_outbox_business]}" "${RELWALTX[seed_outbox_business]}" "<=" 1.3
	# what idempotency costs a hand-written outbox, and the put against that
	figure_vs "  (seed made idempotent: tps vs the plain seed outbox INSERT + business)" \
		"${TPS[seed_outbox_idem_business]}" "${TPS[seed_outbox_business]}" "-" ""
	figure_vs "  (outbox put + business: tps vs the seed made idempotent)" \
		"${TPS[dedup_outbox_business]}" "${TPS[seed_outbox_idem_business]}" "-" ""
	figure_vs "  (outbox: WAL bytes per event vs the seed made idempotent)" \
		"${RELWALTX[dedup_outbox_business]}" "${RELWALTX[seed_outbox_idem_business]}" "-" ""
	# the server's CPU a transaction (us), which the machine's noise moves less than tps
	figure_vs "  (outbox put + business: server's CPU per tx vs the seed's)" \
		"${CPUTX[dedup_outbox_business]}" "${CPUTX[seed_outbox_business]}" "-" ""
	figure_vs "  (outbox put + business: server's CPU per tx vs the idempotent seed's)" \
		"${CPUTX[dedup_outbox_business]}" "${CPUTX[seed_outbox_idem_business]}" "-" ""
	fi
	if outbox_part drain; then
	figure_vs "outbox drain, 1 relay, batches of 100: events/s vs seed poller" \
		"${TPS[dedup_outbox_drain]}" "${TPS[seed_outbox_drain]}" ">=" 2
	figure_vs "outbox drain vs PgQ next_batch + get_batch_events + finish_batch" \
		"${TPS[dedup_outbox_drain]}" "${TPS[pgq_drain]}" ">=" 1.2
	figure_vs "  (outbox drain, 4 relays at once: events/s vs 1 relay)" \
		"${TPS[dedup_outbox_drain_4]}" "${TPS[dedup_outbox_drain]}" "-" ""
	figure_vs "  (outbox drain, 1.0 API: take, ack by ids: events/s vs seed poller)" \
		"${TPS[dedup_outbox_drain_ids]}" "${TPS[seed_outbox_drain]}" "-" ""
	fi
	if outbox_part hot; then
	figure_vs "outbox hot drain, 1 aggregate vs 1,000: events/s" \
		"${TPS[dedup_outbox_hot_1]}" "${TPS[dedup_outbox_hot_1000]}" ">=" 0.5
	figure_vs "  (outbox hot drain, 10 aggregates vs 1,000: events/s)" \
		"${TPS[dedup_outbox_hot_10]}" "${TPS[dedup_outbox_hot_1000]}" "-" ""
	figure_vs "  (outbox hot drain, 1 aggregate, 2 relays vs 1,000 aggregates)" \
		"${TPS[dedup_outbox_hot_1_2relays]}" "${TPS[dedup_outbox_hot_1000]}" "-" ""
	fi
	if outbox_part hold; then
	figure_vs "outbox take + ack ms, horizon held vs not" \
		"${TPS[dedup_outbox_hold_held]}" "${TPS[dedup_outbox_hold_none]}" "<=" 1.5
	figure "outbox dead tuples in dedup per event put, horizon held" \
		"${TPS[dedup_outbox_hold_held_dead]}" "" "${TPS[dedup_outbox_hold_held_dead]}" "<" 0.05
	[ -n "${TPS[pgq_hold_held_dead]:-}" ] &&
	figure "  (PgQ at the same batch cadence: dead tuples in pgq per event put, held)" \
		"${TPS[pgq_hold_held_dead]}" "" "${TPS[pgq_hold_held_dead]}" "-" ""
	fi
	if outbox_part holdlive; then
	figure_vs "outbox take + ack back to back, server ms: end of a ${HOLD_LONG}s hold vs before" \
		"${TPS[dedup_outbox_holdlive_end]}" "${TPS[dedup_outbox_holdlive_before]}" "<=" 1.5
	figure_vs "  (the same, the relay backend's CPU ms a cycle: end vs before)" \
		"${TPS[dedup_outbox_holdlive_cpu_end]}" "${TPS[dedup_outbox_holdlive_cpu_before]}" "-" ""
	figure "outbox dead tuples in dedup per event put during the hold, back to back" \
		"${TPS[dedup_outbox_holdlive_dead]}" "" "${TPS[dedup_outbox_holdlive_dead]}" "<" 0.05
	figure "outbox schema size after the hold vs its log's (the events alone)" \
		"${TPS[dedup_outbox_holdlive_size]}" "" "${TPS[dedup_outbox_holdlive_size]}" "<=" 1.5
	if [ -n "${TPS[pgq_holdlive_end]:-}" ]; then
	figure_vs "  (PgQ back to back, server ms a cycle: end of the hold vs before)" \
		"${TPS[pgq_holdlive_end]}" "${TPS[pgq_holdlive_before]}" "-" ""
	figure "  (PgQ back to back: dead tuples in pgq per event put during the hold)" \
		"${TPS[pgq_holdlive_dead]}" "" "${TPS[pgq_holdlive_dead]}" "-" ""
	figure "  (PgQ back to back: schema pgq vs its event tables)" \
		"${TPS[pgq_holdlive_size]}" "" "${TPS[pgq_holdlive_size]}" "-" ""
	fi
	fi
	if outbox_part live; then
	figure "  (outbox latency from put to take, relay on NOTIFY: p50 ms)" \
		"${TPS[outbox_latency_p50]}" "" "" "-" ""
	figure "  (outbox latency from put to take, relay on NOTIFY: p99 ms)" \
		"${TPS[outbox_latency_p99]}" "" "" "-" ""
	figure "outbox tables after $OUTBOX_CYCLES retention cycles vs after 1, put + drain" \
		"${OUTBOX_SIZES[$OUTBOX_CYCLES]}" "${OUTBOX_SIZES[1]}" "${TPS[outbox_live_growth]}" "<=" 1.2
	fi
	if outbox_part paced; then
	# the ratio column holds dedup's p50 itself, in ms: the target is 2 ms
	figure "outbox paced ($PACED_RATE/s), commit to relay's receipt: p50 ms vs graphile-worker" \
		"${TPS[paced_dedup_p50]}" "${TPS[paced_graphile_p50]}" "${TPS[paced_dedup_p50]}" "<=" 2
	figure_vs "outbox paced ($PACED_RATE/s), commit to relay's receipt: p99 ms vs graphile-worker" \
		"${TPS[paced_dedup_p99]}" "${TPS[paced_graphile_p99]}" "<=" 1.0
	fi
}
