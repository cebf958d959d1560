# bench/stages/privileges.sh: the privileges stage of scripts/bench.
#
# Per-scope privileges: the same claim + business transaction as a role
# granted usage of its scopes by name and prefix, and as one granted every
# scope (both checked through the backend's scope cache), interleaved.
#
# Sourced by scripts/bench (the driver) at the top level, with bench/lib.sh's
# helpers and the driver's settings; defines privileges_figures, which the driver
# calls for the stage's lines of figures.txt.
#
# Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.

say "== claim + business: a role restricted to its scopes vs one granted every scope"
q -c "CREATE ROLE bench_scoped LOGIN" -c "CREATE ROLE bench_every LOGIN" \
	-c "GRANT INSERT ON orders TO bench_scoped, bench_every" \
	-c "GRANT USAGE ON SEQUENCE orders_id_seq TO bench_scoped, bench_every" \
	-c "SELECT dedup_grant_usage('bench_scoped', ARRAY['billing', 'bench', 'bench.*']),
	           dedup_grant_usage('bench_every')" >/dev/null
for rep in $(seq 1 "$REPS"); do
	for w in every scoped; do
		fresh
		run "dedup_claim_business_as_$w" dedup_claim_business.sql -U "bench_$w"
	done
done
privileges_figures() {
	printf '%-62s %12s %12s %9s   %-8s %s\n' \
		"claim + business as a scope-restricted role: tps vs every scope" \
		"${TPS[dedup_claim_business_as_scoped]}" "${TPS[dedup_claim_business_as_every]}" \
		"$(calc "${TPS[dedup_claim_business_as_scoped]} / ${TPS[dedup_claim_business_as_every]}")" \
		">= 0.98" "$(awk "BEGIN { print (${TPS[dedup_claim_business_as_scoped]} / ${TPS[dedup_claim_business_as_every]} >= 0.98) ? \"met\" : \"NOT met\" }")"
}
