#!/usr/bin/env bash
# Lint: the C sources (src/*.c, src/*.h) in PostgreSQL's layout, as far as
# it can be checked without pgindent, which no Debian 12 package ships (its
# indenter pg-bsd-indent is packaged; pgindent itself, the script around it,
# and the typedefs list it needs come with PostgreSQL's source tree only).
# When a pgindent is on the PATH, the sources must be as it leaves them.
# Otherwise, a failure for:
#   - indentation that is not tabs (then fewer than 4 spaces, as pgindent
#     aligns a continued line), comments' " *" lines aside;
#   - trailing whitespace;
# and a warning, not a failure, for a line wider than 100 columns (tabs at
# 4) that holds no string literal (pgindent leaves message strings whole):
# the sources have such lines today.
#
# Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1

files=$(ls src/*.c src/*.h)
status=0
if command -v pgindent >/dev/null; then
	work=$(mktemp -d)
	trap 'rm -rf "$work"' EXIT
	for f in $files; do
		mkdir -p "$work/$(dirname "$f")"
		cp "$f" "$work/$f"
	done
	(cd "$work" && pgindent $files) || { echo "pgindent failed"; exit 1; }
	for f in $files; do
		diff -u "$f" "$work/$f" || status=1
	done
	[ "$status" -eq 0 ] && echo "format: the sources are as pgindent leaves them"
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
