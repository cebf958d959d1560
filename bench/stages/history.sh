# bench/stages/history.sh: the history stage of scripts/bench.
#
# The history tier: a scope remembering its claims for HIST_WINDOW seconds
# after they expire, at a rate of 0.001.  Two slices, each of HIST_KEYS
# claims folded at once when their bucket retires (the second slice sized
# by what the first took), then: false positives over 1,000,000 keys never
# claimed, false negatives over every folded key, the bits a key stored,
# claim + business on the scope against one without a history, and the
# fold's keys/s against the cleanup's per-row deletes of expired claims.
#
# Sourced by scripts/bench (the driver) at the top level, with bench/lib.sh's
# helpers and the driver's settings; defines history_figures, which the driver
# calls for the stage's lines of figures.txt.
#
# Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.

HIST_KEYS=1000000
HIST_WINDOW=40
HIST_RATE=0.001
say "== history tier: $HIST_KEYS keys a slice, window ${HIST_WINDOW}s, rate $HIST_RATE"
fresh
q -c "SELECT dedup_set_scope('hist', ttl => '1 second', history => '$HIST_WINDOW seconds',
                             false_positive_rate => $HIST_RATE)" \
  -c "SELECT dedup_set_scope('nohist', ttl => '1 second')" -c "CALL dedup_cleanup()" >/dev/null
hist_claim() {	# SCOPE PREFIX: HIST_KEYS keys claimed, 10,000 a batch; prints how many were new
	q -c "SELECT count(*) FROM generate_series(0, $HIST_KEYS / 10000 - 1) b,
	      LATERAL dedup_claim_batch('$1', ARRAY(SELECT '$2-' || (b * 10000 + g) FROM generate_series(1, 10000) g))"
}
hist_seal() {	# the current bucket switched away from and sealed; its rows (ttl 1 s) expired
	q -c "UPDATE dedup.buckets SET opened_at = opened_at - interval '1000 days' WHERE state = 'c'" >/dev/null
	for step in 0 1 2; do
		q -c "SELECT deleted FROM dedup_cleanup_batch((3::bigint << 32) + $step)" >/dev/null
	done
	sleep 1.2
}
hist_fold() {	# the retire step, which folds the sealed bucket, timed; then its drop
	local t0 t1
	q -c "CHECKPOINT"
	t0=$(date +%s.%N)
	q -c "SELECT deleted FROM dedup_cleanup_batch((3::bigint << 32) + 3)" >/dev/null
	t1=$(date +%s.%N)
	q -c "SELECT deleted FROM dedup_cleanup_batch((3::bigint << 32) + 4)" >/dev/null
	calc "$t1 - $t0"
}
# slice 1
new1=$(hist_claim hist h1)
hist_seal
claims_bytes=$(q -c "SELECT pg_total_relation_size(relid) FROM dedup.buckets WHERE state = 's'")
fold1=$(hist_fold)
slice1_end=$(q -c "SELECT extract(epoch FROM max(slice_end)) FROM dedup.history_generations")
say "  slice 1: $new1 keys claimed and folded in ${fold1}s; the bucket held $claims_bytes bytes"
# the cleanup's per-row deletes of as many expired claims of a scope without a history
new0=$(hist_claim nohist d)
sleep 1.2
q -c "CHECKPOINT"
t0=$(date +%s.%N)
deleted=$(q -c "SET dedup.cleanup_pause = 0" -c "CALL dedup_cleanup()")
t1=$(date +%s.%N)
TPS[hist_delete_rate]=$(calc "$deleted / ($t1 - $t0)")
say "  the cleanup deleted $deleted of $new0 expired claims in $(calc "$t1 - $t0")s"
# slice 2, once slice 1 ended: sized by what slice 1 took
while [ "$(q -c "SELECT extract(epoch FROM clock_timestamp()) > $slice1_end")" != t ]; do sleep 1; done
new2=$(hist_claim hist h2)
hist_seal
fold2=$(hist_fold)
say "  slice 2: $new2 keys claimed (the others answered by slice 1: false positives) and folded in ${fold2}s"
q -c "SELECT generation, k, capacity, keys, bytes, round((bytes * 8.0 / keys)::numeric, 2) AS bits_per_key
      FROM dedup_history('hist') ORDER BY generation" | sed 's/^/  generation|k|capacity|keys|bytes|bits a key: /'
TPS[hist_fold_rate]=$(calc "($new1 + $new2) / ($fold1 + $fold2)")
TPS[hist_fp]=$(q -c "SELECT count(*) FILTER (WHERE dedup_seen('hist', 'absent-' || g) = 'history')
                     FROM generate_series(1, 1000000) g")
TPS[hist_fn]=$(q -c "SELECT count(*) FILTER (WHERE dedup_seen('hist', p || '-' || g) <> 'history')
                     FROM generate_series(1, $HIST_KEYS) g, (VALUES ('h1'), ('h2')) v(p)")
TPS[hist_bits]=$(q -c "SELECT (SELECT sum(octet_length(bits)) FROM dedup.history_blocks) * 8.0
                              / (SELECT sum(keys) FROM dedup.history_generations)")
TPS[hist_ideal_bits]=$(calc "-log($HIST_RATE) / (log(2) * log(2))")
TPS[hist_bytes_key]=$(q -c "SELECT (SELECT sum(pg_column_size(b.*)) FROM dedup.history_blocks b)::numeric
                                   / (SELECT sum(keys) FROM dedup.history_generations)")
TPS[hist_table_bytes_key]=$(q -c "SELECT pg_total_relation_size('dedup.history_blocks')::numeric
                                         / (SELECT sum(keys) FROM dedup.history_generations)")
TPS[hist_claim_bytes_key]=$(calc "$claims_bytes / $new1")
say "  false positives ${TPS[hist_fp]} of 1000000, false negatives ${TPS[hist_fn]} of $((2 * HIST_KEYS)), ${TPS[hist_bits]} bits a key stored"
# claim + business on the scope with the history (two generations, in shared
# memory) against one without, interleaved
for rep in $(seq 1 "$REPS"); do
	run dedup_claim_business_history dedup_claim_business_scope.sql -D scope=hist
	run dedup_claim_business_nohistory dedup_claim_business_scope.sql -D scope=nohist
done
history_figures() {
	figure "history: false positives over 1,000,000 absent keys vs the rate set" \
		"$(calc "${TPS[hist_fp]} / 1000000")" "$HIST_RATE" \
		"$(calc "${TPS[hist_fp]} / 1000000 / $HIST_RATE")" "<=" 1.25
	figure "history: false negatives over $((2 * HIST_KEYS)) folded keys" \
		"${TPS[hist_fn]}" 0 "${TPS[hist_fn]}" "<=" 0
	figure_vs "history: bits a key stored vs the ideal m/n for the rate" \
		"${TPS[hist_bits]}" "${TPS[hist_ideal_bits]}" "<=" 1.2
	figure_vs "new-key claim + business on a scope with a history vs without" \
		"${TPS[dedup_claim_business_history]}" "${TPS[dedup_claim_business_nohistory]}" ">=" 0.9
	figure_vs "history: fold keys/s vs the cleanup's per-row deletes of expired claims" \
		"${TPS[hist_fold_rate]}" "${TPS[hist_delete_rate]}" ">=" 1
	figure "  (100,000,000 keys, projected: history bytes (rows) vs claims bytes)" \
		"$(calc "${TPS[hist_bytes_key]} * 100000000")" "$(calc "${TPS[hist_claim_bytes_key]} * 100000000")" \
		"$(calc "${TPS[hist_bytes_key]} / ${TPS[hist_claim_bytes_key]}")" "-" ""
	figure "  (the same, with the table's pages: history table vs the claims' bucket)" \
		"$(calc "${TPS[hist_table_bytes_key]} * 100000000")" "$(calc "${TPS[hist_claim_bytes_key]} * 100000000")" \
		"$(calc "${TPS[hist_table_bytes_key]} / ${TPS[hist_claim_bytes_key]}")" "-" ""
}
