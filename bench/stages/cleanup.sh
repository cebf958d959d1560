# bench/stages/cleanup.sh: the cleanup stage of scripts/bench, part of every
# full run (not of an --only run).
#
# Cleanup of CLEANUP_ROWS expired rows while claimers run.  Throughput over
# time is read back from orders.created_at (one order per committed claim),
# so the claimers can simply be stopped when the cleanup is done.  With
# CLEANUP_SQL "worker:PAUSE", the background worker is switched on for one
# pass with dedup.cleanup_pause = PAUSE, and the pass's start and duration
# are read from dedup_cleanup_stats().
#
# Sourced by scripts/bench (the driver) at the top level, with bench/lib.sh's
# helpers and the driver's settings; defines cleanup_figures, which the driver
# calls for the stage's lines of figures.txt.
#
# Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.

say "== cleanup of $CLEANUP_ROWS expired rows with claimers running"
cleanup_run seed_cleanup seed_claim_business.sql "$SEED_CLEANUP" seed_idem
cleanup_run dedup_cleanup dedup_claim_business.sql "CALL dedup_cleanup()" dedup.claims
cleanup_run dedup_worker dedup_claim_business.sql worker:20ms dedup.claims
cleanup_run dedup_worker_gentle dedup_claim_business.sql worker:200ms dedup.claims
cleanup_figures() {
	figure_vs "cleanup under load, worker: rows/s vs seed batched DELETE" \
		"${TPS[dedup_worker-rows]}" "${TPS[seed_cleanup-rows]}" ">=" 3
	figure "claim tps while the worker cleans vs without (seed's in baseline col.)" \
		"$(calc "${TPS[dedup_worker-during]} / ${TPS[dedup_worker-without]}")" \
		"$(calc "${TPS[seed_cleanup-during]} / ${TPS[seed_cleanup-without]}")" \
		"$(calc "${TPS[dedup_worker-during]} / ${TPS[dedup_worker-without]}")" ">=" 0.9
	figure_vs "  (worker with dedup.cleanup_pause 200ms: rows/s vs seed batched DELETE)" \
		"${TPS[dedup_worker_gentle-rows]}" "${TPS[seed_cleanup-rows]}" ">=" 0
	figure "  (claim tps while the worker cleans with pause 200ms vs without)" \
		"$(calc "${TPS[dedup_worker_gentle-during]} / ${TPS[dedup_worker_gentle-without]}")" \
		"$(calc "${TPS[seed_cleanup-during]} / ${TPS[seed_cleanup-without]}")" \
		"$(calc "${TPS[dedup_worker_gentle-during]} / ${TPS[dedup_worker_gentle-without]}")" ">=" 0
	figure_vs "  (CALL dedup_cleanup() under load: rows/s vs seed batched DELETE)" \
		"${TPS[dedup_cleanup-rows]}" "${TPS[seed_cleanup-rows]}" ">=" 0
	figure "  (claim tps during CALL dedup_cleanup() vs without)" \
		"$(calc "${TPS[dedup_cleanup-during]} / ${TPS[dedup_cleanup-without]}")" \
		"$(calc "${TPS[seed_cleanup-during]} / ${TPS[seed_cleanup-without]}")" \
		"$(calc "${TPS[dedup_cleanup-during]} / ${TPS[dedup_cleanup-without]}")" ">=" 0
}
