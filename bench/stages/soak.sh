# bench/stages/soak.sh: the soak stage of scripts/bench, part of every
# full run (not of an --only run).
#
# Soak: a steady claim rate with a short ttl over several ttl cycles, with
# the cleanup every fifth of a ttl (the seed's from a loop, as cron would;
# dedup's by the background worker at that interval); relation size after
# each cycle.  For the worker, the cleanup lag is sampled every second:
# the figure's bound and, by a scan, the true age of the oldest expired row.
#
# Sourced by scripts/bench (the driver) at the top level, with bench/lib.sh's
# helpers and the driver's settings; defines soak_figures, which the driver
# calls for the stage's lines of figures.txt.
#
# Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.

say "== soak"
soak_run seed_soak seed_soak.sql "$SEED_CLEANUP" seed_idem
soak_run dedup_soak dedup_soak.sql worker dedup.claims
soak_figures() {
	figure "relation size after $SOAK_CYCLES ttl cycles vs after 1, worker (seed's in baseline col.)" \
		"${TPS[dedup_soak-growth]}" "${TPS[seed_soak-growth]}" "${TPS[dedup_soak-growth]}" "<=" 1.3
	figure "soak: max cleanup lag (s) vs two worker intervals (s)" \
		"${TPS[dedup_soak-lag]}" "$((2 * SOAK_INTERVAL))" "$(calc "${TPS[dedup_soak-lag]} / (2 * $SOAK_INTERVAL)")" "<" 1
	figure "  (soak: max age of the oldest expired row, by scan (s), vs two intervals)" \
		"${TPS[dedup_soak-truelag]}" "$((2 * SOAK_INTERVAL))" "$(calc "${TPS[dedup_soak-truelag]} / (2 * $SOAK_INTERVAL)")" ">=" 0
}
