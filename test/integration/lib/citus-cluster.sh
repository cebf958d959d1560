# test/integration/lib/citus-cluster.sh: the Citus cluster the scripted
# Citus tests start (citus.sh, citus-buckets.sh), sourced after
# scripts/lib.sh; in lib/, so that scripts/test, which runs
# test/integration/*.sh, does not take it for a test.
#
# citus_cluster NAME OFFSET SETTING...: Citus installed when missing
# (scripts/citus-install.sh, about two minutes), then a coordinator
# (test_server NAME OFFSET: dir, port and PG* set to it) and two workers on
# port + 1 and port + 2 (their directories in wdirs), each with the
# SETTINGs, joined: Citus created on each, the coordinator's host set and
# the workers added; all stopped, and removed unless KEEP is set, when the
# script exits.  dedup is the caller's to create.
# worker N ARGS...: psql on worker N.
#
# Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.

citus_cluster() {
	local name=$1 offset=$2 n wdir
	shift 2
	if [ ! -f "$(pg_config --pkglibdir)/citus.so" ]; then
		as_root bash "$DEDUP_ROOT/scripts/citus-install.sh" >/dev/null ||
			{ echo "FAIL: Citus is not installed and could not be built (scripts/citus-install.sh)"; exit 1; }
	fi
	test_server "$name" "$offset" "$@"
	wdirs=()
	for n in 1 2; do
		wdir=$(mktemp -d "/tmp/dedup-$name-w$n.XXXXXX")
		wdirs+=("$wdir")
		server_start "$wdir" "$((port + n))" "$@"
	done
	trap 'for w in "${wdirs[@]}"; do server_stop "$w"; done; server_stop "$dir";
	      [ -n "${KEEP:-}" ] || rm -rf "$dir" "${wdirs[@]}"' EXIT
	q -c "CREATE EXTENSION citus" >/dev/null
	for n in 1 2; do worker "$n" -c "CREATE EXTENSION citus" >/dev/null; done
	q -c "SELECT citus_set_coordinator_host('$dir', $port)" \
		-c "SELECT citus_add_node('${wdirs[0]}', $((port + 1)))" \
		-c "SELECT citus_add_node('${wdirs[1]}', $((port + 2)))" >/dev/null
}

worker() {	# worker N ARGS...: psql on worker N
	local n=$1
	shift
	psql -X -q -At -v ON_ERROR_STOP=1 -h "${wdirs[$((n - 1))]}" -p "$((port + n))" -U postgres "$@"
}
