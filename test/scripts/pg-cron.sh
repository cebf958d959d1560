#!/usr/bin/env bash
# Scripted test: the cleanup without preloading dedup (managed PostgreSQL),
# scheduled by pg_cron exactly as the README shows it.  pg_cron lives in
# database postgres, dedup in database app; the job runs CALL dedup_cleanup()
# there every minute (pg_cron 1.4 has no shorter schedule, so this test
# waits for the next minute).  The job must succeed and delete exactly the
# expired rows; the shared-memory figures and scope counters are absent
# without preload (55000).
#
# Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.
set -euo pipefail
. "$(dirname "$0")/../../scripts/lib.sh"

test_server pgcron 50 "shared_preload_libraries = 'pg_cron'" "cron.host = '@DIR@'"


q -c "CREATE EXTENSION pg_cron" -c "CREATE DATABASE app"
export PGDATABASE=app
q <<'SQL' >/dev/null
CREATE EXTENSION dedup;
SELECT count(*) FROM dedup_claim_batch('s', ARRAY(SELECT 'live-' || i FROM generate_series(1, 500) i), ttl => '1 hour');
CREATE TABLE live AS SELECT key FROM dedup.claims;
SELECT count(*) FROM dedup_claim_batch('s', ARRAY(SELECT 'gone-' || i FROM generate_series(1, 1000) i), ttl => '1 second');
SELECT (dedup_begin('s', 'rec')).outcome;
SELECT dedup_complete('s', 'rec', 200, '{}');
UPDATE dedup.claims SET expires_at = now() - interval '1 second' WHERE (record).status IS NOT NULL;
SQL

# the README's line, run in the cron database
job=$(PGDATABASE=postgres q -c "SELECT cron.schedule_in_database('dedup-cleanup', '* * * * *', 'CALL dedup_cleanup()', 'app')")
echo "scheduled job $job; waiting for the next minute"
PGDATABASE=postgres wait_for \
	"SELECT status || ' ' || return_message FROM cron.job_run_details WHERE jobid = $job AND status <> 'running' ORDER BY runid LIMIT 1" \
	"succeeded 1 row" 90
check "exactly the live rows are left" \
	"$(q -c "SELECT count(*) FROM dedup.claims c FULL JOIN live l USING (key) WHERE c.key IS NULL OR l.key IS NULL")" 0
check "live count" "$(q -c "SELECT count(*) FROM dedup.claims")" 500
PGDATABASE=postgres q -c "SELECT cron.unschedule('dedup-cleanup')" >/dev/null

# without preload there are no shared-memory figures: a clear error
check "figures need preload" \
	"$(q -v VERBOSITY=sqlstate -c "SELECT * FROM dedup_cleanup_stats()" 2>&1 || true)" "ERROR:  55000"
check "scope counters need preload" \
	"$(q -v VERBOSITY=sqlstate -c "SELECT * FROM dedup_scope_stats()" 2>&1 || true)" "ERROR:  55000"
check "claims count nothing without preload, and work" \
	"$(q -c "SELECT dedup_claim('no-counters', 'k')")" t
check "no cleanup worker without preload" \
	"$(q -c "SELECT count(*) FROM pg_stat_activity WHERE backend_type LIKE 'dedup%'")" 0
echo "pg-cron: all checks passed"
