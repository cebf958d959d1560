/*-------------------------------------------------------------------------
 *
 * shards.h
 *	  dedup on a Citus cluster (shards.c): which shard, on which node, holds
 *	  a key of a distributed table; the shard's relations here; the local
 *	  shards a cleanup cleans; the outbox's partitions, one a shard.
 *
 * Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.
 *-------------------------------------------------------------------------
 */
#ifndef DEDUP_SHARDS_H
#define DEDUP_SHARDS_H

#include "storage/lockdefs.h"
#include "utils/relcache.h"

#include "catalog.h"
#include "compat.h"
#include "fingerprint.h"

/* Where a key's shard is: its node (group) and shard, and whether that is here */
typedef struct DedupShardPlace
{
	int32		group;
	int64		shardid;
	bool		local;
} DedupShardPlace;

extern uint64 dedup_shards_generation(void);
extern void dedup_shards_place(DedupRelation table, const DedupFingerprint *fp,
							   DedupShardPlace *place);
pg_noreturn extern void dedup_shards_not_here(DedupRelation table, int64 shardid);
extern bool dedup_shards_is_local(DedupRelation table, const DedupFingerprint *fp);
extern void dedup_shards_range(DedupRelation table, const DedupFingerprint *fp, int64 *shardid,
							   int32 *min, int32 *max);
extern void dedup_shards_lock_key(DedupRelation table, const DedupFingerprint *fp);
extern void dedup_shards_lock_remote(DedupRelation table, const DedupFingerprint *fp);
extern void dedup_shards_shard_open(DedupRelation table, const DedupFingerprint *fp,
									LOCKMODE lockmode, Relation *heap, Relation *index);

/* at most this many local shards of one table are cleaned */
#define DEDUP_CLUSTER_MAX_LOCAL_SHARDS 4096
extern int	dedup_shards_local_shards(DedupRelation table, Oid *heaps, int max);

/* the time buckets of dedup.claims on a cluster: their shards here */
extern bool dedup_shards_bucket_shard(Oid shell, const char *relname, const DedupFingerprint *fp,
									  Oid *heap, Oid *index);
extern int	dedup_shards_bucket_local_shards(Oid shell, const char *relname, Oid *heaps,
											 Oid *indexes, int max);

/* the outbox's partitions (one a shard of dedup.claims), each named by a part */
#define DEDUP_OUTBOX_MAX_PARTITION 65535	/* a batch's id has room for no
											 * more */
extern void dedup_shards_outbox_part(uint32 n, DedupFingerprint *part);
extern void dedup_shards_partition(const DedupFingerprint *afp, DedupFingerprint *part);
extern int	dedup_shards_partitions(DedupFingerprint **parts, bool **local);

#endif							/* DEDUP_SHARDS_H */
