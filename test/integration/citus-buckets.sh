#!/usr/bin/env bash
# Scripted test: the time buckets of dedup.claims on a Citus cluster (a
# coordinator and two workers on this machine), driven by the coordinator's
# cleanup (bucket.c, dedup.bucket_cluster_step):
#   - each bucket a table distributed by key, co-located with dedup.claims
#     (same colocation group, same shard count), created and dropped once,
#     on the coordinator, through Citus's DDL; each node's list of them in
#     step with the coordinator's;
#   - a key claimed in one bucket is a duplicate from every node in the
#     buckets that follow, until it expires;
#   - expired claims go with their bucket's drop: no row deleted on any
#     worker, no dead tuple; the WAL of the drops, summed over the nodes,
#     per expired key (20,000 keys; the bench's Citus stage does 1,000,000);
#   - a worker that cannot be reached holds the switch back (the current
#     bucket takes the claims meanwhile), and it goes on once it is back;
#     a duplicate stays a duplicate throughout.
#
# Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.
set -euo pipefail
. "$(dirname "$0")/../../scripts/lib.sh"
. "$(dirname "$0")/lib/citus-cluster.sh"

citus_conf=("shared_preload_libraries = 'citus, dedup'" "wal_level = logical"
	"max_prepared_transactions = 20" "dedup.cleanup_enabled = off"
	"dedup.bucket_interval = '1s'" "listen_addresses = 'localhost'"
	"citus.recover_2pc_interval = '1s'" "autovacuum = off")
citus_cluster citus-buckets 83 "${citus_conf[@]}"
everywhere() {	# everywhere SQL: its result on the coordinator and each worker, joined by |
	echo "$(q -c "$1")|$(worker 1 -c "$1")|$(worker 2 -c "$1")"
}
pass() { q -c "CALL dedup_cleanup()" >/dev/null; }
passes() {	# passes N: N passes of the coordinator's cleanup, a bucket interval apart
	local i
	for i in $(seq 1 "$1"); do pass; sleep 1.1; done
}

q -c "CREATE EXTENSION dedup" >/dev/null
q -c "SET client_min_messages = warning" -c "SELECT dedup_distribute(8)" >/dev/null

# 1. keys claimed in bucket 0 (dedup.claims), then buckets opened and switched
q -c "SELECT count(*) FROM dedup_claim_batch('long', ARRAY(SELECT 'a-' || g FROM generate_series(1, 500) g), ttl => '1 hour')" >/dev/null
passes 3
current=$(q -c "SELECT bucket FROM dedup.buckets WHERE state = 'c'")
check "a bucket other than dedup.claims is current, on every node alike" \
	"$([ "$current" -gt 0 ] && echo yes)|$(everywhere "SELECT bucket FROM dedup.buckets WHERE state = 'c'")" \
	"yes|$current|$current|$current"
check "each bucket is distributed by key, co-located with dedup.claims, as many shards" \
	"$(q -c "SELECT count(*) FILTER (WHERE p.colocationid <> c.colocationid OR p.partmethod <> 'h'
	                                    OR (SELECT count(*) FROM pg_dist_shard s WHERE s.logicalrelid = p.logicalrelid) <> 8)
	         FROM pg_dist_partition p, pg_dist_partition c
	         WHERE c.logicalrelid = 'dedup.claims'::regclass AND p.logicalrelid::text ~ '^dedup\\.claims_[0-9]+\$'")|$(q -c "SELECT count(*) FROM pg_dist_partition WHERE logicalrelid::text = 'dedup.claims_$current'")" \
	"0|1"
check "each key's shard of the current bucket is on the node of its shard of dedup.claims" \
	"$(q -c "SELECT count(*) FROM generate_series(1, 200) g,
	           LATERAL (SELECT get_shard_id_for_distribution_column('dedup.claims', dedup_key('x', 'k' || g)) a,
	                           get_shard_id_for_distribution_column('dedup.claims_$current', dedup_key('x', 'k' || g)) b) s
	         WHERE (SELECT groupid FROM pg_dist_placement WHERE shardid = a) <> (SELECT groupid FROM pg_dist_placement WHERE shardid = b)")" 0
q -c "SELECT count(*) FROM dedup_claim_batch('long', ARRAY(SELECT 'b-' || g FROM generate_series(1, 500) g), ttl => '1 hour')" >/dev/null
check "new claims go into the current bucket's shards on the workers" \
	"$(q -c "SELECT count(*) FROM dedup.claims_$current")" 500
passes 3
check "keys of older buckets are duplicates from the coordinator and from each worker" \
	"$(everywhere "SELECT count(*) FROM generate_series(1, 500) g WHERE dedup_claim('long', 'a-' || g) OR dedup_claim('long', 'b-' || g)")" \
	"0|0|0"
check "a sealed bucket's latest expiry, read across its shards" \
	"$(q -c "SELECT max_expires_at > now() + interval '50 minutes' AND claims = 500 FROM dedup.buckets WHERE bucket = $current")" t

# 2. expiry by drops: 20,000 keys of a 3 s ttl; no row deleted, no dead tuple
q -c "SELECT count(*) FROM dedup_claim_batch('short', ARRAY(SELECT 'c-' || g FROM generate_series(1, 20000) g), ttl => '3 s')" >/dev/null
short_bucket=$(q -c "SELECT bucket FROM dedup.buckets WHERE state = 'c'")
passes 2
wal_before=()
for n in 0 1 2; do
	if [ "$n" = 0 ]; then wal_before[n]=$(q -c "SELECT pg_current_wal_lsn()"); else wal_before[n]=$(worker "$n" -c "SELECT pg_current_wal_lsn()"); fi
done
sleep 2
passes 4
wal=0
for n in 0 1 2; do
	if [ "$n" = 0 ]; then
		d=$(q -c "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '${wal_before[n]}')")
	else
		d=$(worker "$n" -c "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '${wal_before[n]}')")
	fi
	wal=$((wal + ${d%.*}))
done
check "the bucket of the short claims dropped, on every node" \
	"$(q -c "SELECT count(*) FROM pg_dist_partition WHERE logicalrelid::text = 'dedup.claims_$short_bucket'")|$(everywhere "SELECT count(*) FROM dedup.buckets WHERE bucket = $short_bucket")" \
	"0|0|0|0"
check "no row deleted on the workers, no dead tuple" \
	"$(worker 1 -c "SELECT coalesce(sum(n_tup_del + n_dead_tup), 0) FROM pg_stat_user_tables WHERE schemaname = 'dedup' AND relname ~ '^claims_'")|$(worker 2 -c "SELECT coalesce(sum(n_tup_del + n_dead_tup), 0) FROM pg_stat_user_tables WHERE schemaname = 'dedup' AND relname ~ '^claims_'")" \
	"0|0"
echo "   WAL of the passes that dropped 20,000 expired keys, summed over the nodes: $((wal / 20000)) B a key"
check "the expired keys are new again; the long ones still duplicates" \
	"$(q -c "SELECT count(*) FROM dedup_claim_batch('short', ARRAY(SELECT 'c-' || g FROM generate_series(1, 20000) g), ttl => '1 hour')")|$(q -c "SELECT count(*) FROM generate_series(1, 500) g WHERE dedup_claim('long', 'a-' || g) OR dedup_claim('long', 'b-' || g)")" \
	"20000|0"

# 3. a worker down: the switch waits for it, nothing is lost; it goes on after
before=$(q -c "SELECT bucket FROM dedup.buckets WHERE state = 'c'")
server_stop "${wdirs[1]}" >/dev/null 2>&1
passes 3
check "with a worker down, the current bucket stays current on the coordinator and the other worker" \
	"$(q -c "SELECT bucket FROM dedup.buckets WHERE state = 'c'")|$(worker 1 -c "SELECT bucket FROM dedup.buckets WHERE state = 'c'")" \
	"$before|$before"
server_restart_keep() { as_server "$PG_BINDIR/pg_ctl" -D "$1/data" -l "$1/server.log" -w start >/dev/null; }
server_restart_keep "${wdirs[1]}"
passes 4
after=$(q -c "SELECT bucket FROM dedup.buckets WHERE state = 'c'")
check "once it is back, the buckets switch on every node" \
	"$([ "$after" -gt "$before" ] && echo yes)|$(everywhere "SELECT bucket FROM dedup.buckets WHERE state = 'c'")" \
	"yes|$after|$after|$after"
check "every claim still a duplicate, from every node" \
	"$(everywhere "SELECT count(*) FROM generate_series(1, 500) g WHERE dedup_claim('long', 'a-' || g) OR dedup_claim('long', 'b-' || g)")|$(q -c "SELECT count(*) FROM dedup_claim_batch('short', ARRAY(SELECT 'c-' || g FROM generate_series(1, 20000) g), ttl => '1 hour')")" \
	"0|0|0|0"
