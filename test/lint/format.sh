#!/usr/bin/env bash
# Lint: the C sources (src/*.c, src/*.h) in PostgreSQL's layout.
#
# Always: every typedef of src/ is listed in src/typedefs.list (pgindent
# lays out a declaration by whether a name is a type).  Then, where
# pgindent is installed (on the PATH, or beside `pg_config`: Debian ships
# it with postgresql-server-dev-17 and later, with its pg_bsd_indent, so
# scripts/test runs this check in the 17 and 18 chroots of its matrix),
# the sources must be exactly as pgindent leaves them, with the typedefs of
# scripts/typedefs; scripts/indent rewrites them so.  Without pgindent
# (Debian 12's 15 has none), a failure for:
#   - indentation that is not tabs (then fewer than 4 spaces, as pgindent
#     aligns a continued line), comments' " *" lines aside;
#   - trailing whitespace;
# and a warning, not a failure, for a line wider than 100 columns (tabs at
# 4) that holds no string literal.
#
# Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1

files=$(ls src/*.c src/*.h)
status=0
missing=$(LC_ALL=C comm -23 <(scripts/typedefs --ours) <(grep -v '^#' src/typedefs.list | LC_ALL=C sort -u))
if [ -n "$missing" ]; then
	echo "typedefs of src/ missing from src/typedefs.list:" $missing
	status=1
fi

pgindent=$(command -v pgindent || true)
bindir=$(pg_config --bindir 2>/dev/null || true)
[ -z "$pgindent" ] && [ -x "$bindir/pgindent" ] && pgindent=$bindir/pgindent
if [ -n "$pgindent" ]; then
	indent=$(command -v pg_bsd_indent || echo "$bindir/pg_bsd_indent")
	work=$(mktemp -d)
	trap 'rm -rf "$work"' EXIT
	mkdir -p "$work/src"
	cp $files "$work/src/"
	scripts/typedefs >"$work/typedefs.list"
	(cd "$work" && "$pgindent" --typedefs=typedefs.list --indent="$indent" $files) ||
		{ echo "pgindent failed"; exit 1; }
	for f in $files; do
		diff -u "$f" "$work/$f" || status=1
	done
	[ "$status" -eq 0 ] && echo "format: the sources are as pgindent leaves them"
	[ "$status" -ne 0 ] && echo "format: run scripts/indent"
	exit "$status"
fi

bad=$(grep -nP '^\t* {4,}(?!\*)\S|^\t* +\t' $files)
if [ -n "$bad" ]; then
	echo "indented with spaces, not tabs:"
	echo "$bad" | head -20
	status=1
fi
bad=$(grep -nP '[ \t]+$' $files)
if [ -n "$bad" ]; then
	echo "trailing whitespace:"
	echo "$bad" | head -20
	status=1
fi
wide=$(awk '{ l = $0; gsub(/\t/, "    ", l) } length(l) > 100 && $0 !~ /"/ { print FILENAME ":" FNR ": " length(l) " columns" }' $files)
if [ -n "$wide" ]; then
	echo "warning: $(echo "$wide" | wc -l) lines wider than 100 columns (tabs at 4) hold no string, e.g.:"
	echo "$wide" | head -5
fi
[ "$status" -eq 0 ] && echo "format: tabs for indentation, no trailing whitespace (pgindent not installed)"
exit "$status"
