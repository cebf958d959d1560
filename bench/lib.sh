# bench/lib.sh: what the stages of scripts/bench share — messages, the
# cleanup worker's switch, arithmetic, a figure's line (figure; figure_vs,
# whose ratio is dedup's over the baseline's), the measured pgbench
# run with its WAL, dead tuples and the server's CPU (run, server_cpu, which
# the Citus stage reads for each node), emptying the tables between runs
# (fresh), switching the time bucket, the cleanup under load (cleanup_run)
# and the soak over ttl cycles (soak_run), the Node programs' packages
# (node_packages, npm_ci), and the charts of a full run.
# Sourced by the driver at the top level once the server is up: it uses the
# driver's settings (OUT, W, dir, port, DURATION, CLIENTS, ...) and keeps
# the figures of every run in the arrays it declares (TPS and the like).
#
# Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.

say() { printf '%s  %s\n' "$(date +%T)" "$*"; }
# worker on|off [INTERVAL]: the cleanup worker, switched by reload as a DBA would
worker() {
	q -c "ALTER SYSTEM SET dedup.cleanup_enabled = $1" \
		-c "ALTER SYSTEM SET dedup.cleanup_interval = '${2:-1h}'" -c "SELECT pg_reload_conf()" >/dev/null
}
calc() { awk "BEGIN { printf \"%.6g\", $* }"; }
figure() {	# NAME DEDUP BASELINE RATIO TARGET_OP TARGET
	local met
	if [ "$5" = "-" ]; then
		met="(no target)"
	else
		met=$(awk "BEGIN { print ($4 $5 $6) ? \"met\" : \"NOT met\" }")
	fi
	echo "\"$1\",$2,$3,$4,$5 $6,$met" >>"$OUT/figures.csv"
	printf '%-62s %12s %12s %9s   %-8s %s\n' "$1" "$2" "$3" "$4" "$5 $6" "$met"
}
# figure_vs NAME DEDUP BASELINE TARGET_OP TARGET: a figure whose ratio is DEDUP / BASELINE
figure_vs() { figure "$1" "$2" "$3" "$(calc "$2 / $3")" "$4" "$5"; }
declare -A TPS WALTX DEADTX RELWALTX CPUTX RUNS_TPS RUNS_WAL RUNS_DEAD RUNS_RELWAL RUNS_CPU
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

# Monotonic count of dead tuples created: updates plus deletes.
dead_tuples() {
	q -c "SELECT pg_stat_clear_snapshot(); SELECT coalesce(sum(n_tup_upd + n_tup_del), 0)
	      FROM pg_stat_user_tables
	      WHERE relid IN ('dedup.claims'::regclass, 'dedup.streams'::regclass,
	                      'seed_idem'::regclass, 'seed_stripe'::regclass,
	                      'orders'::regclass)" | tail -n 1
}
# CPU seconds a server's processes used: the postmaster's own and its ended
# children's (reaped: its cutime, cstime), and its live children's
server_cpu() {	# DIR
	local pm
	pm=$(head -n 1 "$1/data/postmaster.pid")
	{ cat /proc/[0-9]*/stat 2>/dev/null || true; } |	# processes may end meanwhile
		awk -v pm="$pm" '$1 == pm {t += $14 + $15 + $16 + $17} $4 == pm {t += $14 + $15}
		                 END {printf "%.2f", t / 100}'
}
relation_bytes() {
	q -c "SELECT pg_total_relation_size('dedup.claims') + pg_total_relation_size('seed_idem')
	           + pg_total_relation_size('seed_stripe') + pg_total_relation_size('orders')"
}

# WAL bytes (record and full-page image bytes, as pg_waldump counts them)
# of the records that touch the given relations, between two LSNs.
rel_wal() {	# LSN0 LSN1 RELATION...
	local l0=$1 l1=$2 total=0 rel spec bytes
	shift 2
	for rel in "$@"; do
		spec=$(q -c "SELECT (CASE WHEN reltablespace = 0 THEN (SELECT oid FROM pg_tablespace WHERE spcname = 'pg_default')
		                          ELSE reltablespace END)
		                    || '/' || (SELECT oid FROM pg_database WHERE datname = current_database())
		                    || '/' || pg_relation_filenode(oid)
		             FROM pg_class WHERE oid = '$rel'::regclass")
		bytes=$(as_server "$PG_BINDIR/pg_waldump" -p "$dir/data/pg_wal" -s "$l0" -e "$l1" \
			--relation="$spec" --stats 2>/dev/null | awk '/^Total/ {print $7}')
		total=$((total + ${bytes:-0}))
	done
	echo "$total"
}

# run NAME SCRIPT [pgbench options...]: one measured pgbench run
run() {
	local name=$1 script=$2
	shift 2
	q -c "CHECKPOINT"
	local lsn0 dead0 lsn1 dead1 cpu0 cpu1
	lsn0=$(q -c "SELECT pg_current_wal_lsn()")
	dead0=$(dead_tuples)
	say "run $name (${DURATION}s, $CLIENTS clients)"
	cpu0=$(server_cpu "$dir")
	"$PG_BINDIR/pgbench" -n -M prepared -c "$CLIENTS" -j "$CLIENTS" -T "$DURATION" \
		-D dupkeys="$DUP_KEYS" -f "$W/$script" -l --log-prefix="$OUT/log/$name" "$@" \
		>"$OUT/log/$name.txt" 2>&1 || { cat "$OUT/log/$name.txt"; exit 1; }
	sleep 1.2	# let the backends' statistics reach the shared counters
	cpu1=$(server_cpu "$dir")
	lsn1=$(q -c "SELECT pg_current_wal_flush_lsn()")
	dead1=$(dead_tuples)
	local tps n lat p99 wal cputx
	tps=$(sed -n 's/^tps = \([0-9.]*\) .*/\1/p' "$OUT/log/$name.txt" | tail -n 1)
	n=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$OUT/log/$name.txt")
	lat=$(sed -n 's/^latency average = \([0-9.]*\) ms/\1/p' "$OUT/log/$name.txt")
	p99=$(cat "$OUT/log/$name".* 2>/dev/null | awk '{print $3}' | sort -n |
		awk '{a[NR]=$1} END {i=int(NR*0.99); if (i<1) i=1; printf "%.3f", a[i]/1000}')
	wal=$(q -c "SELECT pg_wal_lsn_diff('$lsn1', '$lsn0')")
	local waltx deadtx relwal
	waltx=$(calc "$wal / $n")
	case $name in
		dedup_outbox_*) relwal=$(rel_wal "$lsn0" "$lsn1" dedup.outbox dedup.outbox_pkey \
			dedup.outbox_topic_seq dedup.outbox_keys dedup.outbox_keys_pkey) ;;
		seed_outbox_idem_*) relwal=$(rel_wal "$lsn0" "$lsn1" seed_outbox_idem seed_outbox_idem_pkey \
			seed_outbox_idem_event_key_key seed_outbox_idem_unpublished) ;;
		seed_outbox_*) relwal=$(rel_wal "$lsn0" "$lsn1" seed_outbox seed_outbox_pkey seed_outbox_unpublished) ;;
		dedup_advance_*) relwal=$(rel_wal "$lsn0" "$lsn1" dedup.streams dedup.streams_pkey) ;;
		dedup_*) relwal=$(rel_wal "$lsn0" "$lsn1" dedup.claims dedup.claims_pkey) ;;
		seed_*|pk_lookup) relwal=$(rel_wal "$lsn0" "$lsn1" seed_idem seed_idem_pkey seed_idem_expires_at \
			seed_stripe seed_stripe_pkey seed_stripe_expires_at) ;;
		*) relwal=0 ;;
	esac
	RUNS_RELWAL[$name]="${RUNS_RELWAL[$name]:-} $(calc "$relwal / $n")"
	RELWALTX[$name]=$(echo "${RUNS_RELWAL[$name]}" | median)
	deadtx=$(calc "($dead1 - $dead0) / $n")
	# microseconds of the server's CPU a transaction: less noisy than tps
	# on a shared machine, where a run's rate moves by 15 % and more
	cputx=$(calc "($cpu1 - $cpu0) * 1000000 / $n")
	RUNS_CPU[$name]="${RUNS_CPU[$name]:-} $cputx"
	CPUTX[$name]=$(echo "${RUNS_CPU[$name]}" | median)
	RUNS_TPS[$name]="${RUNS_TPS[$name]:-} $tps"
	RUNS_WAL[$name]="${RUNS_WAL[$name]:-} $waltx"
	RUNS_DEAD[$name]="${RUNS_DEAD[$name]:-} $deadtx"
	TPS[$name]=$(echo "${RUNS_TPS[$name]}" | median)
	WALTX[$name]=$(echo "${RUNS_WAL[$name]}" | median)
	DEADTX[$name]=$(echo "${RUNS_DEAD[$name]}" | median)
	echo "$name,$tps,$lat,$p99,$waltx,$(calc "$relwal / $n"),$deadtx,$n,$(relation_bytes)" >>"$OUT/results.csv"
	say "  $name: $tps tps, latency avg $lat ms p99 $p99 ms, $waltx WAL bytes/tx ($(calc "$relwal / $n") on the claim tables), $deadtx dead tuples/tx, $cputx us of the server's CPU/tx"
	rm -f "$OUT/log/$name".[0-9]*
}

fresh() {	# empty every table between workloads; dedup.claims back to one bucket
	q -c "DO \$\$ DECLARE b record; BEGIN
	        FOR b IN SELECT relid FROM dedup.buckets WHERE bucket > 0 LOOP
	          EXECUTE format('DROP TABLE %s', b.relid);
	        END LOOP;
	        DELETE FROM dedup.buckets; END \$\$" \
	  -c "TRUNCATE orders, seed_idem, seed_stripe, dedup.claims, seed_outbox, seed_outbox_idem, dedup.outbox,
	            dedup.outbox_keys, dedup.outbox_dead, dedup.outbox_topics, dedup.outbox_batches, dedup.outbox_held,
	            dedup.outbox_retry, dedup.history_generations, dedup.history_blocks" -c "VACUUM ANALYZE"
}
# switch dedup.claims to a new time bucket now (as dedup.bucket_interval would)
switch_bucket() {
	q -c "UPDATE dedup.buckets SET opened_at = opened_at - interval '1000 days' WHERE state = 'c'" \
	  -c "CALL dedup_cleanup()" >/dev/null
}
# N rows that expire in a few seconds, in a bucket closed (and sealed)
# before they do: the cleanup then drops it whole.  fresh leaves no bucket
# listed, and the first pass only lists bucket 0: that pass comes first, or
# the switch would be none, and the rows, expired, deleted one by one.
expired_bucket() {	# N
	q -c "CALL dedup_cleanup()" >/dev/null
	q -c "INSERT INTO dedup.claims SELECT dedup_fingerprint('old-' || i), statement_timestamp() + interval '10 s'
	      FROM generate_series(1, $1) i" >/dev/null
	switch_bucket
	if [ "$(q -c "SELECT coalesce(sum(claims), 0) FROM dedup.buckets WHERE state = 's' AND max_expires_at > now()")" != "$1" ]; then
		echo "bench: the $1 rows are not in a sealed bucket before they expire" >&2
		q -c "SELECT * FROM dedup.buckets" >&2
		exit 1
	fi
}
# wait until the rows of the sealed buckets have expired (one query: a
# client polling would take CPU from the claims measured meanwhile)
wait_bucket_expired() {
	sleep "$(q -c "SELECT greatest(extract(epoch FROM max(max_expires_at) - clock_timestamp()), 0) + 0.05
	               FROM dedup.buckets WHERE state = 's'")"
}
# table + indexes of a relation and of the tables that inherit from it
tree_bytes() {
	q -c "SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class c
	      WHERE c.oid = '$1'::regclass OR c.oid IN (SELECT inhrelid FROM pg_inherits WHERE inhparent = '$1'::regclass)"
}

# The cleanup and soak runs (the buckets stage and the main stages use them).
cleanup_run() {	# NAME CLAIM_SCRIPT CLEANUP_SQL
	local name=$1 script=$2 sql=$3 t_load t0 t1 pid
	fresh
	if [ "$sql" = buckets ]; then
		# the rows expire in a bucket closed before the load
		expired_bucket "$CLEANUP_ROWS"
		q -c "VACUUM ANALYZE" -c "CHECKPOINT"
	else
	q -c "INSERT INTO seed_idem SELECT 'old-' || i, now() - interval '1 hour' FROM generate_series(1, $CLEANUP_ROWS) i" \
		-c "INSERT INTO dedup.claims SELECT dedup_fingerprint('old-' || i), now() - interval '1 hour' FROM generate_series(1, $CLEANUP_ROWS) i" \
		-c "VACUUM ANALYZE" -c "CHECKPOINT"
	fi
	t_load=$(q -c "SELECT extract(epoch FROM clock_timestamp())")
	"$PG_BINDIR/pgbench" -n -M prepared -c "$CLIENTS" -j "$CLIENTS" -T 600 -f "$W/$script" \
		>"$OUT/log/$name-load.txt" 2>&1 &
	pid=$!
	sleep 4
	say "  $name: cleanup of $CLEANUP_ROWS expired rows under load"
	t0=$(q -c "SELECT extract(epoch FROM clock_timestamp())")
	if [[ $sql == worker:* ]]; then
		q -c "ALTER SYSTEM SET dedup.cleanup_pause = '${sql#worker:}'" >/dev/null
		# a pass starts at once; once it runs, a long interval keeps a second one away
		worker on 1s
		until [ "$(q -c "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'dedup cleanup worker'")" = 1 ]; do
			sleep 0.05
		done
		worker on 1h
		until [ "$(q -c "SELECT count(*) FROM dedup_cleanup_stats() WHERE kind = 'claim'
		                 AND last_pass_started_at >= to_timestamp($t0) AND rows_deleted_last_pass > 0")" = 1 ]; do
			sleep 0.2
		done
		worker off
		q -c "ALTER SYSTEM RESET dedup.cleanup_pause" -c "SELECT pg_reload_conf()" >/dev/null
		read -r t0 t1 < <(q -F ' ' -c "SELECT extract(epoch FROM last_pass_started_at),
		                         extract(epoch FROM last_pass_started_at + last_pass_duration)
		                  FROM dedup_cleanup_stats() WHERE kind = 'claim'")
	else
		# the pass, timed in its own session: the window holds no client's
		# start (a psql and its backend cost as much CPU as a bucket's drop)
		local pass_sql=$sql
		if [ "$sql" = buckets ]; then
			# the pass retires and drops the bucket of the expired rows
			wait_bucket_expired
			pass_sql="CALL dedup_cleanup()"
		fi
		read -r t0 t1 < <(q -c "SELECT extract(epoch FROM clock_timestamp())" -c "$pass_sql" \
			-c "SELECT extract(epoch FROM clock_timestamp())" | sed -n '1h;$H;${x;s/\n/ /;p}')
		if [ "$sql" = buckets ] && [ "$(q -c "SELECT count(*) FROM dedup.buckets WHERE state IN ('s', 'r')")" != 0 ]; then
			echo "bench: the pass did not drop the bucket" >&2
			exit 1
		fi
	fi
	sleep 3
	kill "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
	local left tps_without tps_during rows_per_s
	left=$(q -c "SELECT count(*) FROM ${4:-seed_idem} WHERE expires_at < now() - interval '1 second'")
	# without: the 2 seconds before the pass (the rate drifts up over the
	# first seconds of the load, as the fresh tables are analyzed)
	tps_without=$(q -c "SELECT count(*) / 2.0 FROM orders
	                    WHERE created_at >= to_timestamp($t0 - 2) AND created_at < to_timestamp($t0)")
	tps_during=$(q -c "SELECT count(*) / ($t1 - $t0) FROM orders
	                   WHERE created_at >= to_timestamp($t0) AND created_at < to_timestamp($t1)")
	rows_per_s=$(calc "$CLEANUP_ROWS / ($t1 - $t0)")
	q -c "COPY (SELECT round(extract(epoch FROM date_trunc('second', created_at)
	                 + floor(extract(milliseconds FROM created_at)::numeric % 1000 / 250) * interval '250 ms')
	                 - $t_load, 2), count(*) * 4
	            FROM orders GROUP BY 1 ORDER BY 1) TO STDOUT" >"$OUT/$name-throughput.dat"
	echo "$(calc "$t0 - $t_load") $(calc "$t1 - $t_load")" >"$OUT/$name-window.dat"
	TPS[$name-rows]=$rows_per_s
	TPS[$name-without]=$tps_without
	TPS[$name-during]=$tps_during
	echo "$name-cleanup,$rows_per_s,,,,,,$CLEANUP_ROWS,$(relation_bytes)" >>"$OUT/results.csv"
	echo "$name-claims-without-cleanup,$tps_without,,,,,,," >>"$OUT/results.csv"
	echo "$name-claims-during-cleanup,$tps_during,,,,,,," >>"$OUT/results.csv"
	say "  $name: $(calc "$t1 - $t0") s, $rows_per_s rows/s; claims $tps_without tps without, $tps_during tps during; expired rows left: $left"
}
# The seed's cleanup: batched DELETE ... WHERE key IN (SELECT ... LIMIT 10000),
# each batch its own transaction, until a batch deletes nothing.
SEED_CLEANUP="DO \$\$ DECLARE n bigint; BEGIN LOOP
	   DELETE FROM seed_idem WHERE key IN (SELECT key FROM seed_idem WHERE expires_at < now() LIMIT 10000);
	   GET DIAGNOSTICS n = ROW_COUNT; COMMIT; EXIT WHEN n = 0; END LOOP; END \$\$"
SOAK_INTERVAL=$(( SOAK_TTL / 5 > 0 ? SOAK_TTL / 5 : 1 ))
soak_run() {	# NAME SCRIPT CLEANUP_SQL RELATION
	local name=$1 script=$2 sql=$3 rel=$4 pid cpid
	fresh
	q -c "CHECKPOINT"
	say "  $name: $SOAK_CYCLES cycles of ${SOAK_TTL}s at $SOAK_RATE tps"
	"$PG_BINDIR/pgbench" -n -M prepared -c "$CLIENTS" -j "$CLIENTS" -R "$SOAK_RATE" \
		-T $((SOAK_TTL * SOAK_CYCLES + 1)) -D ttl="$SOAK_TTL" -f "$W/$script" \
		>"$OUT/log/$name-load.txt" 2>&1 &
	pid=$!
	if [ "$sql" = worker ]; then
		worker on "${SOAK_INTERVAL}s"
		(while kill -0 "$pid" 2>/dev/null; do
			sleep 1
			q -F ' ' -c "SELECT extract(epoch FROM clock_timestamp()),
			                    extract(epoch FROM (SELECT cleanup_lag FROM dedup_cleanup_stats() WHERE kind = 'claim')),
			                    coalesce(extract(epoch FROM clock_timestamp() - min(expires_at)), 0)
			             FROM $rel WHERE expires_at < clock_timestamp()" >>"$OUT/$name-lag.dat" 2>/dev/null || true
		done) &
	else
		(while kill -0 "$pid" 2>/dev/null; do
			sleep "$SOAK_INTERVAL"
			q -c "$sql" >/dev/null 2>&1 || true
		done) &
	fi
	cpid=$!
	: >"$OUT/$name.dat"
	for c in $(seq 1 "$SOAK_CYCLES"); do
		sleep "$SOAK_TTL"
		q -c "SELECT $c, $(tree_bytes "$rel"), pg_relation_size('$rel'), count(*)
		      FROM $rel" | tr '|' ' ' >>"$OUT/$name.dat"
		say "    cycle $c: $(tail -n 1 "$OUT/$name.dat")"
	done
	wait "$pid" 2>/dev/null || true
	kill "$cpid" 2>/dev/null || true
	wait "$cpid" 2>/dev/null || true
	if [ "$sql" = worker ]; then
		worker off
		# steady state: after the first ttl cycle
		TPS[$name-lag]=$(awk -v ttl="$SOAK_TTL" 'NR == 1 {t = $1 + ttl} $1 >= t && $2 > m {m = $2}
		                      END {print m + 0}' "$OUT/$name-lag.dat")
		TPS[$name-truelag]=$(awk -v ttl="$SOAK_TTL" 'NR == 1 {t = $1 + ttl} $1 >= t && $3 > m {m = $3}
		                          END {print m + 0}' "$OUT/$name-lag.dat")
		echo "$name-max-cleanup-lag-s,${TPS[$name-lag]},,,,,,," >>"$OUT/results.csv"
		echo "$name-max-true-lag-s,${TPS[$name-truelag]},,,,,,," >>"$OUT/results.csv"
		say "    cleanup lag, steady state: at most ${TPS[$name-lag]} s (figure), ${TPS[$name-truelag]} s (oldest expired row, by scan); interval ${SOAK_INTERVAL} s"
	fi
	local first last
	first=$(awk 'NR==1 {print $2}' "$OUT/$name.dat")
	last=$(awk 'END {print $2}' "$OUT/$name.dat")
	TPS[$name-growth]=$(calc "$last / $first")
	echo "$name-size-growth,${TPS[$name-growth]},,,,,,,$last" >>"$OUT/results.csv"
}

# node_packages: Node and npm, installed when missing (unless
# DEDUP_BENCH_NO_PACKAGES is set: a stage then skips, or fails, without them)
node_packages() {
	if [ -z "${DEDUP_BENCH_NO_PACKAGES:-}" ]; then
		command -v node >/dev/null || ensure_packages nodejs
		command -v npm >/dev/null || ensure_packages npm
	fi
}

# npm_ci NAME WHAT STAGE: the packages of bench/NAME's package.json and
# package-lock.json (WHAT names them in messages), installed with npm ci once
# into a directory of the cache (DEDUP_BENCH_CACHE) named by NAME and the two
# files' hash, which NPM_MODS is set to; its log is $OUT/log/NAME-npm.txt.  A
# failed npm ci shows the log and ends the run, STAGE saying whose it was.
npm_ci() {
	local name=$1 what=$2 stage=$3 src=$DEDUP_ROOT/bench/$1
	NPM_MODS=${DEDUP_BENCH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/dedup-bench}/$name-$(cat "$src/package.json" \
		"$src/package-lock.json" | sha256sum | cut -c1-16)
	if [ ! -f "$NPM_MODS/installed" ]; then
		say "  npm ci of bench/$name's $what into $NPM_MODS"
		rm -rf "$NPM_MODS"
		mkdir -p "$NPM_MODS"
		cp "$src/package.json" "$src/package-lock.json" "$NPM_MODS/"
		(cd "$NPM_MODS" && npm ci --no-audit --no-fund --loglevel=error) >"$OUT/log/$name-npm.txt" 2>&1 ||
			{ cat "$OUT/log/$name-npm.txt"; echo "$stage: npm ci of bench/$name's $what failed" >&2; exit 1; }
		touch "$NPM_MODS/installed"
	fi
}

# The charts of a full run: cleanup.png, soak.png.
charts() {
	if command -v gnuplot >/dev/null; then
		read -r s0 s1 <"$OUT/seed_cleanup-window.dat"
		read -r d0 d1 <"$OUT/dedup_worker-window.dat"
		gnuplot <<EOF
set terminal png size 1100,500 noenhanced
set output '$OUT/cleanup.png'
set multiplot layout 1,2 title 'Claim + business throughput while $CLEANUP_ROWS expired rows are cleaned up ($CLIENTS clients)'
set xlabel 'seconds'
set ylabel 'transactions/s'
set yrange [0:*]
set style rect fc rgb '#ffdddd' fs solid 0.5 noborder
set object 1 rect from $s0, graph 0 to $s1, graph 1 behind
set title 'seed: batched DELETE (shaded: cleanup running)'
plot '$OUT/seed_cleanup-throughput.dat' using 1:2 with lines lw 2 title 'seed claims'
unset object 1
set object 2 rect from $d0, graph 0 to $d1, graph 1 behind
set title 'dedup: the cleanup worker (shaded: its pass)'
plot '$OUT/dedup_worker-throughput.dat' using 1:2 with lines lw 2 title 'dedup claims'
unset multiplot
unset object 2
set output '$OUT/soak.png'
set terminal png size 800,500 noenhanced
set title 'Total relation size across ttl cycles ($SOAK_RATE claims/s, ttl ${SOAK_TTL}s)'
set xlabel 'ttl cycle'
set ylabel 'MB (table + indexes)'
set xtics 1
plot '$OUT/seed_soak.dat' using 1:(\$2/1048576) with linespoints lw 2 title 'seed dedup table', \
     '$OUT/dedup_soak.dat' using 1:(\$2/1048576) with linespoints lw 2 title 'dedup.claims'
EOF
	else
		say "gnuplot not available: no charts"
	fi
}
