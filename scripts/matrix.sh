# scripts/matrix.sh: the PostgreSQL majors scripts/test runs the suite on
# besides the host's 15, each in a Debian chroot of its own that has it from
# Debian's archive: 17 in trixie, 18 in sid.  Source it (after lib.sh).
#
# A chroot lives in /var/cache/dedup-chroots/SUITE (DEDUP_CHROOTS for
# another place) and is kept between runs; it is made when missing
# (debootstrap --variant=minbase from the host's Debian mirror, then the
# packages of the suite: about 5 minutes each).  Known quirks of the archive
# are handled here: sid's Release file may be past its Valid-Until on the
# mirror (apt is told not to check it, in sid only), and the host's
# certificate authorities (a proxy's, for the npm registry) are copied in.
#
# Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.

DEDUP_CHROOTS=${DEDUP_CHROOTS:-/var/cache/dedup-chroots}

# matrix_suite MAJOR: the Debian suite whose own archive ships PostgreSQL MAJOR
matrix_suite() {
	case "$1" in
		17) echo trixie ;;
		18) echo sid ;;
		*) return 1 ;;
	esac
}

# The host's Debian mirror (its apt sources), else Debian's own.
matrix_mirror() {
	local uri
	uri=$(sed -n 's/^URIs: *\(http[^ ]*\/debian\)\/*$/\1/p' /etc/apt/sources.list.d/*.sources 2>/dev/null | head -n 1)
	echo "${uri:-http://deb.debian.org/debian}"
}

# matrix_mount ROOT / matrix_umount ROOT: /proc and /dev/shm (the servers'
# shared memory) inside the chroot while it is used
matrix_mount() {
	mountpoint -q "$1/proc" || mount -t proc proc "$1/proc"
	mkdir -p "$1/dev/shm"
	mountpoint -q "$1/dev/shm" || mount --bind /dev/shm "$1/dev/shm"
	cp /etc/resolv.conf "$1/etc/resolv.conf" 2>/dev/null || true
}
matrix_umount() {
	mountpoint -q "$1/dev/shm" && umount "$1/dev/shm"
	mountpoint -q "$1/proc" && umount "$1/proc"
	return 0
}

# matrix_in ROOT COMMAND...: COMMAND in the chroot, with a clean environment
matrix_in() {
	local root=$1
	shift
	chroot "$root" /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
		HOME=/root LANG=C.UTF-8 NODE_EXTRA_CA_CERTS=/etc/ssl/certs/dedup-host-ca.crt "$@"
}

# matrix_packages MAJOR: what the suite needs in a chroot (scripts/test's
# own list for the host, but for the integration scripts it runs there)
matrix_packages() {
	echo make gcc libc6-dev libpq-dev libssl-dev perl ca-certificates util-linux \
		"postgresql-$1" "postgresql-server-dev-$1" "postgresql-$1-cron" "postgresql-$1-pgtap" \
		"postgresql-$1-wal2json" libtap-parser-sourcehandler-pgtap-perl libipc-run-perl \
		python3-psycopg nodejs npm
}

# matrix_chroot MAJOR: the chroot of MAJOR, made when missing; prints its path
matrix_chroot() {
	local major=$1 suite root tmp
	suite=$(matrix_suite "$major") || { echo "no Debian suite ships PostgreSQL $major" >&2; return 1; }
	root=$DEDUP_CHROOTS/$suite
	if [ ! -f "$root/.dedup-ready-$major" ]; then
		echo "== making the $suite chroot for PostgreSQL $major in $root (kept for later runs)" >&2
		mkdir -p "$DEDUP_CHROOTS"
		if [ ! -x "$root/usr/bin/apt-get" ]; then
			command -v debootstrap >/dev/null || ensure_packages debootstrap >&2
			tmp=$root.tmp
			rm -rf "$tmp"
			debootstrap --variant=minbase "$suite" "$tmp" "$(matrix_mirror)" >"$DEDUP_CHROOTS/$suite.log" 2>&1 ||
				{ tail -n 20 "$DEDUP_CHROOTS/$suite.log" >&2; return 1; }
			rm -rf "$root"
			mv "$tmp" "$root"
		fi
		# sid's Release file is often past its Valid-Until on the mirror
		[ "$suite" = sid ] &&
			echo 'Acquire::Check-Valid-Until "false";' >"$root/etc/apt/apt.conf.d/99dedup-valid-until"
		matrix_mount "$root"
		# shellcheck disable=SC2046
		if ! matrix_in "$root" sh -c "apt-get update -q && DEBIAN_FRONTEND=noninteractive \
			apt-get install -y -q --no-install-recommends $(matrix_packages "$major")" \
			>>"$DEDUP_CHROOTS/$suite.log" 2>&1; then
			tail -n 20 "$DEDUP_CHROOTS/$suite.log" >&2
			matrix_umount "$root"
			return 1
		fi
		matrix_umount "$root"
		touch "$root/.dedup-ready-$major"
	fi
	# the host's certificate authorities (a proxy's for the npm registry)
	cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/dedup-host-ca.crt" 2>/dev/null || true
	echo "$root"
}

# matrix_copy_tree ROOT: a copy of the tree (its files known to git, and new
# ones not ignored) in ROOT/build/dedup, and Citus's source where
# scripts/citus-install.sh looks for it (ROOT/build/shared/citus)
matrix_copy_tree() {
	local root=$1 tarball
	rm -rf "$root/build/dedup"
	mkdir -p "$root/build/dedup"
	(cd "$DEDUP_ROOT" && git ls-files -z --cached --others --exclude-standard |
		tar --null -T - -cf - 2>/dev/null) | tar -xf - -C "$root/build/dedup"
	for tarball in "$DEDUP_ROOT/../shared/citus/citus-13.2.2.tar.gz" /work/shared/citus/citus-13.2.2.tar.gz; do
		if [ -f "$tarball" ]; then
			mkdir -p "$root/build/shared/citus"
			cmp -s "$tarball" "$root/build/shared/citus/citus-13.2.2.tar.gz" ||
				cp "$tarball" "$root/build/shared/citus/"
			break
		fi
	done
}

# matrix_prepare MAJOR: what matrix_run needs before it runs, made now and
# kept: MAJOR's chroot and, for a major Citus supports (unless
# DEDUP_TEST_SKIP names citus.sh), Citus built in it.  scripts/test runs it
# in the background while the host's part runs, so that a new machine makes
# its chroots (about 5 minutes each) and builds Citus (2 to 4) meanwhile.
matrix_prepare() {
	local major=$1 root status
	root=$(matrix_chroot "$major") || return 1
	[ "$major" -le 17 ] || return 0
	[[ " ${DEDUP_TEST_SKIP:-} " != *" citus.sh "* ]] || return 0
	[ -f "$root/usr/lib/postgresql/$major/lib/citus.so" ] && return 0
	matrix_copy_tree "$root"
	matrix_mount "$root"
	matrix_in "$root" bash /build/dedup/scripts/citus-install.sh
	status=$?
	matrix_umount "$root"
	return "$status"
}

# matrix_run MAJOR LOG: the suite (scripts/test, DEDUP_PG_MAJOR=MAJOR) in
# MAJOR's chroot, on a copy of the tree (matrix_copy_tree); its output goes
# to LOG and to standard error.  Prints the suite's last line, "N passed, N
# failed" (or "0 passed, 1 failed" when it could not run).
matrix_run() {
	local major=$1 log=$2 root status
	if ! root=$(matrix_chroot "$major" 2>"$log.setup"); then
		cat "$log.setup" >&2
		echo "0 passed, 1 failed"
		return 1
	fi
	matrix_copy_tree "$root"
	matrix_mount "$root"
	matrix_in "$root" env DEDUP_PG_MAJOR="$major" DEDUP_TEST_PORT="${DEDUP_TEST_PORT:-54391}" \
		DEDUP_TEST_SKIP="${DEDUP_TEST_SKIP:-}" \
		bash /build/dedup/scripts/test 2>&1 | tee "$log" >&2
	status=${PIPESTATUS[0]}
	matrix_umount "$root"
	tail -n 1 "$log" | grep -E '^[0-9]+ passed, [0-9]+ failed$' || echo "0 passed, 1 failed"
	return "$status"
}
