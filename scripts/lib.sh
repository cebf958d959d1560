# scripts/lib.sh: what the test, demo and benchmark scripts share — installing
# Debian's packages that are missing, building and installing the extension,
# starting, crashing and stopping throwaway PostgreSQL servers, and running
# the TAP tests as the server user.  Source it; it defines functions and sets
# no options of the caller's.  The servers' settings and their crash are the
# TAP tests' own (test/perl/dedup.conf, test/perl/DedupServer.pm): the tests
# that need a server of their own are TAP tests (test/t, doc/tests.md); the
# shell scripts left are what PostgreSQL's harness cannot drive.
#
# Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.

DEDUP_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

# Run a command as root: directly when we are root, else through sudo.
as_root() {
	if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

# Install the named Debian packages that are not installed yet.
ensure_packages() {
	local missing=() p
	for p in "$@"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
			missing+=("$p")
	done
	[ ${#missing[@]} -eq 0 ] && return 0
	echo "== installing ${missing[*]}"
	as_root apt-get update -qq
	as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
}

# Build the extension and install it into the server of pg_config.
build_and_install() {
	echo "== building and installing dedup"
	make -C "$DEDUP_ROOT" -s clean >/dev/null
	make -C "$DEDUP_ROOT" -s -j"$(nproc)" >/dev/null
	make -C "$DEDUP_ROOT" -s -j"$(nproc)" sim >/dev/null
	as_root make -C "$DEDUP_ROOT" -s install >/dev/null
}

PG_BINDIR=$(pg_config --bindir 2>/dev/null || echo /usr/lib/postgresql/15/bin)

# The user the servers run as: postgres when we are root (PostgreSQL refuses
# to run as root), ourselves otherwise.
if [ "$(id -u)" -eq 0 ]; then
	SERVER_USER=postgres
	as_server() { runuser -u postgres -- "$@"; }
else
	SERVER_USER=$(id -un)
	as_server() { "$@"; }
fi

# server_start DIR PORT [extra postgresql.conf lines...]
# A new cluster in DIR/data, listening on PORT on a socket in DIR only,
# with the settings of every test server (test/perl/dedup.conf, which the
# TAP tests' test/perl/DedupNode.pm appends too: fsync off, pg_cron's
# database, ...) and dedup and pg_cron preloaded; the extra lines come
# last, so they win.  @DIR@ in
# a line stands for DIR.
server_start() {
	local dir=$1 port=$2
	shift 2
	mkdir -p "$dir"
	chown "$SERVER_USER" "$dir" 2>/dev/null || true
	chmod 755 "$dir"
	as_server "$PG_BINDIR/initdb" -D "$dir/data" -U postgres --no-sync -E UTF8 \
		--locale=C.UTF-8 >"$dir/initdb.log" 2>&1 || { cat "$dir/initdb.log"; return 1; }
	{
		echo
		echo "# test/perl/dedup.conf"
		cat "$DEDUP_ROOT/test/perl/dedup.conf"
		echo
		echo "# scripts/lib.sh's server_start"
		echo "port = $port"
		echo "listen_addresses = ''"
		echo "unix_socket_directories = '$dir'"
		echo "shared_preload_libraries = 'dedup, pg_cron'"
		for line in "$@"; do echo "${line//@DIR@/$dir}"; done
	} | as_server tee -a "$dir/data/postgresql.conf" >/dev/null
	as_server "$PG_BINDIR/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 start >/dev/null ||
		{ cat "$dir/server.log"; return 1; }
}

# server_stop DIR: fast shutdown; ignores a server that is not running.
server_stop() {
	as_server "$PG_BINDIR/pg_ctl" -D "$1/data" -m fast -w stop >/dev/null 2>&1 || true
}

# server_crash DIR: kill the server's postmaster with SIGKILL, as a crash
# would, and start the server again (crash recovery replays the WAL):
# test/perl/DedupServer.pm's crash_restart, which the TAP tests' nodes run
# too (it waits for the postmaster to be gone, removes its lock files and
# retries the start while its orphaned backends still hold shared memory).
server_crash() {
	local dir=$1 as=()
	[ "$(id -u)" -eq 0 ] && as=(runuser -u postgres --)
	perl -I "$DEDUP_ROOT/test/perl" -MDedupServer -e 'exit !DedupServer::crash_dir(@ARGV)' \
		"$dir/data" "$dir/.s.PGSQL.*.lock" "${as[@]}" "$PG_BINDIR/pg_ctl" -D "$dir/data" -l "$dir/server.log" \
		-w -t 60 start ||
		{ echo "server_crash: the server did not start again; see $dir/server.log" >&2; return 1; }
}

# server_crash_command DIR: server_crash DIR as one shell command, for a
# program that crashes the server itself (sim/dedup-sim --crash-command).
server_crash_command() {
	printf 'bash -c %q' ". $(printf '%q' "$DEDUP_ROOT/scripts/lib.sh") && server_crash $(printf '%q' "$1")"
}

# test_server NAME PORT_OFFSET [extra postgresql.conf lines...]
# For scripted tests: a server of their own in a new temporary directory, on
# the test port plus PORT_OFFSET, stopped and removed when the script exits
# (kept when KEEP is set), with PGHOST/PGPORT/PGUSER/PGDATABASE pointing at
# it.  Sets dir and port.  Each script has an offset of its own, so that
# scripts may run side by side (the TAP tests in test/t need none: the
# harness picks free ports): package 13, asyncpg 16,
# lint/reference 20, docs 30, citus 80
# (its workers 81 and 82), citus-buckets 83 (84, 85 and 86).
test_server() {
	local name=$1 offset=$2
	shift 2
	dir=$(mktemp -d "/tmp/dedup-$name.XXXXXX")
	port=$(( ${DEDUP_TEST_PORT:-54391} + offset ))
	trap 'server_stop "$dir"; [ -n "${KEEP:-}" ] || rm -rf "$dir"' EXIT
	server_start "$dir" "$port" "$@"
	export PGHOST=$dir PGPORT=$port PGUSER=postgres PGDATABASE=postgres
}

# wait_for SQL WANT [SECONDS]: for scripted tests, run SQL every 0.1 s until
# it prints WANT; fail, saying what it printed last, after SECONDS (30).  A
# failing psql (a server still in crash recovery) is one more try, not the
# end of a script under set -e.
wait_for() {
	local sql=$1 want=$2 limit=${3:-30} got=
	local deadline=$((SECONDS + ${3:-30}))
	while :; do
		got=$(psql -X -q -At -c "$sql" 2>&1) || true
		[ "$got" = "$want" ] && return 0
		if [ "$SECONDS" -ge "$deadline" ]; then
			echo "after ${limit}s, [$sql] printed [$got], not [$want]"
			return 1
		fi
		sleep 0.1
	done
}

# For scripted tests: q runs psql quietly and unaligned, stopping at the
# first error; check WHAT GOT WANT fails the test unless GOT is WANT.
q() { psql -X -q -At -v ON_ERROR_STOP=1 "$@"; }
check() {
	if [ "$2" != "$3" ]; then
		echo "FAIL: $1: got [$2], want [$3]"
		exit 1
	fi
	echo "ok: $1"
}

# run_tap_tests LOG [FILE...]: the TAP tests (test/t/*.pl, or the FILEs
# named, as test/t/NNN_name.pl) through PGXS's prove_installcheck, against
# the PostgreSQL of pg_config, as the server user: the harness runs initdb,
# which refuses root.  They run in a throwaway copy of what they read (the
# Makefile, dedup.control, sql/ and the install and update scripts built
# from it, test/, monitoring/, clients/, and sim/ with its build, its
# times kept so that make sim finds it built) owned by that user
# (prove_installcheck writes tmp_check there, and the tree may be root's);
# prove's output goes to LOG, the harness's logs of
# each file to LOG.d/.  The harness picks free ports; it reserves them in
# one directory for every run on the machine (/tmp/dedup-tap-ports), so that
# runs side by side do not pick the same, and the files run three at a
# time (DEDUP_TAP_JOBS; most of a file's time is waiting for its servers).
# Returns make's status.
run_tap_tests() {
	local log=$1 tap status f ports=/tmp/dedup-tap-ports
	shift
	tap=$(mktemp -d /tmp/dedup-tap.XXXXXX)
	cp -R "$DEDUP_ROOT/Makefile" "$DEDUP_ROOT/dedup.control" "$DEDUP_ROOT/test" \
		"$DEDUP_ROOT/monitoring" "$DEDUP_ROOT/clients" "$tap/"
	cp -R --preserve=timestamps "$DEDUP_ROOT/sim" "$DEDUP_ROOT/sql" "$tap/"
	# the install and update scripts the Makefile built (test/t/014_upgrade.pl)
	for f in "$DEDUP_ROOT"/dedup--*.sql; do
		[ -f "$f" ] && cp --preserve=timestamps "$f" "$tap/"
	done
	chown -R "$SERVER_USER" "$tap"
	chmod 755 "$tap"
	mkdir -p "$ports"
	chmod 1777 "$ports" 2>/dev/null || true
	(cd "$tap" && as_server env PG_TEST_PORT_DIR="$ports" DEDUP_MATRIX_MAJOR="${DEDUP_PG_MAJOR:-}" make -s installcheck REGRESS= ISOLATION= \
		TAP_JOBS="${DEDUP_TAP_JOBS:-3}" \
		TAP_TESTS=1 ${1:+PROVE_TESTS="$*"}) >"$log" 2>&1
	status=$?
	rm -rf "$log.d"
	if [ -d "$tap/tmp_check/log" ]; then
		mkdir -p "$log.d"
		cp -R "$tap/tmp_check/log/." "$log.d/"
	fi
	[ -n "${KEEP:-}" ] || rm -rf "$tap"
	return "$status"
}
