#!/usr/bin/env bash
# scripts/citus-install.sh [TARBALL]: builds Citus 13.2.2 from its source
# tarball and installs it into the PostgreSQL of `pg_config` (PG_CONFIG to
# name another), for the scripted Citus tests (test/integration/lib/
# citus-cluster.sh installs it when missing); the major's build packages
# (postgresql-server-dev-N, libicu-dev, ...) are installed from Debian when
# missing.  Citus 13.2 supports PostgreSQL 15 to 17; there is no Citus release
# for 18 (exit status 2, nothing done).  Does nothing when Citus 13.2 is
# installed already, so that a kept chroot builds it once.  The tarball:
# TARBALL, else citus-13.2.2.tar.gz in ../shared/citus beside the tree or in
# /work/shared/citus.  About two minutes on 2 cores.  Run as root.
#
# Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.
set -euo pipefail
ver=13.2.2
pgconfig=${PG_CONFIG:-pg_config}
root=$(cd "$(dirname "$0")/.." && pwd)
major=$("$pgconfig" --version | sed -n 's/^PostgreSQL \([0-9]*\).*/\1/p')
case "$major" in
	15 | 16 | 17) ;;
	*) echo "no Citus release builds for PostgreSQL $major"; exit 2 ;;
esac
if grep -qs "default_version = '13.2-1'" "$("$pgconfig" --sharedir)/extension/citus.control" &&
	[ -f "$("$pgconfig" --pkglibdir)/citus.so" ]; then
	echo "citus $ver already installed"
	exit 0
fi
tarball=${1:-}
if [ -z "$tarball" ]; then
	for candidate in "$root/../shared/citus/citus-$ver.tar.gz" "/work/shared/citus/citus-$ver.tar.gz"; do
		[ -f "$candidate" ] && { tarball=$candidate; break; }
	done
fi
[ -f "$tarball" ] || { echo "the source of Citus $ver (citus-$ver.tar.gz) is not found"; exit 1; }
need=()
for p in make gcc "postgresql-server-dev-$major" libicu-dev liblz4-dev libzstd-dev libkrb5-dev \
	libssl-dev libselinux1-dev libxslt1-dev libpam0g-dev libreadline-dev zlib1g-dev; do
	dpkg -s "$p" >/dev/null 2>&1 || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
		"${need[@]}" >/dev/null
fi
work=$(mktemp -d /tmp/citus-build.XXXXXX)
trap 'rm -rf "$work"' EXIT
tar -xzf "$tarball" -C "$work"
cd "$work/citus-$ver"
# PostgreSQL 15.20 (and the minors of its time) export have_createdb_privilege();
# Citus 13.2 defines its own static copy for older minors: renamed, both compile
perl -0pi -e 's/static inline bool\nhave_createdb_privilege\(void\)/#define have_createdb_privilege citus_compat_have_createdb_privilege\nstatic inline bool\ncitus_compat_have_createdb_privilege(void)/' \
	src/include/pg_version_compat.h
./configure --without-libcurl PG_CONFIG="$pgconfig" >configure.log 2>&1 || { tail -20 configure.log; exit 1; }
make -s -j"$(nproc)" >build.log 2>&1 || { grep -m5 -B2 -A5 'error' build.log; exit 1; }
make -s install >>build.log 2>&1
echo "citus $ver installed into $("$pgconfig" --pkglibdir)"
