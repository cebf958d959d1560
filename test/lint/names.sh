#!/usr/bin/env bash
# Lint: one prefix per file for what a C file exports (issue 50).  Every
# global symbol of src/NAME.o is NAME's: its name starts with NAME_ or with
# one word and NAME_ (dedup_bucket_, key_store_, outbox_fast_; a trailing
# "s" of NAME may go: dedup_check_ for checks), but for
#   - the SQL functions' entry points (those with a pg_finfo_ twin), named
#     after their SQL functions;
#   - _PG_init and PG_MODULE_MAGIC's function;
#   - settings' variables, named after their settings (dedup.x: dedup_x).
# Reads the objects: run after make.
#
# Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
status=0
for o in src/*.o; do
	[ -f "$o" ] || { echo "names: no objects in src/: run make first"; exit 1; }
	m=$(basename "$o" .o)
	bad=$(nm -g --defined-only "$o" | awk -v m="$m" '
		{ sym[NR] = $3; kind[NR] = $2; has[$3] = 1 }
		END {
			ms = m; sub(/s$/, "", ms)
			for (i = 1; i <= NR; i++) {
				s = sym[i]
				if (kind[i] !~ /[TDBRC]/ || s ~ /^(_PG_init|Pg_magic_func)$/ || s ~ /^pg_finfo_/) continue
				if (("pg_finfo_" s) in has) continue
				if (s ~ ("^([a-z]+_)?" m "_") || s ~ ("^([a-z]+_)?" ms "_")) continue
				if (m == "settings" && kind[i] ~ /[DBC]/) continue
				print "  " s
			}
		}')
	if [ -n "$bad" ]; then
		echo "src/$m.c exports names without its prefix (dedup_${m}_ or ${m}_):"
		echo "$bad"
		status=1
	fi
done
[ "$status" -eq 0 ] && echo "names: every exported name carries its file's prefix"
exit "$status"
