#!/usr/bin/env bash
# Scripted test: the history tier (history.c) through crashes, a standby
# and its promotion, and pg_dump / pg_restore.  A scope with a history
# (rate 0.01) claims 100,000 keys into a bucket, which is switched, sealed
# and expired by hand; then:
#   1. the server is killed (SIGKILL) while the fold's transaction has
#      folded and not committed: nothing is folded, the bucket is still
#      read, every key is still a duplicate; the fold runs again and folds
#      each key once; then killed 0.1 s into the fold of a second bucket:
#      the fold is whole or absent, never partial, and done once;
#   2. killed again just after a fold commits: the fold is there after
#      crash recovery, every folded key answered "history" (no false
#      negative), the bucket gone;
#   3. a streaming standby made with pg_basebackup replays a fourth fold of
#      100,000 more keys: it answers dedup_seen() as the primary does, for
#      the folded keys and for 20,000 never claimed; promoted, its claims of
#      the folded keys are duplicates;
#   4. pg_dump / pg_restore of the database: the restored history answers as
#      the original did.
# The fold runs with maintenance_work_mem at 1MB, in several passes.
#
# Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.
set -euo pipefail
. "$(dirname "$0")/../../scripts/lib.sh"

test_server history 46 \
	"wal_keep_size = '64MB'" \
	"hot_standby = on" \
	"restart_after_crash = off" \
	"maintenance_work_mem = '1MB'" \
	"dedup.cleanup_enabled = off"

sdir=$(mktemp -d /tmp/dedup-history-replica.XXXXXX)
sport=$((port + 1))
trap 'server_stop "$sdir"; server_stop "$dir"; [ -n "${KEEP:-}" ] || rm -rf "$sdir" "$dir"' EXIT
chown "$SERVER_USER" "$sdir" 2>/dev/null || true
chmod 755 "$sdir"

psql -X -q -v ON_ERROR_STOP=1 -c "CREATE DATABASE app"
export PGDATABASE=app
q <<'SQL' >/dev/null
CREATE EXTENSION dedup;
SELECT dedup_set_scope('h', ttl => '1 hour', history => '1 day', false_positive_rate => 0.01);
SELECT deleted FROM dedup_cleanup_batch(3::bigint << 32);
SQL

# claim N keys PREFIX-1..N into the current bucket, switch it, seal it and
# expire its rows (as the clock would): the next retire step folds it
fill_bucket() {	# PREFIX N
	q <<SQL >/dev/null
SELECT count(*) FROM generate_series(0, $2 / 10000 - 1) b,
  LATERAL dedup_claim_batch('h', ARRAY(SELECT '$1-' || (b * 10000 + g) FROM generate_series(1, 10000) g));
UPDATE dedup.buckets SET opened_at = opened_at - interval '7 hours' WHERE state = 'c';
SQL
	q -c "SELECT deleted FROM dedup_cleanup_batch((3::bigint << 32) + 0)" >/dev/null
	q -c "SELECT deleted FROM dedup_cleanup_batch((3::bigint << 32) + 1)" >/dev/null
	q -c "SELECT deleted FROM dedup_cleanup_batch((3::bigint << 32) + 2)" >/dev/null
	q <<'SQL' >/dev/null
DO $$ DECLARE b record; BEGIN
  FOR b IN SELECT relid FROM dedup.buckets WHERE state = 's' LOOP
    EXECUTE format('UPDATE %s SET expires_at = now() - interval ''1 minute''', b.relid);
  END LOOP;
  UPDATE dedup.buckets SET max_expires_at = now() - interval '1 minute' WHERE state = 's';
END $$;
SQL
}
fold() { q -c "SELECT deleted FROM dedup_cleanup_batch((3::bigint << 32) + 3)" >/dev/null; }
seen() {	# PREFIX N: how many of PREFIX-1..N dedup_seen() answers "history"
	q -c "SELECT count(*) FILTER (WHERE dedup_seen('h', '$1-' || g) = 'history') FROM generate_series(1, $2) g"
}
folded() { q -c "SELECT coalesce(sum(keys), 0) FROM dedup.history_generations"; }
# same_answers WHAT VAR=VALUE...: with those PG* variables, dedup_seen answers
# as on the primary for every bucket's keys and for keys never claimed
same_answers() {
	local what=$1 prefix n
	shift
	for prefix in a b c d never; do
		n=100000
		[ "$prefix" = never ] && n=20000
		check "$what answers as the primary for $prefix" \
			"$(export "$@"; seen "$prefix" "$n")" "$(seen "$prefix" "$n")"
	done
}

fill_bucket a 100000
claimed_a=$(q -c "SELECT claims FROM dedup.buckets WHERE state = 's'")
echo "bucket a: $claimed_a of 100000 keys new"
check "the sealed bucket holds the claims" "$claimed_a" 100000

# 1. killed after the fold's transaction folded and before it committed,
# then at a moment of the next fold's run: nothing is folded but by a
# commit, and a fold that committed is whole
psql -X -q -v ON_ERROR_STOP=1 >/dev/null 2>&1 <<'SQL' &
BEGIN;
SELECT deleted FROM dedup_cleanup_batch((3::bigint << 32) + 3);
SELECT pg_sleep(60);
SQL
wait_for "SELECT count(*) FROM pg_stat_activity WHERE query LIKE '%pg_sleep(60)%' AND state = 'active' AND pid <> pg_backend_pid()" 1 60
server_crash "$dir"
wait || true
check "a fold that did not commit folded nothing" "$(folded)" 0
check "its bucket is still sealed and read" "$(q -c "SELECT state FROM dedup.buckets WHERE bucket = 0")" s
check "every key still a duplicate, from the bucket" "$(seen a 100000)" 100000
fold
check "the fold folded each key once" "$(folded)" "$claimed_a"
check "no false negative" "$(seen a 100000)" 100000
q -c "SELECT deleted FROM dedup_cleanup_batch((3::bigint << 32) + 4)" >/dev/null

fill_bucket b 100000
claimed_b=$(q -c "SELECT claims FROM dedup.buckets WHERE state = 's'")
echo "bucket b: $claimed_b of 100000 keys new (the others answered by the history: false positives)"
psql -X -q -c "SELECT deleted FROM dedup_cleanup_batch((3::bigint << 32) + 3)" >/dev/null 2>&1 &
sleep 0.1
server_crash "$dir"
wait || true
echo "killed 0.1 s into the fold of bucket b: $(folded) keys folded, buckets $(q -c "SELECT string_agg(state::text, ' ' ORDER BY bucket) FROM dedup.buckets")"
case $(folded) in
	"$claimed_a") fold ;;
	"$((claimed_a + claimed_b))") ;;
	*) echo "FAIL: a fold folded part of its bucket: $(folded) keys"; exit 1 ;;
esac
check "bucket b folded once" "$(folded)" "$((claimed_a + claimed_b))"

# 2. killed just after a fold committed: crash recovery keeps it
fill_bucket c 100000
claimed_c=$(q -c "SELECT claims FROM dedup.buckets WHERE state = 's'")
fold
server_crash "$dir"
check "after the crash: all three folds" "$(folded)" "$((claimed_a + claimed_b + claimed_c))"
for prefix in a b c; do
	check "after the crash: no false negative in $prefix" "$(seen $prefix 100000)" 100000
done
q -c "SELECT deleted FROM dedup_cleanup_batch((3::bigint << 32) + 4)" >/dev/null
check "the folded buckets are gone" "$(q -c "SELECT count(*) FROM dedup.buckets WHERE state <> 'c'")" 0
check "claims of folded keys are duplicates" \
	"$(q -c "SELECT count(*) FROM generate_series(0, 9) b, LATERAL dedup_claim_batch('h', ARRAY(SELECT 'a-' || (b * 10000 + g) FROM generate_series(1, 10000) g))")" 0
absent_primary=$(seen never 20000)
echo "never-claimed keys answered \"history\" on the primary: $absent_primary of 20000"
[ "$absent_primary" -lt 400 ] || { echo "FAIL: far more false positives than the rate (0.01)"; exit 1; }

# 3. a standby replays a fold and answers as the primary
as_server "$PG_BINDIR/pg_basebackup" -h "$dir" -p "$port" -U postgres -D "$sdir/data" \
	-R -X stream -c fast >"$sdir/basebackup.log" 2>&1 || { cat "$sdir/basebackup.log"; exit 1; }
{
	echo "port = $sport"
	echo "unix_socket_directories = '$sdir'"
} | as_server tee -a "$sdir/data/postgresql.conf" >/dev/null
as_server "$PG_BINDIR/pg_ctl" -D "$sdir/data" -l "$sdir/server.log" -w -t 60 start >/dev/null ||
	{ cat "$sdir/server.log"; exit 1; }
fill_bucket d 100000
fold
want=$(folded)
PGHOST=$sdir PGPORT=$sport wait_for "SELECT coalesce(sum(keys), 0) FROM dedup.history_generations" "$want" 60
same_answers "the standby" PGHOST="$sdir" PGPORT="$sport"
server_stop "$dir"
as_server "$PG_BINDIR/pg_ctl" -D "$sdir/data" -w promote >/dev/null
PGHOST=$sdir PGPORT=$sport wait_for "SELECT pg_is_in_recovery()" f
check "promoted: claims of folded keys are duplicates" \
	"$(PGHOST=$sdir PGPORT=$sport q -c "SELECT count(*) FROM generate_series(0, 9) b, LATERAL dedup_claim_batch('h', ARRAY(SELECT 'd-' || (b * 10000 + g) FROM generate_series(1, 10000) g))")" 0
as_server "$PG_BINDIR/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 start >/dev/null

# 4. pg_dump / pg_restore: the restored history answers as the original
psql -X -q -v ON_ERROR_STOP=1 -c "CREATE DATABASE restored"
as_server "$PG_BINDIR/pg_dump" -h "$dir" -p "$port" -U postgres -Fc -f "$dir/app.dump" app
as_server "$PG_BINDIR/pg_restore" -h "$dir" -p "$port" -U postgres --exit-on-error -d restored "$dir/app.dump"
same_answers "the restored database" PGDATABASE=restored
check "restored: the same generations" \
	"$(PGDATABASE=restored q -c "SELECT string_agg(generation || ':' || keys || ':' || nblocks, ' ' ORDER BY generation) FROM dedup.history_generations")" \
	"$(q -c "SELECT string_agg(generation || ':' || keys || ':' || nblocks, ' ' ORDER BY generation) FROM dedup.history_generations")"
