/*-------------------------------------------------------------------------
 *
 * outbox_cluster.c
 *	  The relay on a Citus cluster: the calls that go through every
 *	  partition of the outbox (a take, a redrive, the figures), and the
 *	  partitions' SQL functions.
 *
 * The outbox is distributed by partition, each a shard of dedup.claims.  A
 * call of the relay made by a client runs, through dedup_call_on_shard, on
 * the node of each partition it concerns, as the same call forwarded by
 * that partition's part: there it works in that partition alone
 * (outbox_relay.c).  A take tries this node's partitions first, then the
 * others', each from where this backend's last take stopped, and hands out
 * the first batch it finds; an ack or nack of a batch goes to the
 * partition its id names (outbox_relay.c); redrive, the figures and the
 * list of dead events go to every partition.  The 1.0 calls, which name events by id (an id does not
 * say its partition), do not run on a cluster.
 *
 * Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "funcapi.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "fingerprint.h"
#include "outbox_cluster.h"
#include "routing.h"
#include "shards.h"

/* The figures of one topic, summed over the partitions */
typedef struct ClusterTopicStats
{
	char	   *topic;
	int64		pending;
	int64		in_flight;
	int64		dead;
	Datum		oldest;			/* an interval, or 0 for none */
} ClusterTopicStats;

static int
cluster_stats_cmp(const void *a, const void *b)
{
	return strcmp(((const ClusterTopicStats *) a)->topic, ((const ClusterTopicStats *) b)->topic);
}

/*
 * Run the call of fcinfo in partition part, on its node, after taking its
 * shard's metadata lock here, as a claim routed from here does: the lock
 * is taken on this node before the shard's node, in the order of a shard
 * move's, which could otherwise hold this node's lock while it waits for
 * the shard node's, held by this transaction's earlier call there (Citus's
 * deadlock detector cancelled the move in citus.sh).
 */
static List *
cluster_call_partition(FunctionCallInfo fcinfo, Datum *args, bool *argnulls,
					   const DedupFingerprint *part)
{
	dedup_cluster_lock_remote(DEDUP_REL_OUTBOX, part);
	return dedup_cluster_call(fcinfo->flinfo->fn_oid, args, argnulls, part);
}

/* The partition after the one this backend's last take on a cluster took from */
static int	cluster_next_partition = 0;

/* The partitions of the cluster, and the call's arguments, to forward it */
typedef struct ClusterCall
{
	DedupFingerprint *parts;
	bool	   *local;
	int			nparts;
	Datum	   *args;
	bool	   *argnulls;
} ClusterCall;

static void
cluster_call_init(FunctionCallInfo fcinfo, ClusterCall *call)
{
	call->nparts = dedup_cluster_partitions(&call->parts, &call->local);
	call->args = palloc(sizeof(Datum) * Max(PG_NARGS(), 1));
	call->argnulls = palloc(sizeof(bool) * Max(PG_NARGS(), 1));
	for (int i = 0; i < PG_NARGS(); i++)
	{
		call->argnulls[i] = PG_ARGISNULL(i);
		call->args[i] = call->argnulls[i] ? (Datum) 0 : PG_GETARG_DATUM(i);
	}
}

/*
 * dedup_outbox_take_batch() on a cluster: this node's partitions, then the
 * others', each from where this backend's last take stopped; the first
 * batch found is the take's (its rows in the call's result set, made the
 * first time); returns how many events it has.
 */
int
outbox_cluster_take_batch(FunctionCallInfo fcinfo)
{
	ClusterCall call;

	cluster_call_init(fcinfo, &call);
	if (((ReturnSetInfo *) fcinfo->resultinfo)->setResult == NULL)
		InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
	for (int pass = 0; pass < 2; pass++)
	{
		for (int j = 0; j < call.nparts; j++)
		{
			int			i = (cluster_next_partition + j) % call.nparts;
			int			n;

			if (call.local[i] != (pass == 0))
				continue;
			n = dedup_cluster_put_rows((ReturnSetInfo *) fcinfo->resultinfo,
									   cluster_call_partition(fcinfo, call.args, call.argnulls,
															  &call.parts[i]));
			if (n > 0)
			{
				cluster_next_partition = (i + 1) % call.nparts;
				return n;
			}
		}
	}
	return 0;
}

/*
 * A set-returning call of the relay on a cluster whose rows are those of
 * every partition, partition by partition (dedup_outbox_dead()).
 */
void
outbox_cluster_rows(FunctionCallInfo fcinfo)
{
	ClusterCall call;

	cluster_call_init(fcinfo, &call);
	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
	for (int i = 0; i < call.nparts; i++)
		(void) dedup_cluster_put_rows((ReturnSetInfo *) fcinfo->resultinfo,
									  cluster_call_partition(fcinfo, call.args, call.argnulls,
															 &call.parts[i]));
}

/* dedup_outbox_redrive() on a cluster: in every partition; how many moved */
int32
outbox_cluster_redrive(FunctionCallInfo fcinfo)
{
	ClusterCall call;
	int64		n = 0;

	cluster_call_init(fcinfo, &call);
	for (int i = 0; i < call.nparts; i++)
	{
		List	   *rows = cluster_call_partition(fcinfo, call.args, call.argnulls, &call.parts[i]);
		int			ncols;
		char	  **values;

		if (rows == NIL)
			continue;
		values = dedup_cluster_row_values(linitial(rows), &ncols);
		if (ncols == 1 && values[0] != NULL)
			n += pg_strtoint64(values[0]);
	}
	return (int32) Min(n, PG_INT32_MAX);
}

/* dedup_outbox_stats() on a cluster: every partition's, summed by topic */
void
outbox_cluster_stats(FunctionCallInfo fcinfo)
{
	ClusterCall call;
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	ClusterTopicStats *stats = NULL;
	int			nstats = 0;

	cluster_call_init(fcinfo, &call);
	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
	for (int i = 0; i < call.nparts; i++)
	{
		ListCell   *lc;

		foreach(lc, cluster_call_partition(fcinfo, call.args, call.argnulls, &call.parts[i]))
		{
			int			ncols;
			char	  **values = dedup_cluster_row_values(lfirst(lc), &ncols);
			ClusterTopicStats *s = NULL;

			if (ncols != 5 || values[0] == NULL)
				elog(ERROR, "the figures of a partition have %d columns, not 5", ncols);
			for (int k = 0; k < nstats && s == NULL; k++)
				if (strcmp(stats[k].topic, values[0]) == 0)
					s = &stats[k];
			if (s == NULL)
			{
				stats = stats ? repalloc(stats, sizeof(ClusterTopicStats) * (nstats + 1)) :
					palloc(sizeof(ClusterTopicStats));
				s = &stats[nstats++];
				memset(s, 0, sizeof(ClusterTopicStats));
				s->topic = values[0];
			}
			s->pending += values[1] ? pg_strtoint64(values[1]) : 0;
			s->in_flight += values[2] ? pg_strtoint64(values[2]) : 0;
			s->dead += values[3] ? pg_strtoint64(values[3]) : 0;
			if (values[4] != NULL)
			{
				Datum		age = DirectFunctionCall3(interval_in, CStringGetDatum(values[4]),
													  ObjectIdGetDatum(InvalidOid),
													  Int32GetDatum(-1));

				if (s->oldest == (Datum) 0 ||
					DatumGetBool(DirectFunctionCall2(interval_gt, age, s->oldest)))
					s->oldest = age;
			}
		}
	}
	if (nstats > 1)
		qsort(stats, nstats, sizeof(ClusterTopicStats), cluster_stats_cmp);
	for (int k = 0; k < nstats; k++)
	{
		Datum		values[5];
		bool		nulls[5] = {false, false, false, false, stats[k].oldest == (Datum) 0};

		values[0] = CStringGetTextDatum(stats[k].topic);
		values[1] = Int64GetDatum(stats[k].pending);
		values[2] = Int64GetDatum(stats[k].in_flight);
		values[3] = Int64GetDatum(stats[k].dead);
		values[4] = stats[k].oldest;
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
}

/*
 * dedup.outbox_partition_of(topic text, aggregate_id text)
 *	RETURNS dedup_fingerprint
 *
 * The part of the outbox partition of an aggregate's events, on a cluster
 * whose dedup.claims is distributed (dedup_distribute() moves the events
 * there by it).
 */
PG_FUNCTION_INFO_V1(dedup_outbox_partition_of);
Datum
dedup_outbox_partition_of(PG_FUNCTION_ARGS)
{
	DedupFingerprint afp;
	DedupFingerprint *part = palloc(sizeof(DedupFingerprint));

	dedup_key_datum(PG_GETARG_DATUM(1), -1, PG_GETARG_TEXT_PP(0), &afp);
	dedup_cluster_partition(&afp, part);
	PG_RETURN_DEDUP_FINGERPRINT_P(part);
}

/*
 * dedup.outbox_partitions() RETURNS SETOF dedup_fingerprint
 *
 * The parts of every partition of the outbox on a cluster: one a shard of
 * dedup.claims.
 */
PG_FUNCTION_INFO_V1(dedup_outbox_partitions);
Datum
dedup_outbox_partitions(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	DedupFingerprint *parts;
	bool	   *local;
	int			n = dedup_cluster_partitions(&parts, &local);

	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
	for (int i = 0; i < n; i++)
	{
		DedupFingerprint *part = palloc(sizeof(DedupFingerprint));
		Datum		value;
		bool		isnull = false;

		memcpy(part, &parts[i], sizeof(DedupFingerprint));
		value = PointerGetDatum(part);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, &value, &isnull);
	}
	return (Datum) 0;
}
