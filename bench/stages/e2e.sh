# bench/stages/e2e.sh: the e2e stage of scripts/bench, part of every full
# run, and run alone by --only e2e.
#
# End to end against Redis from one client program with both drivers
# (bench/e2e/e2e.js, node-postgres and node-redis, versions pinned by
# bench/e2e/package.json and its lock): 4 workers share a queue of 20,000
# messages, 20 % of them redeliveries, handled in turn with the claim written
# into the business INSERT, with Redis SET NX EX then the business INSERT,
# with the claim as a statement of its own in the business transaction, with
# the seed's INSERT ... ON CONFLICT DO NOTHING into its hand-written table
# there instead (the floor of a statement that writes the key) and with
# SELECT true there (the floor of any statement of its own); each mode on a
# fresh state (fresh, a checkpoint, FLUSHALL),
# interleaved, --reps times, medians.  The program asserts after each run
# that every distinct message id has its one business row, and fails the
# stage otherwise.  Unlike the redis stage's pair (two rates measured apart
# and combined), here the pair runs as a consumer runs it: one message's SET
# and INSERT in turn, Redis and PostgreSQL sharing the machine.  The program
# also reads the CPU time a message took in the client, the workers' backends
# and redis-server (/proc): on a shared machine the rates swing with the
# other work, the CPU a message costs much less.
#
# The drivers are installed with npm ci into a cache folder named by the
# lock's checksum (DEDUP_BENCH_CACHE, default ~/.cache/dedup-bench), once.
#
# Sourced by scripts/bench (the driver) at the top level, with bench/lib.sh's
# helpers and the driver's settings; defines e2e_figures, which the driver
# calls for the stage's lines of figures.txt.
#
# Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.

E2E_MESSAGES=20000
E2E_REDELIVERIES=0.2
E2E_WORKERS=4
say "== end to end: one Node client, $E2E_WORKERS workers, $E2E_MESSAGES messages ($E2E_REDELIVERIES redeliveries): claim in the INSERT vs Redis SET NX EX + INSERT"
node_packages
e2e_ok=
if command -v node >/dev/null && command -v npm >/dev/null && command -v redis-server >/dev/null; then
	e2e_src=$DEDUP_ROOT/bench/e2e
	npm_ci e2e drivers e2e
	e2e_mods=$NPM_MODS
	redis-server --port 0 --unixsocket "$dir/e2e-redis.sock" --unixsocketperm 777 --save '' \
		--appendonly no --daemonize no >"$OUT/log/e2e-redis.txt" 2>&1 &
	redis_pid=$!
	for _ in $(seq 1 50); do [ -S "$dir/e2e-redis.sock" ] && break; sleep 0.1; done
	# the program empties the tables before each run with the driver's fresh
	# (and a checkpoint, as run does), through bash: hence the exports
	export -f q fresh
	NODE_PATH=$e2e_mods/node_modules node "$e2e_src/e2e.js" \
		--messages "$E2E_MESSAGES" --redeliveries "$E2E_REDELIVERIES" --workers "$E2E_WORKERS" \
		--reps "$REPS" --redis "$dir/e2e-redis.sock" --csv "$OUT/results.csv" \
		--fresh 'fresh && q -c CHECKPOINT' 2>&1 | tee "$OUT/log/e2e.txt" | sed 's/^/  /' ||
		{ echo "e2e: the client program failed (see above)" >&2; exit 1; }
	kill "$redis_pid" 2>/dev/null || true
	wait "$redis_pid" 2>/dev/null || true
	redis_pid=
	# the medians: msgs/s, and the CPU a message took (µs: client, postgres,
	# redis, total)
	for m in dedup_in_insert redis_pair dedup_statement seed_statement select_true; do
		TPS[e2e_$m]=$(awk -v m="${m//_/-}" '$1 == "median" && $2 == m {print $3}' "$OUT/log/e2e.txt")
		TPS[e2e_$m-cpu]=$(awk -v m="${m//_/-}" '$1 == "median-cpu" && $2 == m {print $6}' "$OUT/log/e2e.txt")
		echo "e2e_$m-cpu-us-per-msg,${TPS[e2e_$m-cpu]},,,,,,," >>"$OUT/results.csv"
	done
	e2e_ok=1
else
	say "  node, npm or redis-server not available: the e2e stage is skipped"
	[ "$ONLY" = e2e ] && exit 1
fi
e2e_figures() {
	[ -n "$e2e_ok" ] || return 0
	figure_vs "e2e: dedup claim in the business INSERT vs Redis SET NX EX + business (msgs/s)" \
		"${TPS[e2e_dedup_in_insert]}" "${TPS[e2e_redis_pair]}" ">=" 1.2
	figure_vs "e2e: claim as its own statement + business vs SELECT true + business" \
		"${TPS[e2e_dedup_statement]}" "${TPS[e2e_select_true]}" ">=" 0.95
	figure_vs "  (e2e: claim statement vs the seed's INSERT ... ON CONFLICT DO NOTHING statement)" \
		"${TPS[e2e_dedup_statement]}" "${TPS[e2e_seed_statement]}" "-" ""
	figure_vs "  (e2e: the seed's statement vs SELECT true)" \
		"${TPS[e2e_seed_statement]}" "${TPS[e2e_select_true]}" "-" ""
	# what a message costs, whatever else the machine runs (ratio: baseline / dedup)
	[ "${TPS[e2e_dedup_in_insert-cpu]}" = NaN ] && return 0
	figure "  (CPU µs a message, all processes: the same two; baseline / dedup)" \
		"${TPS[e2e_dedup_in_insert-cpu]}" "${TPS[e2e_redis_pair-cpu]}" \
		"$(calc "${TPS[e2e_redis_pair-cpu]} / ${TPS[e2e_dedup_in_insert-cpu]}")" "-" ""
	figure "  (CPU µs a message, all processes: claim statement vs SELECT true)" \
		"${TPS[e2e_dedup_statement-cpu]}" "${TPS[e2e_select_true-cpu]}" \
		"$(calc "${TPS[e2e_select_true-cpu]} / ${TPS[e2e_dedup_statement-cpu]}")" "-" ""
	figure "  (CPU µs a message, all processes: claim statement vs the seed's statement)" \
		"${TPS[e2e_dedup_statement-cpu]}" "${TPS[e2e_seed_statement-cpu]}" \
		"$(calc "${TPS[e2e_seed_statement-cpu]} / ${TPS[e2e_dedup_statement-cpu]}")" "-" ""
}
