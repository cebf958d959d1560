# bench/stages/sequences.sh: the sequences stage of scripts/bench.
#
# Sequence marks: an advance in the business transaction (its own
# statement, and inside the business INSERT) vs the business alone; a
# duplicate advance's WAL and dead tuples; storage of 1,000,000 messages
# over 100 streams (10,000 transactions of one message a stream) against
# 1,000,000 claims.
#
# Sourced by scripts/bench (the driver) at the top level, with bench/lib.sh's
# helpers and the driver's settings; defines sequences_figures, which the driver
# calls for the stage's lines of figures.txt.
#
# Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.

say "== sequence marks"
for rep in $(seq 1 "$REPS"); do
	for w in business business_select_true dedup_advance_business dedup_advance_business_1stmt; do
		fresh
		q -c "TRUNCATE dedup.streams" >/dev/null
		run "$w" "$w.sql"
	done
done
q -c "TRUNCATE dedup.streams" -c "SELECT count(*) FROM generate_series(0, 99) AS p,
        LATERAL dedup_advance('bench-seq', 'p-' || p, 1000000)" -c "VACUUM ANALYZE dedup.streams" >/dev/null
for rep in $(seq 1 "$REPS"); do
	run dedup_advance_dup dedup_advance_dup.sql
done
fresh
q -c "TRUNCATE dedup.streams" \
	-c "DO \$\$ BEGIN FOR b IN 0..9999 LOOP
	      PERFORM count(*) FROM generate_series(b * 100 + 1, (b + 1) * 100) AS g,
	              LATERAL dedup_advance('bench-fill', 'p-' || (g % 100), g);
	      COMMIT;
	    END LOOP; END \$\$" \
	-c "SELECT sum((SELECT count(*) FROM dedup_claim_batch('bench-fill',
	        ARRAY(SELECT 'm-' || g FROM generate_series(b * 100000 + 1, (b + 1) * 100000) g))))
	    FROM generate_series(0, 9) AS b" \
	-c "VACUUM ANALYZE dedup.streams" -c "VACUUM ANALYZE dedup.claims" >/dev/null
TPS[streams_rows]=$(q -c "SELECT count(*) FROM dedup.streams")
TPS[streams_bytes]=$(q -c "SELECT pg_total_relation_size('dedup.streams')")
TPS[claims_rows]=$(q -c "SELECT count(*) FROM dedup.claims")
TPS[claims_bytes]=$(q -c "SELECT pg_total_relation_size('dedup.claims')")
say "  1,000,000 messages over 100 streams: ${TPS[streams_rows]} rows, ${TPS[streams_bytes]} bytes; as claims: ${TPS[claims_rows]} rows, ${TPS[claims_bytes]} bytes"
sequences_figures() {
	local b=${TPS[business]}
	printf '%-62s %12s %12s %9s   %-8s %s\n' \
		"sequence advance + business insert: tps vs business alone" \
		"${TPS[dedup_advance_business]}" "$b" "$(calc "${TPS[dedup_advance_business]} / $b")" \
		">= 0.9" "$(awk "BEGIN { print (${TPS[dedup_advance_business]} / $b >= 0.9) ? \"met\" : \"NOT met\" }")"
	printf '%-62s %12s %12s %9s   %-8s %s\n' \
		"  (advance + business vs business + SELECT true, the floor)" \
		"${TPS[dedup_advance_business]}" "${TPS[business_select_true]}" \
		"$(calc "${TPS[dedup_advance_business]} / ${TPS[business_select_true]}")" "-" ""
	printf '%-62s %12s %12s %9s   %-8s %s\n' \
		"  (advance inside the business INSERT: tps vs business alone)" \
		"${TPS[dedup_advance_business_1stmt]}" "$b" "$(calc "${TPS[dedup_advance_business_1stmt]} / $b")" \
		">= 0.9" "$(awk "BEGIN { print (${TPS[dedup_advance_business_1stmt]} / $b >= 0.9) ? \"met\" : \"NOT met\" }")"
	printf '%-62s %12s %12s %9s   %-8s %s\n' \
		"  (WAL bytes per advance, records of dedup.streams)" \
		"${RELWALTX[dedup_advance_business]}" "-" "${RELWALTX[dedup_advance_business]}" \
		"<= 100" "$(awk "BEGIN { print (${RELWALTX[dedup_advance_business]} <= 100) ? \"met\" : \"NOT met\" }")"
	printf '%-62s %12s %12s %9s   %-8s %s\n' \
		"duplicate advance: WAL bytes of dedup.streams / dead tuples, per call" \
		"${RELWALTX[dedup_advance_dup]}" "${DEADTX[dedup_advance_dup]}" "-" \
		"0 / 0" "$(awk "BEGIN { print (${RELWALTX[dedup_advance_dup]} == 0 && ${DEADTX[dedup_advance_dup]} == 0) ? \"met\" : \"NOT met\" }")"
	printf '%-62s %12s %12s %9s   %-8s %s\n' \
		"  (duplicate advance: all WAL bytes per call, background included)" \
		"${WALTX[dedup_advance_dup]}" "-" "-" "-" ""
	printf '%-62s %12s %12s %9s   %-8s %s\n' \
		"rows for 1,000,000 messages over 100 streams (claims' in baseline)" \
		"${TPS[streams_rows]}" "${TPS[claims_rows]}" "$(calc "${TPS[streams_rows]} / ${TPS[claims_rows]}")" \
		"-" "(bytes: ${TPS[streams_bytes]} vs ${TPS[claims_bytes]})"
}
