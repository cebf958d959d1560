/*-------------------------------------------------------------------------
 *
 * cluster.h
 *	  dedup on a Citus cluster (cluster.c): which shard, on which node, holds
 *	  a key; calls forwarded to that node; the local shards a cleanup cleans.
 *
 * Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.
 *-------------------------------------------------------------------------
 */
#ifndef DEDUP_CLUSTER_H
#define DEDUP_CLUSTER_H

#include "fmgr.h"
#include "nodes/execnodes.h"
#include "nodes/pg_list.h"
#include "utils/array.h"

#include "dedup.h"

/* How a routed call names its key: a key argument, or a stream argument */
typedef enum DedupRouteKey
{
	DEDUP_ROUTE_KEY,			/* fingerprint of (scope, key argument) */
	DEDUP_ROUTE_STREAM			/* fingerprint of (scope, stream argument) */
} DedupRouteKey;

/* Citus's kind of one of dedup's relations, from pg_dist_partition */
typedef enum DedupCitusKind
{
	DEDUP_CITUS_NONE,			/* not Citus's: a table of this node */
	DEDUP_CITUS_HASH,			/* distributed by hash of its key */
	DEDUP_CITUS_SINGLE			/* one shard: a reference or Citus local table */
} DedupCitusKind;

extern DedupCitusKind dedup_cluster_kind(Oid relid);
extern Oid	dedup_cluster_single_shard(Oid relid, const char *relname, bool *local);
extern void dedup_cluster_reset(void);
extern uint64 dedup_cluster_generation(void);
extern bool dedup_cluster_forget(Oid relid);

extern bool dedup_cluster_route(FunctionCallInfo fcinfo, DedupRelation table,
								DedupRouteKey how, int16 typlen, Datum *result);
extern bool dedup_cluster_route_key(FunctionCallInfo fcinfo, DedupRelation table,
									const DedupFingerprint *fp, Datum *result);
extern bool dedup_cluster_is_local(DedupRelation table, const DedupFingerprint *fp);
extern void dedup_cluster_lock_key(DedupRelation table, const DedupFingerprint *fp);
extern void dedup_cluster_lock_remote(DedupRelation table, const DedupFingerprint *fp);
extern const DedupFingerprint *dedup_cluster_forwarded_key(void);
extern void dedup_cluster_shard_open(DedupRelation table, const DedupFingerprint *fp,
									 LOCKMODE lockmode, Relation *heap, Relation *index);
extern int	dedup_cluster_local_shards(DedupRelation table, Oid *heaps, int max);

/* the outbox's partitions (one a shard of dedup.claims) */
extern void dedup_cluster_partition(const DedupFingerprint *afp, DedupFingerprint *part);
extern int	dedup_cluster_partitions(DedupFingerprint **parts, bool **local);

extern List *dedup_cluster_call(Oid fnoid, const Datum *args, const bool *argnulls,
								const DedupFingerprint *route);
extern char **dedup_cluster_row_values(ArrayType *row, int *n);
extern int	dedup_cluster_put_rows(ReturnSetInfo *rsinfo, List *rows);

/* a batch's runs of keys (dedup_cluster_batch) */
typedef void (*DedupBatchLocal) (const int *run, int n, void *arg);
typedef void (*DedupBatchRemoteRow) (const char *key, void *arg);
extern void dedup_cluster_batch(FunctionCallInfo fcinfo, DedupRelation table,
								const DedupFingerprint *fps, const int *positions, int nkeys,
								DedupBatchLocal local, DedupBatchRemoteRow remote_row, void *arg);

/* at most this many local shards of one table are cleaned */
#define DEDUP_CLUSTER_MAX_LOCAL_SHARDS 4096

#endif							/* DEDUP_CLUSTER_H */
