#!/usr/bin/env bash
# Scripted test: dedup's row results read through asyncpg (Debian's
# python3-asyncpg), which reads a composite value in binary and cannot read
# one holding a type it has no codec for, as an extension's: every row a
# public function returns holds built-in types only, and each is read both
# as one value (fetchval of SELECT f(...)) and as columns (SELECT * FROM
# f(...)), with its values asserted (test/integration/asyncpg_rows.py says
# which calls), in three databases:
#   - fresh: created at the default version;
#   - from_1_0: created at 1.0, a record begun, then updated (1.0's
#     request_fingerprint of dedup_lookup reads as the same text);
#   - at_1_0: still at 1.0, with this library: 1.0's calls as they were.
# A control in each shows the check can fail: asyncpg refuses a composite
# that holds a dedup_fingerprint.
#
# Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.
set -euo pipefail
. "$(dirname "$0")/../../scripts/lib.sh"

ensure_packages python3-asyncpg
test_server asyncpg 16
py=/usr/bin/python3		# Debian's, which has python3-asyncpg

default=$(sed -n "s/^default_version = '\(.*\)'$/\1/p" "$DEDUP_ROOT/dedup.control")
q -c "CREATE DATABASE fresh" -c "CREATE DATABASE from_1_0" -c "CREATE DATABASE at_1_0"
q -d fresh -c "CREATE EXTENSION dedup"
q -d from_1_0 -c "CREATE EXTENSION dedup VERSION '1.0'" \
	-c "SELECT outcome FROM dedup_begin('payments', 'before-update', '{\"amount\": 100, \"currency\": \"eur\"}')" \
	-c "ALTER EXTENSION dedup UPDATE" >/dev/null
q -d at_1_0 -c "CREATE EXTENSION dedup VERSION '1.0'"
check "from_1_0 is at the default version" \
	"$(q -d from_1_0 -c "SELECT extversion FROM pg_extension WHERE extname = 'dedup'")" "$default"

out=$("$py" "$DEDUP_ROOT/test/integration/asyncpg_rows.py" "fresh:$default" "from_1_0:$default" at_1_0:1.0 2>&1) ||
	{ echo "$out"; echo "FAIL: asyncpg_rows.py"; exit 1; }
echo "$out"
check "the record of 1.0 was read after the update" \
	"$(grep -c '^ok: from_1_0: a record of 1.0 looked up$' <<<"$out")" 1
check "every check passed, none skipped by an exception" \
	"$(grep -c '^ok: ' <<<"$out")" "$(grep -c '' <<<"$out")"
