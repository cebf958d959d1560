# bench/stages/redis.sh: the redis stage of scripts/bench, part of every
# full run (not of an --only run).
#
# Redis SET NX EX, then the business transaction: per message a client does
# both in turn, so the pair's rate is 1 / (1/redis + 1/business), each
# measured alone at the same concurrency (which flatters the pair: here they
# do not share the machine).
#
# Sourced by scripts/bench (the driver) at the top level, with bench/lib.sh's
# helpers and the driver's settings; defines redis_figures, which the driver
# calls for the stage's lines of figures.txt.
#
# Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.

say "== Redis SET NX EX"
redis_rate=
if command -v redis-server >/dev/null && command -v redis-benchmark >/dev/null; then
	redis-server --port 0 --unixsocket "$dir/redis.sock" --unixsocketperm 777 --save '' \
		--appendonly no --daemonize no >"$OUT/log/redis.txt" 2>&1 &
	redis_pid=$!
	sleep 0.5
	redis-benchmark -s "$dir/redis.sock" -q -c "$CLIENTS" -n $((DURATION * 20000)) -r 1000000000 \
		SET 'msg:__rand_int__' 1 NX EX 86400 >"$OUT/log/redis-benchmark.txt" 2>&1 || true
	redis_rate=$(tr '\r' '\n' <"$OUT/log/redis-benchmark.txt" |
		sed -n 's/.*: \([0-9.]*\) requests per second.*/\1/p' | tail -n 1)
	kill "$redis_pid" 2>/dev/null || true
	redis_pid=
fi
if [ -n "$redis_rate" ]; then
	TPS[redis_pair]=$(calc "1 / (1 / $redis_rate + 1 / ${TPS[business]})")
	echo "redis_set_nx_ex,$redis_rate,,,,,,," >>"$OUT/results.csv"
	echo "redis_pair,${TPS[redis_pair]},,,,,,," >>"$OUT/results.csv"
	say "  redis: $redis_rate SET NX EX/s; with the business transaction: ${TPS[redis_pair]} msg/s"
else
	say "  redis-server or redis-benchmark not available: the Redis comparison is skipped"
fi
redis_figures() {
	if [ -n "${TPS[redis_pair]:-}" ]; then
		figure_vs "dedup claim + business vs Redis SET NX EX + business" \
			"${TPS[dedup_claim_business]}" "${TPS[redis_pair]}" ">" 1
	fi
}
