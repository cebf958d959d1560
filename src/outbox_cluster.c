/*-------------------------------------------------------------------------
 *
 * outbox_cluster.c
 *	  The relay on a Citus cluster: the calls that go through every
 *	  partition of the outbox (a take, a redrive, the figures), those of a
 *	  batch at its members (an ack, nack or heartbeat), and the partitions'
 *	  SQL functions.
 *
 * The outbox is distributed by partition, each a shard of dedup.claims.  A
 * call of the relay made by a client runs, through dedup_call_on_shard, on
 * the node of each partition it concerns, as the same call forwarded by
 * that partition's part: there it works in that partition alone
 * (outbox_relay.c).  A take fills its batch across the partitions, this
 * node's first, then the others', each from where this backend's last take
 * stopped: each partition's part is a batch of its own, the first one's
 * (the leader) lists the others' (dedup.outbox_batches.members), and its id
 * is the take's; an ack, nack or heartbeat of a batch goes to its members'
 * partitions first (outbox_cluster_fan_out()), then to the partition its id
 * names (outbox_relay.c); redrive, the figures and the list of dead events
 * go to every partition.  The 1.0 calls, which name events by id (an id does not
 * say its partition), do not run on a cluster.
 *
 * Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type_d.h"
#include "funcapi.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/regproc.h"
#include "utils/timestamp.h"

#include "catalog.h"
#include "fingerprint.h"
#include "outbox.h"
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
	dedup_shards_lock_remote(DEDUP_REL_OUTBOX, part);
	return dedup_routing_call(fcinfo->flinfo->fn_oid, args, argnulls, part);
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
	call->nparts = dedup_shards_partitions(&call->parts, &call->local);
	call->args = palloc(sizeof(Datum) * Max(PG_NARGS(), 1));
	call->argnulls = palloc(sizeof(bool) * Max(PG_NARGS(), 1));
	for (int i = 0; i < PG_NARGS(); i++)
	{
		call->argnulls[i] = PG_ARGISNULL(i);
		call->args[i] = call->argnulls[i] ? (Datum) 0 : PG_GETARG_DATUM(i);
	}
}

/* The OID of dedup.outbox_batch_group(bigint, bigint[]) */
static Oid
cluster_group_function(void)
{
	return DatumGetObjectId(DirectFunctionCall1(regprocedurein,
												CStringGetDatum(DEDUP_INTERNAL_SCHEMA
																".outbox_batch_group(bigint,bigint[])")));
}

/*
 * dedup.outbox_batch_group(leader, members) in the leader's partition, on
 * its node, as the role that called (as the partitions' other calls in the
 * transaction: Citus refuses a statement on a placement another role
 * wrote in it): with members (not NULL) set first; the leader's members,
 * or NULL (*n = -1) for a batch not handed out under that id or of a
 * topic the caller may not relay.
 */
static int64 *
cluster_group(int64 leader, ArrayType *members, int *n)
{
	DedupFingerprint part;
	Datum		args[2];
	bool		argnulls[2] = {false, members == NULL};
	List	   *rows;
	char	  **values;
	int			ncols;
	Datum	   *elems;
	bool	   *elemnulls;
	int64	   *ids;
	ArrayType  *result;
	Oid			input;
	Oid			ioparam;

	*n = -1;
	if (!outbox_batch_part(leader, &part))
		return NULL;
	args[0] = Int64GetDatum(leader);
	args[1] = PointerGetDatum(members);
	dedup_shards_lock_remote(DEDUP_REL_OUTBOX, &part);
	rows = dedup_routing_call(cluster_group_function(), args, argnulls, &part);
	if (rows == NIL)
		return NULL;
	values = dedup_routing_row_values(linitial(rows), &ncols);
	if (ncols != 1 || values[0] == NULL)
		return NULL;
	getTypeInputInfo(INT8ARRAYOID, &input, &ioparam);
	result = DatumGetArrayTypeP(OidInputFunctionCall(input, values[0], ioparam, -1));
	deconstruct_array(result, INT8OID, sizeof(int64), FLOAT8PASSBYVAL, TYPALIGN_DOUBLE,
					  &elems, &elemnulls, n);
	ids = palloc(sizeof(int64) * Max(*n, 1));
	for (int i = 0; i < *n; i++)
		ids[i] = DatumGetInt64(elems[i]);
	return ids;
}

/* Whether a row of a take's result (as text) was handed out before */
static bool
cluster_row_rehanded(char **values, int ncols)
{
	/*
	 * (batch_id, id, aggregatetype, aggregateid, type, payload, headers,
	 * attempts, ...)
	 */
	return ncols > 7 && values[7] != NULL && pg_strtoint32(values[7]) > 1;
}

/*
 * dedup_outbox_take_batch() on a cluster: fills its batch across the
 * partitions, this node's first, then the others', each from where this
 * backend's last take stopped, each asked for the room left.  Each
 * partition hands out a batch of its own; the first one's (the leader) is
 * the take's: every row carries its id, and its row lists the others'
 * (dedup.outbox_batch_group()), so that an ack, nack or heartbeat of that
 * id reaches them all (outbox_cluster_fan_out()).  A partition that handed
 * out a batch again (its lease had passed: as much of it as the room
 * allows) is asked again while room is left.  Returns how many events the take has
 * (its rows in the call's result set, made the first time).
 */
int
outbox_cluster_take_batch(FunctionCallInfo fcinfo)
{
	ClusterCall call;
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	AttInMetadata *meta;
	int32		batch_size;
	int			total = 0;
	char	   *leader = NULL;
	int64	   *members = NULL;
	int			nmembers = 0;
	int			last = -1;

	cluster_call_init(fcinfo, &call);
	if (rsinfo->setResult == NULL)
		InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
	meta = TupleDescGetAttInMetadata(rsinfo->setDesc);
	/* (a bad batch_size is the first partition's error) */
	batch_size = call.argnulls[1] ? 0 : DatumGetInt32(call.args[1]);
	for (int pass = 0; pass < 2; pass++)
	{
		for (int j = 0; j < call.nparts; j++)
		{
			int			i = (cluster_next_partition + j) % call.nparts;
			bool		again = true;

			if (call.local[i] != (pass == 0))
				continue;
			for (int round = 0; again && round < 4; round++)
			{
				List	   *rows;
				ListCell   *lc;

				if (total > 0)
					call.args[1] = Int32GetDatum(batch_size - total);
				rows = cluster_call_partition(fcinfo, call.args, call.argnulls, &call.parts[i]);
				again = false;
				foreach(lc, rows)
				{
					int			ncols;
					char	  **values = dedup_routing_row_values(lfirst(lc), &ncols);

					if (ncols != rsinfo->setDesc->natts || values[0] == NULL)
						elog(ERROR, "a partition's take returned %d columns, not %d", ncols,
							 rsinfo->setDesc->natts);
					again = again || cluster_row_rehanded(values, ncols);
					if (leader == NULL)
						leader = values[0];
					else if (strcmp(values[0], leader) != 0)
					{
						int64		member = pg_strtoint64(values[0]);

						if (nmembers == 0 || members[nmembers - 1] != member)
						{
							members = members ? repalloc(members, sizeof(int64) * (nmembers + 1)) :
								palloc(sizeof(int64));
							members[nmembers++] = member;
						}
						values[0] = leader;
					}
					tuplestore_puttuple(rsinfo->setResult, BuildTupleFromCStrings(meta, values));
				}
				total += list_length(rows);
				if (rows != NIL)
					last = i;
				if (call.argnulls[1] || total >= batch_size)
					goto filled;
			}
		}
	}
filled:
	if (last >= 0)
		cluster_next_partition = (last + 1) % call.nparts;
	if (nmembers > 0)
	{
		Datum	   *elems = palloc(sizeof(Datum) * nmembers);
		int			n;

		for (int k = 0; k < nmembers; k++)
			elems[k] = Int64GetDatum(members[k]);
		(void) cluster_group(pg_strtoint64(leader),
							 construct_array(elems, nmembers, INT8OID, sizeof(int64),
											 FLOAT8PASSBYVAL, TYPALIGN_DOUBLE), &n);
		if (n != nmembers)
			elog(ERROR, "the batch %s of a take was not found in its partition", leader);
	}
	return total;
}

/*
 * An ack, nack or heartbeat of a batch (its id, the call's first
 * argument) made by a client on a cluster, at the members of the batch
 * (the other partitions' batches of its take: none for a batch of one
 * partition): the same call, with each member's id, in each member's
 * partition.  Run before the call at the batch itself, which frees it.
 * Returns how many members it has (-1: no batch handed out under that id
 * that the caller may relay, nothing done); *sum, the sum of the members'
 * integer results; *all, whether each member's result was not NULL.
 */
int
outbox_cluster_fan_out(FunctionCallInfo fcinfo, int64 *sum, bool *all)
{
	ClusterCall call;
	int64	   *members;
	int			n;

	*sum = 0;
	*all = true;
	if (PG_ARGISNULL(0))
		return -1;
	members = cluster_group(PG_GETARG_INT64(0), NULL, &n);
	if (n <= 0)
		return n;
	cluster_call_init(fcinfo, &call);
	for (int k = 0; k < n; k++)
	{
		DedupFingerprint part;
		List	   *rows;
		char	  **values;
		int			ncols;

		if (!outbox_batch_part(members[k], &part))
			continue;
		call.args[0] = Int64GetDatum(members[k]);
		rows = cluster_call_partition(fcinfo, call.args, call.argnulls, &part);
		values = rows ? dedup_routing_row_values(linitial(rows), &ncols) : NULL;
		if (values == NULL || ncols != 1 || values[0] == NULL)
			*all = false;
		else if (get_func_rettype(fcinfo->flinfo->fn_oid) == INT4OID)
			*sum += pg_strtoint32(values[0]);
	}
	return n;
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
		(void) dedup_routing_put_rows((ReturnSetInfo *) fcinfo->resultinfo,
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
		values = dedup_routing_row_values(linitial(rows), &ncols);
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
			char	  **values = dedup_routing_row_values(lfirst(lc), &ncols);
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

	dedup_fingerprint_key_datum(PG_GETARG_DATUM(1), -1, PG_GETARG_TEXT_PP(0), &afp);
	dedup_shards_partition(&afp, part);
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
	int			n = dedup_shards_partitions(&parts, &local);

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
