#!/usr/bin/env bash
# Scripted test: without shared_preload_libraries, CREATE EXTENSION dedup and
# every claim, record and cleanup function work (managed PostgreSQL cannot
# preload), and the GUCs exist once the library is loaded by the first call.
#
# Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.
set -euo pipefail
. "$(dirname "$0")/../../scripts/lib.sh"

test_server nopreload 10 "shared_preload_libraries = ''"

got=$(psql -X -q -At -v ON_ERROR_STOP=1 <<'SQL'
SHOW shared_preload_libraries;
CREATE EXTENSION dedup;
SELECT dedup_claim('s', 'k');
SELECT dedup_claim('s', 'k');
SELECT count(*) FROM dedup_claim_batch('s', ARRAY['k', 'k2', 'k3']);
SELECT (dedup_begin('r', 'k')).outcome;
SELECT dedup_complete('r', 'k', 200, '{"ok": true}');
SELECT (dedup_begin('r', 'k')).response;
SHOW dedup.default_ttl;
UPDATE dedup.claims SET expires_at = now() - interval '1 second';
CALL dedup_cleanup();
SELECT count(*) FROM dedup.claims;
SQL
)
want=$(printf '%s\n' "" t f 2 started "" '{"ok": true}' 1d 4 0)
if [ "$got" != "$want" ]; then
	echo "unexpected output without preload:"
	diff <(echo "$want") <(echo "$got") || true
	exit 1
fi
echo "no-preload: claims, records and cleanup work without shared_preload_libraries"
