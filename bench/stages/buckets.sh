# bench/stages/buckets.sh: the buckets stage of scripts/bench.
#
# Time buckets of dedup.claims: what each bucket a new claim reads costs (the
# same 1,000,000 live keys in 1, 2, 4 and 8 buckets), the cleanup by whole
# buckets against row deletes (claims under load, WAL per expired key), and
# the size across ttl cycles with the buckets' interval at its default,
# which follows the ttl (a quarter of it).
#
# Sourced by scripts/bench (the driver) at the top level, with bench/lib.sh's
# helpers and the driver's settings; defines buckets_figures, which the driver
# calls for the stage's lines of figures.txt.
#
# Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.

say "== time buckets"
fill_buckets() {	# N: 1,000,000 live keys spread over N buckets, the last current
	local n=$1 i
	fresh
	q -c "CALL dedup_cleanup()" >/dev/null
	for i in $(seq 1 "$n"); do
		q -c "INSERT INTO $(q -c "SELECT relid FROM dedup.buckets WHERE state = 'c' UNION ALL SELECT 'dedup.claims'::regclass LIMIT 1")
		      SELECT dedup_fingerprint('fill-$i-' || g), now() + interval '1 day'
		      FROM generate_series(1, 1000000 / $n) g"
		[ "$i" = "$n" ] || switch_bucket
	done
	q -c "VACUUM ANALYZE" -c "CHECKPOINT"
}
for rep in $(seq 1 "$REPS"); do
	for nb in 1 2 4 8; do
		fill_buckets "$nb"
		run "buckets_$nb" dedup_claim_business.sql
	done
done
# The filters' false positives: 1,000,000 new keys claimed against a sealed
# bucket of 500,000 keys; each index scan of that bucket is one
fill_buckets 2
sealed_index=$(q -c "SELECT relid::text || '_pkey' FROM dedup.buckets WHERE state = 's'")
{
	echo "BEGIN;"
	for i in $(seq 1 10); do
		echo "SELECT count(*) FROM dedup_claim_batch('fpr', ARRAY(SELECT 'absent-$i-' || g FROM generate_series(1, 100000) g));"
	done
	echo "SELECT pg_stat_get_xact_numscans('$sealed_index'::regclass);"
	echo "ROLLBACK;"
} >"$OUT/log/filter-fpr.sql"
chmod 644 "$OUT/log/filter-fpr.sql"
TPS[filter_fpr]=$(calc "$(q -f "$OUT/log/filter-fpr.sql" | tail -n 1) / 1000000")
say "  filter of a sealed bucket of 500,000 keys: false-positive rate ${TPS[filter_fpr]} over 1,000,000 new keys"
# WAL of the cleanup per expired key: 1,000,000 expired rows deleted row by
# row (in the current bucket), then the same rows in a bucket dropped whole
cleanup_wal() {	# MODE
	fresh
	if [ "$1" = rows ]; then
		q -c "INSERT INTO dedup.claims SELECT dedup_fingerprint('old-' || i), now() - interval '1 hour'
		      FROM generate_series(1, 1000000) i" >/dev/null
	else
		# in a bucket closed before they expire
		expired_bucket 1000000
		wait_bucket_expired
	fi
	q -c "VACUUM ANALYZE" -c "CHECKPOINT" >/dev/null
	local l0 l1
	l0=$(q -c "SELECT pg_current_wal_lsn()")
	q -c "CALL dedup_cleanup()" >/dev/null
	l1=$(q -c "SELECT pg_current_wal_lsn()")
	calc "$(q -c "SELECT pg_wal_lsn_diff('$l1', '$l0')") / 1000000"
}
TPS[cleanup_wal_rows]=$(cleanup_wal rows)
TPS[cleanup_wal_buckets]=$(cleanup_wal buckets)
say "  cleanup WAL per expired key: ${TPS[cleanup_wal_rows]} B row by row, ${TPS[cleanup_wal_buckets]} B by a bucket dropped whole"
cleanup_run dedup_cleanup_rows dedup_claim_business.sql "CALL dedup_cleanup()" dedup.claims
# The pass that drops a bucket lasts a fifth of a second, mostly its pauses
# between batches; the claims' rate varies by more than its cost from one
# fifth to the next while autovacuum analyzes the fresh tables: REPS drops
# with autovacuum off, the median of their ratios
q -c "ALTER SYSTEM SET autovacuum = off" -c "SELECT pg_reload_conf()" >/dev/null
drop_ratios=
drop_rows=
for rep in $(seq 1 "$REPS"); do
	cleanup_run "dedup_cleanup_buckets_$rep" dedup_claim_business.sql buckets dedup.claims
	drop_ratios="$drop_ratios $(calc "${TPS[dedup_cleanup_buckets_$rep-during]} / ${TPS[dedup_cleanup_buckets_$rep-without]}")"
	drop_rows="$drop_rows ${TPS[dedup_cleanup_buckets_$rep-rows]}"
done
q -c "ALTER SYSTEM RESET autovacuum" -c "SELECT pg_reload_conf()" >/dev/null
TPS[dedup_cleanup_buckets-ratio]=$(echo "$drop_ratios" | median)
TPS[dedup_cleanup_buckets-rows]=$(echo "$drop_rows" | median)
say "  claims while a bucket goes vs without, each drop:$drop_ratios"
# the buckets' interval left at its default, which follows the ttl in use
# (a quarter of it: 3 s for SOAK_TTL's 12 s), as a user who never set it has
soak_run dedup_soak_buckets dedup_soak.sql worker dedup.claims
buckets_figures() {
	local nb
	for nb in 2 4 8; do
		figure_vs "new key + business, 1M keys in $nb buckets: tps vs in 1" \
			"${TPS[buckets_$nb]}" "${TPS[buckets_1]}" "-" ""
	done
	figure "  (a sealed bucket's filter: false positives per new key, 24 bits a key)" \
		"${TPS[filter_fpr]}" "" "" "-" ""
	figure "  (per extra bucket read: microseconds added per transaction, 8 vs 1)" \
		"$(calc "(1000000 / ${TPS[buckets_8]} - 1000000 / ${TPS[buckets_1]}) * $CLIENTS / 7")" "" "" "-" ""
	figure "cleanup WAL bytes per expired key: bucket dropped (row deletes in baseline)" \
		"${TPS[cleanup_wal_buckets]}" "${TPS[cleanup_wal_rows]}" "${TPS[cleanup_wal_buckets]}" "<=" 1
	figure "claim tps while a bucket of 1M expired rows goes vs without (rows in baseline)" \
		"${TPS[dedup_cleanup_buckets-ratio]}" \
		"$(calc "${TPS[dedup_cleanup_rows-during]} / ${TPS[dedup_cleanup_rows-without]}")" \
		"${TPS[dedup_cleanup_buckets-ratio]}" ">=" 0.95
	figure_vs "  (cleanup by buckets: rows/s, row deletes in baseline)" \
		"${TPS[dedup_cleanup_buckets-rows]}" "${TPS[dedup_cleanup_rows-rows]}" "-" ""
	figure "size after $SOAK_CYCLES ttl cycles vs after 1, interval at its default" \
		"${TPS[dedup_soak_buckets-growth]}" "" "${TPS[dedup_soak_buckets-growth]}" "<=" 1.1
}
