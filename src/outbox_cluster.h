/*-------------------------------------------------------------------------
 *
 * outbox_cluster.h
 *	  The relay's calls that go through every partition of the outbox on a
 *	  Citus cluster (outbox_cluster.c).
 *
 * Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.
 *-------------------------------------------------------------------------
 */
#ifndef DEDUP_OUTBOX_CLUSTER_H
#define DEDUP_OUTBOX_CLUSTER_H

#include "fmgr.h"

extern int	outbox_cluster_take_batch(FunctionCallInfo fcinfo);
extern int	outbox_cluster_fan_out(FunctionCallInfo fcinfo, int64 *sum, bool *all);
extern void outbox_cluster_rows(FunctionCallInfo fcinfo);
extern int32 outbox_cluster_redrive(FunctionCallInfo fcinfo);
extern void outbox_cluster_stats(FunctionCallInfo fcinfo);

#endif							/* DEDUP_OUTBOX_CLUSTER_H */
