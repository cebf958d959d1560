/*-------------------------------------------------------------------------
 *
 * routing.h
 *	  dedup on a Citus cluster (routing.c): calls forwarded to the node of
 *	  their key's shard, batches split by node, and the rows a forwarded
 *	  call returns.
 *
 * Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.
 *-------------------------------------------------------------------------
 */
#ifndef DEDUP_ROUTING_H
#define DEDUP_ROUTING_H

#include "fmgr.h"
#include "nodes/execnodes.h"
#include "nodes/pg_list.h"
#include "utils/array.h"

#include "catalog.h"
#include "fingerprint.h"

/* How a routed call names its key: a key argument, or a stream argument */
typedef enum DedupRouteKey
{
	DEDUP_ROUTE_KEY,			/* fingerprint of (scope, key argument) */
	DEDUP_ROUTE_STREAM			/* fingerprint of (scope, stream argument) */
} DedupRouteKey;

extern bool dedup_routing_route(FunctionCallInfo fcinfo, DedupRelation table,
								DedupRouteKey how, int16 typlen, Datum *result);
extern bool dedup_routing_route_key(FunctionCallInfo fcinfo, DedupRelation table,
									const DedupFingerprint *fp, Datum *result);
extern const DedupFingerprint *dedup_routing_forwarded_key(void);

extern List *dedup_routing_call(Oid fnoid, const Datum *args, const bool *argnulls,
								const DedupFingerprint *route);
extern char **dedup_routing_row_values(ArrayType *row, int *n);
extern int	dedup_routing_put_rows(ReturnSetInfo *rsinfo, List *rows);

/* a batch's runs of keys (dedup_routing_batch) */
typedef void (*DedupBatchLocal) (const int *run, int n, void *arg);
typedef void (*DedupBatchRemoteRow) (const char *key, void *arg);
extern void dedup_routing_batch(FunctionCallInfo fcinfo, DedupRelation table,
								const DedupFingerprint *fps, const int *positions, int nkeys,
								DedupBatchLocal local, DedupBatchRemoteRow remote_row, void *arg);

#endif							/* DEDUP_ROUTING_H */
