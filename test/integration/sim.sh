#!/usr/bin/env bash
# Scripted test: the exactly-once simulation (sim/dedup-sim) at a small size
# with every fault on and the postmaster killed with SIGKILL twice, while the
# cleanup worker deletes what expires (ttl 8 s) every second and switches
# the time buckets of dedup.claims every two seconds (after the simulation
# it must have dropped one whose rows had all expired).  Fails on any
# broken invariant (the simulator exits 1 and says which), and checks that
# the server really went through crash recovery twice and that the
# simulation ran long enough for the cleanup to delete expired rows.
# Then a hot-aggregate feed (--aggregates 1: every event of one aggregate,
# checked to reach downstream in commit order).
# Then the partitioned-log mode (--log): producers appending through
# dedup_advance in a strict scope, restarted under new epochs with their
# old instances still sending, consumers crashing and resuming from their
# stored positions, connections killed and the postmaster killed once.
# Each mode is run once more without the dedup it tests, and must fail; the
# first with a dedup window shorter than the redeliveries fails, and with a
# history behind that window holds.
#
# Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.
set -euo pipefail
. "$(dirname "$0")/../../scripts/lib.sh"

test_server sim 60 "dedup.cleanup_databases = 'dedup_sim'" "dedup.cleanup_interval = '1s'" \
	"dedup.bucket_interval = '2s'" "restart_after_crash = off"
q -c "CREATE DATABASE dedup_sim"

crash_command=$(server_crash_command "$dir")
status=0
# the ttl, also the downstream's dedup window, is longer than a relay's
# slowest redelivery of a batch (a relay dead before its ack, its lease of
# 2 s passed, the next take after a postmaster kill): 9.5 s seen on a
# 2-core machine, where a ttl of 8 s let 95 events be applied twice
"$DEDUP_ROOT/sim/dedup-sim" --messages 40000 --consumers 6 --ttl 15 --kill-rate 10 \
	--rollbacks 0.02 --fail 0.02 --hang 0.002 --relay-faults 0.05 --crashes 2 \
	--crash-command "$crash_command" --progress 2 \
	"host=$dir port=$port user=postgres dbname=dedup_sim" | tee "$dir/sim.log" || status=$?
check "simulator exit status" "$status" 0
check "report says exactly once" "$(grep -c '^exactly once: every invariant holds$' "$dir/sim.log")" 1
check "postmaster kills done" "$(grep -c '^  crash [0-9]: server up again' "$dir/sim.log")" 2
recoveries=$(grep -c "automatic recovery in progress" "$dir/server.log" || true)
check "crash recoveries in the server log" "$recoveries" 2
killed=$(sed -n 's/.* \([0-9][0-9]*\) connections killed mid-transaction.*/\1/p' "$dir/sim.log")
[ "${killed:-0}" -gt 0 ] || { echo "FAIL: no connection was killed mid-transaction"; exit 1; }
echo "ok: $killed connections killed mid-transaction"
lost=$(sed -n 's/^  connections lost *\([0-9][0-9]*\) .*/\1/p' "$dir/sim.log")
[ "${lost:-0}" -gt 0 ] || { echo "FAIL: no statement or commit met a lost connection"; exit 1; }
echo "ok: $lost statements or commits met a lost connection, and were redelivered"
# the figures count from the last server start, which a postmaster kill late
# in the run makes recent: rows it saw expire may still be in a bucket that
# retires at the next passes (a ttl after its last claim, then sealed once
# its writers ended)
PGDATABASE=dedup_sim wait_for "SELECT coalesce(sum(rows_deleted), 0) > 0 FROM dedup_cleanup_stats()" t 30 ||
	{ echo "FAIL: the cleanup worker deleted nothing"; exit 1; }
deleted=$(q -d dedup_sim -c "SELECT sum(rows_deleted) FROM dedup_cleanup_stats()")
echo "ok: the cleanup worker deleted $deleted expired rows since the last restart"
# a bucket goes once its rows have expired: a ttl and an interval after it opened
PGDATABASE=dedup_sim wait_for "SELECT max(bucket) - count(*) FILTER (WHERE bucket > 0) > 0 FROM dedup.buckets" t 30 ||
	{ echo "FAIL: no bucket of dedup.claims was dropped"; exit 1; }
dropped=$(q -d dedup_sim -c "SELECT max(bucket) - count(*) FILTER (WHERE bucket > 0) FROM dedup.buckets")
echo "ok: $dropped buckets of dedup.claims were dropped whole, $(q -d dedup_sim -c "SELECT count(*) FROM dedup.buckets") listed at the end"

# A hot-aggregate feed: every payment to one account, every event of one
# aggregate, three relays (two on batches of several events of it, one on
# the 1.0 take), relay deaths and double publishes: every invariant holds,
# the events of the aggregate first reaching downstream in commit order
status=0
"$DEDUP_ROOT/sim/dedup-sim" --messages 6000 --consumers 4 --aggregates 1 --relays 3 --ttl 30 \
	--relay-faults 0.05 "host=$dir port=$port user=postgres dbname=dedup_sim" >"$dir/sim-hot.log" || status=$?
tail -n 20 "$dir/sim-hot.log"
check "hot aggregate: simulator exit status" "$status" 0
check "hot aggregate: in commit order downstream" \
	"$(grep -c '^  events of an aggregate first delivered downstream out of commit order  *0  *0  ok$' "$dir/sim-hot.log")" 1

# The checks can fail: with a dedup window (ttl 1 s) shorter than the time
# over which copies arrive (anywhere in a feed of about 3 s), late copies
# are applied again, and the simulator must say so and exit 1.
status=0
"$DEDUP_ROOT/sim/dedup-sim" --messages 15000 --consumers 4 --window 0 --ttl 1 --no-faults \
	--progress 10 "host=$dir port=$port user=postgres dbname=dedup_sim" >"$dir/sim-short.log" || status=$?
tail -n 25 "$dir/sim-short.log"
check "exit status with a window shorter than the redeliveries" "$status" 1
grep -q '^  messages applied more than once .*FAILED$' "$dir/sim-short.log" ||
	{ echo "FAIL: the double effects were not reported"; exit 1; }
echo "ok: double effects past the dedup window are reported"

# the same short window with a history of an hour behind it: the late copies
# are caught (by expired claims, then by the buckets' folds into the
# history), every invariant holds but for the history's false positives,
# which are counted and left out of what must be applied
status=0
"$DEDUP_ROOT/sim/dedup-sim" --messages 15000 --consumers 4 --window 0 --ttl 1 --no-faults \
	--records 0 --history 3600 --progress 10 \
	"host=$dir port=$port user=postgres dbname=dedup_sim" >"$dir/sim-history.log" || status=$?
grep -A 2 '^  history ' "$dir/sim-history.log"
tail -n 25 "$dir/sim-history.log"
check "exit status with a history behind a short window" "$status" 0
caught=$(sed -n 's/^  history *\([0-9][0-9]*\) duplicates answered by the history.*/\1/p' "$dir/sim-history.log")
[ "${caught:-0}" -gt 0 ] || { echo "FAIL: the history caught no late copy"; exit 1; }
echo "ok: the history caught $caught late copies"
# a bucket is folded when it retires: a ttl after its last claim, once
# sealed, at the next pass; the run may end a pass or two before the first
# (seen: a bucket sealed, every row expired a second before the run ended)
PGDATABASE=dedup_sim wait_for "SELECT coalesce(sum(keys), 0) > 0 FROM dedup.history_generations" t 30 ||
	{ echo "FAIL: no bucket of the run was folded into the history"; exit 1; }
folded=$(q -d dedup_sim -c "SELECT coalesce(sum(keys), 0) FROM dedup.history_generations")
echo "ok: $folded claims of the run folded into the history"

status=0
"$DEDUP_ROOT/sim/dedup-sim" --log --messages 40000 --partitions 8 --consumers 4 --kill-rate 20 \
	--rollbacks 0.02 --crashes 1 --crash-command "$crash_command" \
	"host=$dir port=$port user=postgres dbname=dedup_sim" | tee "$dir/sim-log.log" || status=$?
check "partitioned log: simulator exit status" "$status" 0
check "partitioned log: report says exactly once" "$(grep -c '^exactly once: every message appended once and applied once' "$dir/sim-log.log")" 1
check "partitioned log: every invariant ok" "$(grep -c '^  ok  ' "$dir/sim-log.log")" 8
fenced=$(sed -n 's/.* \([0-9][0-9]*\) sends of the old instances fenced.*/\1/p' "$dir/sim-log.log")
check "partitioned log: every zombie send fenced (5 a partition)" "$fenced" 40
check "partitioned log: one stream row a partition and scope" \
	"$(grep -c '^  storage *dedup.streams rows: 8 (broker) + 8 (consumers), for 40000 messages$' "$dir/sim-log.log")" 1

status=0
"$DEDUP_ROOT/sim/dedup-sim" --log --unguarded --messages 8000 --partitions 4 --consumers 2 \
	--rollbacks 0.02 --no-faults "host=$dir port=$port user=postgres dbname=dedup_sim" \
	>"$dir/sim-log-unguarded.log" || status=$?
tail -n 12 "$dir/sim-log-unguarded.log"
check "partitioned log without dedup_advance: exit status" "$status" 1
grep -q '^  FAIL none twice' "$dir/sim-log-unguarded.log" ||
	{ echo "FAIL: the double appends were not reported"; exit 1; }
echo "ok: without dedup_advance the double appends and effects are reported"
