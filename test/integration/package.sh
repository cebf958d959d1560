#!/usr/bin/env bash
# Scripted test: the Debian package.  Builds postgresql-N-dedup, N the major
# of pg_config, and dedup-monitoring (the files of every major) with
# dpkg-buildpackage from a copy of the source (debian/, PGDG's form;
# debian/control written for the system's majors), checks that every file
# of postgresql-N-dedup is under a path of its own major (so that the
# packages of two majors install side by side, as pg_upgrade needs them),
# installs both with dpkg -i over what make install put there, and checks
# with dpkg -V that every file on disk is the package's; then a throwaway
# server with shared_preload_libraries = 'dedup' runs CREATE EXTENSION dedup
# and a claim.  Removes the packages and installs the build again for the
# tests after it.
#
# Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.
set -euo pipefail
. "$(dirname "$0")/../../scripts/lib.sh"

ensure_packages debhelper postgresql-all postgresql-server-dev-all dpkg-dev
major=$(pg_config --version | sed -n 's/^PostgreSQL \([0-9]*\).*/\1/p')
pkg=postgresql-$major-dedup
version=$(dpkg-parsechangelog -l "$DEDUP_ROOT/debian/changelog" -S Version)
work=$(mktemp -d /tmp/dedup-package.XXXXXX)
chmod 755 "$work"	# the build's test server (user postgres) reads the files built there
restore() {
	as_root dpkg -r "$pkg" dedup-monitoring >/dev/null 2>&1 || true
	as_root make -C "$DEDUP_ROOT" -s install >/dev/null
	rm -rf "$work"
}
trap restore EXIT

# the tracked and new files, as a clean clone has them
mkdir "$work/dedup"
(cd "$DEDUP_ROOT" && git ls-files -co --exclude-standard) |
	(cd "$DEDUP_ROOT" && tar -cf - -T -) | tar -xf - -C "$work/dedup"
(cd "$work/dedup" && PG_UPDATECONTROL=yes dpkg-buildpackage -us -uc -b) >"$work/build.log" 2>&1 ||
	{ tail -n 40 "$work/build.log"; exit 1; }
deb="$work/${pkg}_${version}_$(dpkg --print-architecture).deb"
common="$work/dedup-monitoring_${version}_all.deb"
[ -f "$deb" ] || { echo "no $deb"; ls "$work"; exit 1; }
[ -f "$common" ] || { echo "no $common"; ls "$work"; exit 1; }

# every file of the major's package is its major's: another major's package
# holds the same paths with its own major, so that both install at once
# (dpkg refuses a file two packages hold)
others=$(dpkg-deb -c "$deb" | awk '{ print $6 }' | grep -v '/$' |
	grep -vE "^\./usr/(lib|share)/postgresql/$major/|^\./usr/share/doc/$pkg/" || true)
[ -z "$others" ] || { echo "files of $pkg that another major's package would hold too:"; echo "$others"; exit 1; }

as_root dpkg -i "$common" "$deb" >/dev/null
# every file of the package is on disk as the package has it
if ! out=$(dpkg -V "$pkg" dedup-monitoring 2>&1) || [ -n "$out" ]; then
	echo "dpkg -V $pkg dedup-monitoring: $out"
	exit 1
fi
libdir=$(pg_config --pkglibdir)
sharedir=$(pg_config --sharedir)
for f in "$libdir/dedup.so" "$sharedir/extension/dedup.control" \
	"$sharedir/extension/dedup--1.0.sql" "$sharedir/extension/dedup--1.1.sql" \
	"$sharedir/extension/dedup--1.0--1.1.sql" \
	/usr/share/doc/$pkg/copyright; do
	dpkg -S "$f" 2>/dev/null | grep -q "^$pkg: " ||
		{ echo "$f is not in $pkg"; dpkg -L "$pkg"; exit 1; }
done
for f in /usr/share/dedup/monitoring/postgres_exporter.yaml /usr/share/dedup/monitoring/dedup-alerts.yml \
	/usr/share/doc/dedup-monitoring/copyright; do
	dpkg -S "$f" 2>/dev/null | grep -q "^dedup-monitoring: " ||
		{ echo "$f is not in dedup-monitoring"; dpkg -L dedup-monitoring; exit 1; }
done

test_server package 13 "shared_preload_libraries = 'dedup'"
# test_server's trap stops the server; the package goes after it
trap 'server_stop "$dir"; rm -rf "$dir"; restore' EXIT
check() { [ "$2" = "$3" ] || { echo "$1: got [$2], want [$3]"; exit 1; }; }
check "claims from the package" "$(psql -X -q -At -v ON_ERROR_STOP=1 \
	-c "CREATE EXTENSION dedup" \
	-c "SELECT extversion FROM pg_extension WHERE extname = 'dedup'" \
	-c "SELECT dedup_claim('orders', 'm-1'), dedup_claim('orders', 'm-1')" \
	-c "SHOW dedup.bucket_filter_memory")" "1.1
t|f
64MB"
echo "package: $(basename "$deb") and $(basename "$common") build, install (dpkg -V clean), and claim"
