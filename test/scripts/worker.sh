#!/usr/bin/env bash
# Scripted test: the cleanup background worker.  A server with dedup
# preloaded cleans database "app"; "missingdb" does not exist, "noext" has
# no extension and "closed" allows no connections.  Checks, polling (never sleeping blindly for a result):
#   - the worker deletes exactly the expired claims, completed records and
#     abandoned processing records, and nothing live; the figures say so;
#   - a missing database, one without the extension, one that allows no
#     connections, one whose transactions are read-only, a missing role and
#     one that may not delete are each logged once, then skipped;
#   - dedup.cleanup_interval and dedup.cleanup_enabled take effect on reload;
#   - a stage that cannot get its lock in time does not end the pass;
#   - SIGTERM stops a worker in the middle of a pass within a second, and
#     the launcher within a second; the postmaster restarts the launcher,
#     and after a crash (kill -9) too.
#
# Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.
set -euo pipefail
. "$(dirname "$0")/../../scripts/lib.sh"

test_server worker 30 \
	"dedup.cleanup_databases = 'app, missingdb, noext, closed'" \
	"dedup.cleanup_interval = 1" \
	"dedup.cleanup_pause = 0"

psql -X -q -v ON_ERROR_STOP=1 -c "CREATE DATABASE app" -c "CREATE DATABASE noext" \
	-c "CREATE DATABASE closed ALLOW_CONNECTIONS false"
export PGDATABASE=app
log_count() { grep -c -- "$1" "$dir/server.log" || true; }
reload() { q -c "ALTER SYSTEM SET $1" -c "SELECT pg_reload_conf()" >/dev/null; }
launcher_pid() { q -c "SELECT pid FROM pg_stat_activity WHERE backend_type = 'dedup cleanup launcher'"; }
wait_for_log() {	# wait_for_log TEXT: until the server log has TEXT, 30 s at most
	local deadline=$((SECONDS + 30))
	until [ "$(log_count "$1")" -ge 1 ]; do
		[ "$SECONDS" -lt "$deadline" ] || { echo "FAIL: not logged: $1"; exit 1; }
		sleep 0.1
	done
}

q <<'SQL'
CREATE EXTENSION dedup;
SELECT dedup_set_scope('short', ttl => '2 seconds', lease => '1 second');
-- live: 3000 claims and 20 completed records that keep for an hour
SELECT count(*) FROM dedup_claim_batch('long', ARRAY(SELECT 'live-' || i FROM generate_series(1, 3000) i), ttl => '1 hour');
SELECT count(*) FROM generate_series(1, 20) i,
    LATERAL dedup_begin('long', 'rec-' || i) b, LATERAL dedup_complete('long', 'rec-' || i, 200, '{}') c;
CREATE TABLE live AS SELECT key FROM dedup.claims;
-- expiring within 2 seconds: 2000 claims, 30 completed records and 10
-- processing records whose lease passes (abandoned by a crashed caller)
SELECT count(*) FROM dedup_claim_batch('short', ARRAY(SELECT 'gone-' || i FROM generate_series(1, 2000) i));
SELECT count(*) FROM generate_series(1, 30) i,
    LATERAL dedup_begin('short', 'rec-' || i) b, LATERAL dedup_complete('short', 'rec-' || i, 200, '{}') c;
SELECT count(*) FROM generate_series(31, 40) i, LATERAL dedup_begin('short', 'rec-' || i) b;
-- streams: 5 idle past a 2-second retention, 3 kept for a day
SELECT dedup_set_scope('idle', retention => '2 seconds');
SELECT count(*) FROM generate_series(1, 5) i, LATERAL dedup_advance('idle', 'p-' || i, i) a;
SELECT count(*) FROM generate_series(1, 3) i, LATERAL dedup_advance('kept', 'p-' || i, i) a;
SQL

# 1. exactly the expired rows go, and the figures count them
wait_for "SELECT count(*) FROM dedup.claims" 3020
check "rows left are exactly the live ones" \
	"$(q -c "SELECT count(*) FROM dedup.claims c FULL JOIN live l USING (key) WHERE c.key IS NULL OR l.key IS NULL")" 0
check "live claims are still duplicates" \
	"$(q -c "SELECT count(*) FROM dedup_claim_batch('long', ARRAY(SELECT 'live-' || i FROM generate_series(1, 3000) i))")" 0
check "deleted per kind" \
	"$(q -c "SELECT string_agg(kind || '=' || rows_deleted, ' ' ORDER BY kind) FROM dedup_cleanup_stats()")" \
	"claim=2000 outbox=0 record=40 stream=5"
check "the streams kept are the live ones" "$(q -c "SELECT string_agg(scope, ',' ORDER BY scope) FROM (SELECT DISTINCT scope FROM dedup.streams) s")" kept
check "no errors, a lag of a few intervals at most" \
	"$(q -c "SELECT bool_and(errors = 0 AND cleanup_lag < interval '3 seconds') FROM dedup_cleanup_stats()")" t
check "the view shows app and not the databases it skips" \
	"$(q -c "SELECT string_agg(DISTINCT datname, ',') FROM dedup_cleanup_stats WHERE batches > 0")" app

# 2. each skipped database is logged once, however many passes go by
sleep 3.5	# three more intervals at least: nothing may be logged again
check "missing database logged once" "$(log_count 'skips database "missingdb": it does not exist')" 1
check "database without the extension logged once" \
	"$(log_count 'skips database "noext": extension "dedup" is not installed there')" 1
check "database that allows no connections logged once" \
	"$(log_count 'skips database "closed": it does not allow connections')" 1
check "no worker died at connection" "$(log_count 'exited with exit code 1')" 0
check "app announced once" "$(log_count 'cleaning database "app"')" 1

# 3. a longer interval on reload: no pass for a while; back to 1 s: passes resume
reload "dedup.cleanup_interval = '1h'"
wait_for "SELECT setting FROM pg_settings WHERE name = 'dedup.cleanup_interval'" 3600
sleep 1.5	# let a pass started under the old setting finish
q -c "SELECT count(*) FROM dedup_claim_batch('short', ARRAY(SELECT 'later-' || i FROM generate_series(1, 500) i))" >/dev/null
stamp=$(q -c "SELECT max(last_pass_started_at) FROM dedup_cleanup_stats()")
sleep 4	# the old interval would have run four passes by now
check "no pass while the interval is 1h" "$(q -c "SELECT max(last_pass_started_at) FROM dedup_cleanup_stats()")" "$stamp"
check "expired rows wait for the next pass" "$(q -c "SELECT count(*) FROM dedup.claims")" 3520
reload "dedup.cleanup_interval = '1s'"
wait_for "SELECT count(*) FROM dedup.claims" 3020 10
echo "ok: interval back to 1 s on reload: the expired rows went"

# 4. enabled off on reload: no pass; on: passes resume
reload "dedup.cleanup_enabled = off"
wait_for "SELECT setting FROM pg_settings WHERE name = 'dedup.cleanup_enabled'" off
sleep 1.5
q -c "SELECT count(*) FROM dedup_claim_batch('short', ARRAY(SELECT 'off-' || i FROM generate_series(1, 500) i))" >/dev/null
stamp=$(q -c "SELECT max(last_pass_started_at) FROM dedup_cleanup_stats()")
sleep 4
check "no pass while disabled" "$(q -c "SELECT max(last_pass_started_at) FROM dedup_cleanup_stats()")" "$stamp"
reload "dedup.cleanup_enabled = on"
wait_for "SELECT count(*) FROM dedup.claims" 3020 10
echo "ok: enabled again on reload: the expired rows went"

# 5. a role: missing, then without the right to delete (each logged once),
# then granted: LOGIN is not needed (the worker connects as the bootstrap
# superuser and cleans as the role)
reload "dedup.cleanup_role = 'cleaner'"
wait_for "SELECT setting FROM pg_settings WHERE name = 'dedup.cleanup_role'" cleaner
q -c "SELECT count(*) FROM dedup_claim_batch('short', ARRAY(SELECT 'role-' || i FROM generate_series(1, 100) i))" >/dev/null
q -c "SELECT count(*) FROM generate_series(1, 4) i, LATERAL dedup_advance('idle', 'role-' || i, i) a" >/dev/null
wait_for_log 'skips database "app": role "cleaner" does not exist'
psql -X -q -c "CREATE ROLE cleaner NOLOGIN"
# the message names the role the worker cleans as
wait_for_log 'skips database "app": role "cleaner" may not delete from dedup.claims'
sleep 2.5
check "missing role logged once" "$(log_count 'role "cleaner" does not exist')" 1
check "role without DELETE logged once" "$(log_count 'role "cleaner" may not delete from dedup.claims')" 1
check "nothing deleted without the right" "$(q -c "SELECT count(*) FROM dedup.claims")" 3120
# 1.0's grant (the two tables) cleans them, and leaves the streams alone
q -c "GRANT DELETE ON dedup.claims, dedup.outbox_keys TO cleaner"
wait_for "SELECT count(*) FROM dedup.claims" 3020 10
sleep 2.5
check "a role without DELETE on dedup.streams leaves the streams" \
	"$(q -c "SELECT count(*) FROM dedup.streams WHERE scope = 'idle'")" 4
q -c "GRANT DELETE ON dedup.streams TO cleaner"
wait_for "SELECT count(*) FROM dedup.streams WHERE scope = 'idle'" 0 10
echo "ok: granted DELETE, a role without LOGIN cleans"
reload "dedup.cleanup_role = ''"

# a database whose transactions are read-only: logged once, nothing deleted
q -c "SELECT count(*) FROM dedup_claim_batch('short', ARRAY(SELECT 'ro-' || i FROM generate_series(1, 100) i))" >/dev/null
PGDATABASE=postgres q -c "ALTER DATABASE app SET default_transaction_read_only = on"
wait_for_log 'skips database "app": its transactions are read-only'
sleep 2.5
check "read-only database logged once" "$(log_count 'its transactions are read-only')" 1
check "nothing deleted in a read-only database" "$(q -c "SELECT count(*) FROM dedup.claims")" 3120
PGDATABASE=postgres q -c "ALTER DATABASE app RESET default_transaction_read_only"
wait_for "SELECT count(*) FROM dedup.claims" 3020 10
echo "ok: writable again, the expired rows went"

# a stage that cannot get its lock (a prepared transaction holds dedup.streams)
# fails each pass, logged and counted, and the pass goes on: the buckets'
# work, a later stage, still switches to a new bucket
q -c "BEGIN" -c "LOCK TABLE dedup.streams IN ACCESS EXCLUSIVE MODE" -c "PREPARE TRANSACTION 'holds_streams'"
errors=$(q -c "SELECT sum(errors) FROM dedup_cleanup_stats()")
q -c "UPDATE dedup.buckets SET opened_at = opened_at - interval '7 hours' WHERE state = 'c'"
wait_for "SELECT string_agg(bucket || state, ' ' ORDER BY bucket) FROM dedup.buckets WHERE state IN ('c', 'n')" 1c 10
check "the stage held back failed" "$(q -c "SELECT sum(errors) > $errors FROM dedup_cleanup_stats()")" t
q -c "ROLLBACK PREPARED 'holds_streams'"
echo "ok: a stage held back by a lock does not end the pass"

# 6. SIGTERM in the middle of a long pass: the worker is gone within a
# second, its batch rolled back; the next pass finishes the work
reload "dedup.cleanup_enabled = off"
wait_for "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'dedup cleanup worker'" 0
q <<'SQL' >/dev/null
SELECT count(*) FROM dedup_claim_batch('long', ARRAY(SELECT 'bulk-' || i FROM generate_series(1, 100000) i));
SELECT count(*) FROM dedup_claim_batch('long', ARRAY(SELECT 'bulk-' || i FROM generate_series(100001, 200000) i));
UPDATE dedup.claims SET expires_at = now() - interval '1 minute' WHERE key NOT IN (SELECT key FROM live);
SQL
reload "dedup.cleanup_batch_size = 1000"
reload "dedup.cleanup_pause = '200ms'"
reload "dedup.cleanup_enabled = on"
wait_for "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'dedup cleanup worker'" 1
wait_for "SELECT count(*) < 199000 FROM dedup.claims WHERE expires_at < now()" t
pid=$(q -c "SELECT pid FROM pg_stat_activity WHERE backend_type = 'dedup cleanup worker'")
kill -TERM "$pid"
pid_gone_within "$pid" 1.0
echo "ok: SIGTERM stopped the worker in the middle of a pass"
left=$(q -c "SELECT count(*) FROM dedup.claims WHERE expires_at < now()")
check "the worker had deleted whole batches" "$(( (200000 - left) % 1000 ))" 0
reload "dedup.cleanup_batch_size = 100000"
reload "dedup.cleanup_pause = 0"
wait_for "SELECT count(*) FROM dedup.claims" 3020 60
check "live rows survived all of it" \
	"$(q -c "SELECT count(*) FROM dedup.claims c FULL JOIN live l USING (key) WHERE c.key IS NULL OR l.key IS NULL")" 0

# 7. SIGTERM to the launcher: gone within a second, restarted by the
# postmaster (bgw_restart_time 10 s); then kill -9: crash restart
pid=$(launcher_pid)
kill -TERM "$pid"
pid_gone_within "$pid" 1.0
echo "ok: SIGTERM stopped the launcher"
wait_for "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'dedup cleanup launcher' AND pid <> $pid" 1 30
echo "ok: the postmaster restarted the launcher"
pid=$(launcher_pid)
kill -KILL "$pid"
sleep 1
wait_for "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'dedup cleanup launcher' AND pid <> $pid" 1 60
q -c "SELECT count(*) FROM dedup_claim_batch('short', ARRAY(SELECT 'crash-' || i FROM generate_series(1, 100) i))" >/dev/null
wait_for "SELECT count(*) FROM dedup.claims" 3020 30
echo "ok: after a crash restart the launcher is back and cleaning"
echo "worker: all checks passed"
