# bench/stages/claims.sh: the claims stage of scripts/bench, part of every
# full run (not of an --only run).
#
# The claim itself: a new key + business insert against the business alone
# and the seed's ON CONFLICT DO NOTHING (as its own statement and inside
# the business INSERT); a claim of an existing key (--dup-keys of them)
# against DO NOTHING + SELECT, DO UPDATE and a plain PK lookup; a batch of
# 100 keys a call against single calls; idempotency records (begin +
# complete, and the replay of a completed key) against Stripe-style SQL.
#
# Sourced by scripts/bench (the driver) at the top level, with bench/lib.sh's
# helpers and the driver's settings; defines claims_figures, which the driver
# calls for the stage's lines of figures.txt.
#
# Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.

say "== new key + business insert"
for rep in $(seq 1 "$REPS"); do
	for w in business seed_claim_business dedup_claim_business \
		seed_claim_business_1stmt dedup_claim_business_1stmt; do
		fresh
		run "$w" "$w.sql"
	done
done

say "== claim of an existing key (${DUP_KEYS} keys)"
fresh
q -c "INSERT INTO seed_idem SELECT 'dup-' || i, now() + interval '1 day' FROM generate_series(1, $DUP_KEYS) i" \
	-c "INSERT INTO seed_stripe (key, status, expires_at) SELECT 'dup-' || i, 'complete', now() + interval '1 day' FROM generate_series(1, $DUP_KEYS) i" \
	-c "SELECT count(*) FROM dedup_claim_batch('bench-dup', ARRAY(SELECT 'dup-' || i FROM generate_series(1, $DUP_KEYS) i))" \
	-c "VACUUM ANALYZE" >/dev/null
for rep in $(seq 1 "$REPS"); do
	for w in pk_lookup seed_dup_nothing seed_dup_update dedup_dup; do
		run "$w" "$w.sql"
	done
done

say "== batch claim: 100 keys a call vs one"
for rep in $(seq 1 "$REPS"); do
	for w in dedup_single dedup_batch; do
		fresh
		run "$w" "$w.sql"
	done
done

say "== idempotency records"
for rep in $(seq 1 "$REPS"); do
	for w in seed_record_begin_complete dedup_record_begin_complete; do
		fresh
		run "$w" "$w.sql"
	done
done
fresh
q -c "INSERT INTO seed_stripe (key, status, response, expires_at)
      SELECT 'dup-' || i, 'complete', '{\"id\": 1, \"status\": \"succeeded\"}', now() + interval '1 day'
      FROM generate_series(1, $DUP_KEYS) i" \
	-c "SELECT count(*) FROM (SELECT dedup_begin('bench-replay', 'dup-' || i),
	           dedup_complete('bench-replay', 'dup-' || i, 201, '{\"id\": 1, \"status\": \"succeeded\"}')
	    FROM generate_series(1, $DUP_KEYS) i) s" \
	-c "VACUUM ANALYZE" >/dev/null
for rep in $(seq 1 "$REPS"); do
	for w in seed_record_replay dedup_record_replay; do
		run "$w" "$w.sql"
	done
done
claims_figures() {
	local b=${TPS[business]} wd ws
	figure "new key + business insert: tps vs business alone" \
		"${TPS[dedup_claim_business]}" "$b" "$(calc "${TPS[dedup_claim_business]} / $b")" ">=" 0.75
	figure "  (seed ON CONFLICT DO NOTHING + business: tps vs business alone)" \
		"${TPS[seed_claim_business]}" "$b" "$(calc "${TPS[seed_claim_business]} / $b")" ">=" 0
	figure "new key, claim inside the business INSERT: tps vs business alone" \
		"${TPS[dedup_claim_business_1stmt]}" "$b" "$(calc "${TPS[dedup_claim_business_1stmt]} / $b")" ">=" 0.75
	figure "  (seed, DO NOTHING in a CTE of the business INSERT: vs business alone)" \
		"${TPS[seed_claim_business_1stmt]}" "$b" "$(calc "${TPS[seed_claim_business_1stmt]} / $b")" ">=" 0
	wd=${RELWALTX[dedup_claim_business]}
	ws=${RELWALTX[seed_claim_business]}
	figure "WAL bytes per new claim, records of the claim table (seed in baseline)" "$wd" "$ws" "$wd" "<=" 160
	wd=$(calc "${WALTX[dedup_claim_business]} - ${WALTX[business]}")
	ws=$(calc "${WALTX[seed_claim_business]} - ${WALTX[business]}")
	figure "  (WAL added per transaction vs business alone, all records)" "$wd" "$ws" "$wd" "<=" 160
	figure_vs "existing key: tps vs DO NOTHING + SELECT" \
		"${TPS[dedup_dup]}" "${TPS[seed_dup_nothing]}" ">=" 1.0
	figure_vs "  (existing key: tps vs plain PK lookup)" \
		"${TPS[dedup_dup]}" "${TPS[pk_lookup]}" ">=" 0
	figure_vs "  (existing key: tps vs DO UPDATE SET status = status)" \
		"${TPS[dedup_dup]}" "${TPS[seed_dup_update]}" ">=" 0
	figure "existing key: WAL bytes per claim, claim table (DO UPDATE in baseline)" \
		"${RELWALTX[dedup_dup]}" "${RELWALTX[seed_dup_update]}" "${RELWALTX[dedup_dup]}" "<=" 0
	figure "  (existing key: all WAL per claim; control: plain PK lookup in baseline)" \
		"${WALTX[dedup_dup]}" "${WALTX[pk_lookup]}" "${WALTX[dedup_dup]}" ">=" 0
	figure "existing key: dead tuples per claim (DO UPDATE in baseline)" \
		"${DEADTX[dedup_dup]}" "${DEADTX[seed_dup_update]}" "${DEADTX[dedup_dup]}" "<=" 0
	figure "batch of 100: keys/s vs single-key calls" \
		"$(calc "${TPS[dedup_batch]} * 100")" "${TPS[dedup_single]}" \
		"$(calc "${TPS[dedup_batch]} * 100 / ${TPS[dedup_single]}")" ">=" 10
	figure_vs "records: begin + complete (2 transactions) vs Stripe-style SQL" \
		"${TPS[dedup_record_begin_complete]}" "${TPS[seed_record_begin_complete]}" "-" ""
	figure_vs "records: WAL bytes per begin + complete, record tables (seed in baseline)" \
		"${RELWALTX[dedup_record_begin_complete]}" "${RELWALTX[seed_record_begin_complete]}" "-" ""
	figure_vs "records: begin of a completed key (replay) vs Stripe-style SQL" \
		"${TPS[dedup_record_replay]}" "${TPS[seed_record_replay]}" "-" ""
	figure "records: replay WAL bytes and dead tuples (seed's in baseline col.)" \
		"${RELWALTX[dedup_record_replay]}/${DEADTX[dedup_record_replay]}" \
		"${RELWALTX[seed_record_replay]}/${DEADTX[seed_record_replay]}" "" "-" ""
}
