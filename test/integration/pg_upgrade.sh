#!/usr/bin/env bash
# Scripted test: pg_upgrade from PostgreSQL 15 (the host's, whose pg_config
# is on PATH) to 17 (in the Debian trixie chroot of scripts/matrix.sh), with
# dedup installed in both (this tree, built for 17 in the chroot).  A 15
# cluster is filled with every kind of dedup row (test/fixture.sh: claims of
# three key types, records processing, complete and released, outbox events
# pending, in flight, retried and dead), claims in several time buckets, a
# history with two generations (one sealed, whose slice ended), sequence
# marks, and a relay's batches of another topic: one acked, one nacked (in
# retry), one handed out at the upgrade; and expired claims the cleanup has
# not deleted yet (dedup.cleanup_enabled off).  Then pg_upgrade to 17, and:
#   - every dedup table holds what it held (test/fixture/snapshot.sql) and
#     the history's blocks are byte-exact;
#   - every claimed key is a duplicate, in each bucket; the history answers
#     each key as before ('history' for the folded keys, the same answer
#     for 2,000 keys never claimed); records replay byte-exact; marks kept;
#   - the relay hands out exactly the events not yet acked, each once, each
#     aggregate's in the order they were put (the batch handed out at the
#     upgrade again after its lease);
#   - the background worker runs in the 17 cluster: its pass deletes the
#     expired claims and is counted by dedup_cleanup_stats.
# Why this way: the 17 binaries need trixie's libraries and the 15 ones
# bookworm's, and pg_upgrade wants both bin directories in one view of the
# file system.  So pg_upgrade runs in the chroot, with a copy of the 15
# installation (its bin, lib and share directories, dedup included, under
# /opt/dedup-pg15, where PostgreSQL's relocatable paths find each other),
# plus the few bookworm libraries trixie lacks (by soname, on
# LD_LIBRARY_PATH; none is one 17 uses).  A copy, not a bind mount: no mount
# left behind in the shared chroot if the test dies, and the chroot's Debian
# PostgreSQL (/usr/lib/postgresql) is not touched.  The 15 cluster is made
# and filled on the host, in a directory inside the chroot, and handed to
# the chroot's postgres user (its uid differs from the host's).
# The chroot is made when missing (scripts/matrix.sh, about 5 minutes).
#
# Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.
set -euo pipefail
# a command that fails under set -e says where, rather than ending the log empty
trap 'echo "FAIL: pg_upgrade.sh stopped at line $LINENO (status $?)"' ERR
. "$(dirname "$0")/../../scripts/lib.sh"
. "$DEDUP_ROOT/scripts/matrix.sh"
. "$DEDUP_ROOT/test/fixture.sh"

new_major=17
old_major=$(pg_config --version | sed -n 's/^PostgreSQL \([0-9]*\).*/\1/p')
[ "$old_major" = 15 ] || { echo "FAIL: pg_config is PostgreSQL $old_major, not 15"; exit 1; }
root=$(matrix_chroot "$new_major") || { echo "FAIL: no chroot for PostgreSQL $new_major"; exit 1; }
t0=$SECONDS

# the 15 installation, relocated into the chroot: bindir, pkglibdir and
# sharedir keep their places relative to each other
old_bindir=$(pg_config --bindir)
prefix=${old_bindir%/usr/lib/postgresql/15/bin}
[ "$prefix/usr/lib/postgresql/15/bin" = "$old_bindir" ] &&
	[ "$(pg_config --sharedir)" = "$prefix/usr/share/postgresql/15" ] &&
	[ "$(pg_config --pkglibdir)" = "$prefix/usr/lib/postgresql/15/lib" ] ||
	{ echo "FAIL: the PostgreSQL 15 of pg_config is not laid out as Debian's"; exit 1; }
[ -f "$(pg_config --pkglibdir)/dedup.so" ] || { echo "FAIL: dedup is not installed in PostgreSQL 15"; exit 1; }
pg15=/opt/dedup-pg15
rm -rf "${root:?}$pg15"
mkdir -p "$root$pg15/usr/lib/postgresql" "$root$pg15/usr/share/postgresql" "$root$pg15/hostlib"
cp -a "$prefix/usr/lib/postgresql/15" "$root$pg15/usr/lib/postgresql/"
cp -a "$prefix/usr/share/postgresql/15" "$root$pg15/usr/share/postgresql/"
# the libraries the 15 binaries pg_upgrade runs (and dedup, PL/pgSQL) need that trixie lacks
for _ in 1 2 3; do
	missing=$(matrix_in "$root" env LD_LIBRARY_PATH="$pg15/hostlib" sh -c \
		"cd $pg15/usr/lib/postgresql/15 && ldd bin/postgres bin/pg_ctl bin/pg_controldata lib/dedup.so lib/plpgsql.so $pg15/hostlib/* 2>/dev/null; true" |
		awk '/not found/ {print $1}' | sort -u || true)
	[ -n "$missing" ] || break
	for so in $missing; do
		# (awk reads to the end: an early exit would end ldconfig with
		# SIGPIPE, which pipefail and set -e take for a failure)
		path=$(ldconfig -p | awk -v so="$so" '$1 == so && /x86-64/ && p == "" {p = $NF} END {print p}')
		[ -n "$path" ] || { echo "FAIL: $so, which PostgreSQL 15 needs, is not on the host"; exit 1; }
		cp -L "$path" "$root$pg15/hostlib/$so"
	done
done
check "the 15 binaries run in the chroot" \
	"$(matrix_in "$root" env LD_LIBRARY_PATH="$pg15/hostlib" "$pg15/usr/lib/postgresql/15/bin/postgres" -V)" \
	"$("$old_bindir/postgres" -V)"

# dedup of this tree, built for 17 and installed in the chroot (the build
# directory is kept there: a later run compiles only what changed)
build=/build/dedup-pg-upgrade
mkdir -p "$root$build"
(cd "$DEDUP_ROOT" && git ls-files -z --cached --others --exclude-standard |
	tar --null -T - -cf - 2>/dev/null) | tar -xf - -C "$root$build"
matrix_in "$root" sh -c "cd $build && make -s -j2 >/dev/null && make -s install >/dev/null" ||
	{ echo "FAIL: dedup does not build for PostgreSQL $new_major in the chroot"; exit 1; }
echo "the 15 installation copied into the chroot, dedup built for $new_major there: $((SECONDS - t0))s"

# the 15 cluster, on the host, in a directory inside the chroot
port=$(( ${DEDUP_TEST_PORT:-54391} + 90 ))
top=$(mktemp -d "$root/tmp/dedup-pgup.XXXXXX")
in=${top#"$root"}	# its path in the chroot
chmod 755 "$top"
old=$top/old
trap 'server_stop "$old"; matrix_in "$root" runuser -u postgres -- /usr/lib/postgresql/$new_major/bin/pg_ctl \
	-D "$in/new/data" -m fast -w stop >/dev/null 2>&1 || true; [ -n "${premounted-1}" ] || matrix_umount "$root";
	[ -n "${KEEP:-}" ] || rm -rf "$top" "${root:?}$pg15"' EXIT
server_start "$old" "$port" "shared_preload_libraries = 'dedup'" "dedup.cleanup_enabled = off" \
	"dedup.cleanup_interval = 1"
export PGHOST=$old PGPORT=$port PGUSER=postgres PGDATABASE=postgres
q -c "CREATE EXTENSION dedup" -c "CALL dedup_cleanup()" >/dev/null	# (a pass lists bucket 0)
# a fold: the current bucket aged, so that a pass seals it; its rows expired,
# so that the next pass retires it, folding its claims into the history
# (a second pass seals the bucket if the first only closed it)
cat >"$top/fold.sql" <<'SQL'
UPDATE dedup.buckets SET opened_at = opened_at - interval '7 hours' WHERE state = 'c';
CALL dedup_cleanup();
CALL dedup_cleanup();
DO $$
DECLARE b record;
BEGIN
  FOR b IN SELECT relid FROM dedup.buckets WHERE state = 's' LOOP
    EXECUTE format('UPDATE ONLY %s SET expires_at = clock_timestamp() - interval ''10 minutes''', b.relid);
  END LOOP;
  UPDATE dedup.buckets SET max_expires_at = clock_timestamp() - interval '10 minutes' WHERE state = 's';
END $$;
CALL dedup_cleanup();
SQL
sed "s|FOLD|$top/fold.sql|" <<'SQL' | q >/dev/null
-- a history: two folds, the first generation sealed (its slice ended) before the second
SELECT scope FROM dedup_set_scope('h', ttl => '1 hour', history => '1 day');
SELECT count(*) FROM dedup_claim_batch('h', ARRAY(SELECT 'k' || g FROM generate_series(1, 1000) g));
\i FOLD
UPDATE dedup.history_generations SET slice_end = clock_timestamp() - interval '1 minute';
SELECT count(*) FROM dedup_claim_batch('h', ARRAY(SELECT 'n' || g FROM generate_series(1, 200) g));
\i FOLD
-- (first the history, whose folds expire every row of the sealed buckets)
-- claims in three buckets: each bucket closed (aged), the next opened
SELECT count(*) FROM dedup_claim_batch('buckets', ARRAY(SELECT 'b1-' || g FROM generate_series(1, 300) g));
UPDATE dedup.buckets SET opened_at = opened_at - interval '7 hours' WHERE state = 'c';
CALL dedup_cleanup();
SELECT count(*) FROM dedup_claim_batch('buckets', ARRAY(SELECT 'b2-' || g FROM generate_series(1, 300) g));
UPDATE dedup.buckets SET opened_at = opened_at - interval '7 hours' WHERE state = 'c';
CALL dedup_cleanup();
SELECT count(*) FROM dedup_claim_batch('buckets', ARRAY(SELECT 'b3-' || g FROM generate_series(1, 300) g));
SQL
fixture_fill postgres
q <<'SQL' >/dev/null
-- sequence marks, one of them under a producer epoch
SELECT dedup_advance('marks', 'stream-' || g, g * 10) FROM generate_series(1, 5) g;
SELECT dedup_new_epoch('marks', 'epoch-stream');
SELECT dedup_advance('marks', 'epoch-stream', 7, epoch => 1);
-- claims expired, left for the cleanup (off here)
SELECT count(*) FROM dedup_claim_batch('gone', ARRAY(SELECT 'x' || g FROM generate_series(1, 50) g));
UPDATE dedup.claims SET expires_at = clock_timestamp() - interval '1 minute'
WHERE key IN (SELECT dedup_key('gone', 'x' || g) FROM generate_series(1, 50) g);
-- a relay's topic: 24 events of 4 aggregates, a batch acked, one nacked
-- (back in retry), one handed out at the upgrade (lease 3 seconds)
SELECT count(dedup_outbox_put('relay', 'r-' || g, jsonb_build_object('n', g), aggregate_id => 'agg-' || g % 4))
FROM generate_series(1, 24) g;
CREATE TEMP TABLE b AS SELECT DISTINCT batch_id FROM dedup_outbox_take_batch('relay', 6);
SELECT dedup_outbox_ack_batch(batch_id) FROM b;
TRUNCATE b;
INSERT INTO b SELECT DISTINCT batch_id FROM dedup_outbox_take_batch('relay', 5);
SELECT dedup_outbox_nack_batch(batch_id, '0 seconds', 'try again') FROM b;
SELECT count(*) FROM dedup_outbox_take_batch('relay', 4, lease => '3 seconds');
SQL
buckets_of="SELECT count(DISTINCT tableoid) || ' ' || count(*) FROM dedup.claims WHERE key IN (SELECT dedup_key('buckets', b || '-' || g) FROM generate_series(1, 300) g, unnest(ARRAY['b1', 'b2', 'b3']) b)"
check "before: the 900 claims of scope buckets in three buckets" "$(q -c "$buckets_of")" "3 900"
check "before: two history generations, the first sealed" \
	"$(q -c "SELECT count(*), count(*) FILTER (WHERE slice_end < clock_timestamp()) FROM dedup.history_generations")" "2|1"
check "before: the relay's topic, 4 in flight, 14 pending (5 of them nacked)" \
	"$(q -c "SELECT pending, in_flight, dead FROM dedup_outbox_stats('relay')")" "14|4|0"
check "before: 50 expired claims" \
	"$(q -c "SELECT count(*) FROM dedup.claims WHERE expires_at < clock_timestamp()")" 50

# what is compared after: every table, the history's blocks, the history's answers
history_answers="SELECT (SELECT count(*) FROM generate_series(1, 1000) g WHERE dedup_seen('h', 'k' || g) = 'history')
                 || '/' || (SELECT count(*) FROM generate_series(1, 200) g WHERE dedup_seen('h', 'n' || g) = 'history')
                 || '/' || (SELECT md5(string_agg(dedup_seen('h', 'never-' || g)::text, ',' ORDER BY g)) FROM generate_series(1, 2000) g)"
blocks="SELECT count(*) || ' ' || md5(string_agg(b::text, '|' ORDER BY b::text)) FROM dedup.history_blocks b"
history_list="SELECT string_agg(concat_ws(' ', opened_at, slice_end, expires_at, false_positive_rate, k, capacity, keys, bytes), '; ' ORDER BY generation) FROM dedup_history('h')"
snapshot_before=$(fixture_snapshot postgres)
answers_before=$(q -c "$history_answers")
blocks_before=$(q -c "$blocks")
list_before=$(q -c "$history_list")
marks_before=$(q -c "SELECT string_agg(s || ':' || (SELECT mark || '/' || coalesce(epoch::text, '-') FROM dedup_position('marks', s)), ',' ORDER BY s)
                     FROM unnest(ARRAY['stream-1', 'stream-2', 'stream-3', 'stream-4', 'stream-5', 'epoch-stream']) s")
server_stop "$old"
chown -R "$(matrix_in "$root" id -u postgres):$(matrix_in "$root" id -g postgres)" "$top"

# pg_upgrade, in the chroot
# /proc and /dev/shm, unmounted at the end only when this script mounted them
mountpoint -q "$root/proc" && premounted=1 || premounted=
matrix_mount "$root"
pgup() { matrix_in "$root" env LD_LIBRARY_PATH="$pg15/hostlib" runuser -u postgres -- "$@"; }
pgup /usr/lib/postgresql/$new_major/bin/initdb -D "$in/new/data" -U postgres --no-sync -E UTF8 \
	--locale=C.UTF-8 >"$top/initdb-new.log" 2>&1 || { cat "$top/initdb-new.log"; exit 1; }
t1=$SECONDS
if ! pgup sh -c "cd $in && /usr/lib/postgresql/$new_major/bin/pg_upgrade --no-sync \
	-b $pg15/usr/lib/postgresql/15/bin -B /usr/lib/postgresql/$new_major/bin \
	-d $in/old/data -D $in/new/data -p $port -P $((port + 1))" >"$top/pg_upgrade.log" 2>&1; then
	echo "FAIL: pg_upgrade"
	tail -n 30 "$top/pg_upgrade.log"
	find "$top/new/data/pg_upgrade_output.d" -name '*.txt' -exec sh -c 'echo "-- $1"; cat "$1"' _ {} \; 2>/dev/null | head -n 40
	exit 1
fi
echo "pg_upgrade itself: $((SECONDS - t1))s"
{
	echo "port = $((port + 1))"
	echo "listen_addresses = ''"
	echo "unix_socket_directories = '$in/new'"
	echo "shared_preload_libraries = 'dedup'"
	echo "dedup.cleanup_interval = 1"
	echo "dedup.cleanup_enabled = off"	# on once the tables are compared
	echo "fsync = off"
} >>"$top/new/data/postgresql.conf"
pgup /usr/lib/postgresql/$new_major/bin/pg_ctl -D "$in/new/data" -l "$in/new/server.log" -w -t 60 start >/dev/null ||
	{ cat "$top/new/server.log"; exit 1; }
export PGHOST=$top/new PGPORT=$((port + 1))

check "after: PostgreSQL $new_major, dedup $(q -c "SELECT default_version FROM pg_available_extensions WHERE name = 'dedup'")" \
	"$(q -c "SELECT current_setting('server_version_num')::int / 10000")|$(q -c "SELECT extversion FROM pg_extension WHERE extname = 'dedup'")" \
	"$new_major|$(q -c "SELECT default_version FROM pg_available_extensions WHERE name = 'dedup'")"
check "after: every dedup table holds what it held" "$(fixture_snapshot postgres)" "$snapshot_before"
check "after: the history's blocks are byte-exact, its generations the same" \
	"$(q -c "$blocks")|$(q -c "$history_list")" "$blocks_before|$list_before"
check "after: the history answers as before (1000 and 200 folded keys 'history', the same for 2000 never claimed)" \
	"$(q -c "$history_answers")" "$answers_before"
check "...which was: every folded key a duplicate" "${answers_before%/*}" "1000/200"
check "after: the claims of scope buckets still in their three buckets" "$(q -c "$buckets_of")" "3 900"
check "after: every claim of the three buckets is a duplicate" \
	"$(q -c "SELECT count(*) FROM dedup_claim_batch('buckets', ARRAY(SELECT b || '-' || g FROM generate_series(1, 300) g, unnest(ARRAY['b1', 'b2', 'b3']) b))")|$(q -c "SELECT count(*) FROM generate_series(1, 300) g WHERE dedup_claim('buckets', 'b2-' || g)")" \
	"0|0"
check "after: the marks are kept" \
	"$(q -c "SELECT string_agg(s || ':' || (SELECT mark || '/' || coalesce(epoch::text, '-') FROM dedup_position('marks', s)), ',' ORDER BY s)
	         FROM unnest(ARRAY['stream-1', 'stream-2', 'stream-3', 'stream-4', 'stream-5', 'epoch-stream']) s")|$(q -c "SELECT dedup_advance('marks', 'stream-3', 30)")|$(q -c "SELECT dedup_advance('marks', 'stream-3', 31)")" \
	"$marks_before|f|t"
check "...which were" "$marks_before" "epoch-stream:7/1,stream-1:10/-,stream-2:20/-,stream-3:30/-,stream-4:40/-,stream-5:50/-"
# the relay: after the lease of the batch handed out at the upgrade, a relay
# drains the topic; each event once, each aggregate's in the order put
sleep 3.5
q <<'SQL' >/dev/null
CREATE TABLE drained (n serial, event int, agg text);
DO $$
DECLARE got int;
BEGIN
  LOOP
    CREATE TEMP TABLE cur ON COMMIT DROP AS SELECT * FROM dedup_outbox_take_batch('relay', 5);
    GET DIAGNOSTICS got = ROW_COUNT;
    EXIT WHEN got = 0;
    INSERT INTO drained (event, agg) SELECT (payload->>'n')::int, aggregateid FROM cur ORDER BY created_at, id;
    PERFORM dedup_outbox_ack_batch(batch_id) FROM (SELECT DISTINCT batch_id FROM cur) x;
    DROP TABLE cur;
  END LOOP;
END $$;
SQL
check "after: the relay hands out exactly the 18 events not acked (7 to 24; 1 to 6 were), each once" \
	"$(q -c "SELECT count(*), count(DISTINCT event), string_agg(event::text, ',' ORDER BY event) FROM drained")" \
	"18|18|$(seq -s, 7 24)"
check "after: each aggregate's events in the order put; none left" \
	"$(q -c "SELECT count(*) FROM drained a JOIN drained b ON a.agg = b.agg AND a.n < b.n AND a.event > b.event")|$(q -c "SELECT coalesce(sum(pending + in_flight + dead), 0) FROM dedup_outbox_stats('relay')")" \
	"0|0"
fixture_check postgres
# the worker: its pass deletes the expired claims, counted
q -c "ALTER SYSTEM SET dedup.cleanup_enabled = on" -c "SELECT pg_reload_conf()" >/dev/null
for _ in $(seq 1 60); do
	[ "$(q -c "SELECT count(*) FROM dedup.claims WHERE expires_at < clock_timestamp()")" = 0 ] && break
	sleep 0.5
done
check "after: the background worker runs: the 50 expired claims deleted, its passes counted" \
	"$(q -c "SELECT count(*) FROM dedup.claims WHERE expires_at < clock_timestamp()")|$(q -c "SELECT sum(rows_deleted) >= 50, max(last_pass_started_at) > pg_postmaster_start_time() FROM dedup_cleanup_stats() WHERE kind = 'claim'")" \
	"0|t|t"
echo "pg_upgrade test: $((SECONDS - t0))s"
