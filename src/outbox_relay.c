/*-------------------------------------------------------------------------
 *
 * outbox_relay.c
 *	  The relay's public functions, one C entry each: dedup_outbox_take_batch,
 *	  _ack_batch, _nack_batch, _extend_batch (a batch's heartbeat), the 1.0
 *	  calls _take, _ack, _nack, and _redrive, _stats and _dead (the dead
 *	  letters, for relays); and dedup.outbox_batch_group, the members of
 *	  a batch of a take across a cluster's partitions.  Each checks its arguments, finds the partition
 *	  it works in, and runs the PL/pgSQL function of the same name in
 *	  schema dedup (sql/functions/outbox_take.sql, outbox_settle.sql,
 *	  outbox_admin.sql), which owns the relay's rules; the take and the ack
 *	  of a batch whole try the fast path first (outbox_fast.c), unless
 *	  dedup.outbox_fast_path is off.
 *
 * The PL/pgSQL functions run as the owner of dedup.outbox, as SECURITY
 * DEFINER would, but are passed the role that called, so that they check
 * its relay privilege on every topic they touch (a SECURITY DEFINER
 * function cannot know its caller).  A batch's id names no topic and is
 * easily guessed: an ack or nack of a batch of a topic the caller may not
 * relay answers as one of a batch not handed out, checked before anything
 * is written, naming nothing.
 *
 * Each PL/pgSQL function is called through a kept plan, "SELECT * FROM
 * dedup.outbox_<name>($1, $2, ...)": the calling role's OID, the
 * partition, then the public function's own arguments.  On a Citus
 * cluster a call works in the partition forwarded to it, or that of its
 * batch's id, or goes through every partition (outbox_cluster.c); a
 * client's call of a batch goes to its members too (relay_batch_call()).
 *
 * Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type_d.h"
#include "commands/async.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/latch.h"
#include "utils/timestamp.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"

#include "catalog.h"
#include "checks.h"
#include "fingerprint.h"
#include "outbox.h"
#include "outbox_cluster.h"
#include "outbox_fast.h"
#include "routing.h"
#include "scope.h"
#include "settings.h"
#include "shards.h"

/* The PL/pgSQL function each public function runs */
typedef enum RelayOp
{
	RELAY_TAKE_BATCH,
	RELAY_ACK_BATCH,
	RELAY_NACK_BATCH,
	RELAY_TAKE,
	RELAY_ACK,
	RELAY_NACK,
	RELAY_REDRIVE,
	RELAY_STATS,
	RELAY_EXTEND_BATCH,
	RELAY_DEAD,
	RELAY_GROUP,
	RELAY_NOPS
} RelayOp;

static const struct
{
	const char *name;			/* the public function's */
	const char *internal;		/* the PL/pgSQL function's, in schema dedup */
	bool		read_only;
	int			nargs;			/* of the call's own arguments it is passed;
								 * -1: all */
}			relay_ops[RELAY_NOPS] = {

	/* (the take's wait is the C entry's: the PL/pgSQL take is one poll) */
	[RELAY_TAKE_BATCH] = {"dedup_outbox_take_batch", "outbox_take_batch", false, 3},
	[RELAY_ACK_BATCH] = {"dedup_outbox_ack_batch", "outbox_ack_batch", false, -1},
	[RELAY_NACK_BATCH] = {"dedup_outbox_nack_batch", "outbox_nack_batch", false, -1},
	[RELAY_TAKE] = {"dedup_outbox_take", "outbox_take", false, -1},
	[RELAY_ACK] = {"dedup_outbox_ack", "outbox_ack", false, -1},
	[RELAY_NACK] = {"dedup_outbox_nack", "outbox_nack", false, -1},
	[RELAY_REDRIVE] = {"dedup_outbox_redrive", "outbox_redrive", false, -1},
	[RELAY_STATS] = {"dedup_outbox_stats", "outbox_stats", true, -1},
	[RELAY_EXTEND_BATCH] = {"dedup_outbox_extend_batch", "outbox_extend_batch", false, -1},
	[RELAY_DEAD] = {"dedup_outbox_dead", "outbox_dead", true, -1},
	[RELAY_GROUP] = {"dedup.outbox_batch_group", "outbox_group", false, -1},
};

/* The number of the call's own arguments op's PL/pgSQL function is passed */
static int
relay_nargs(FunctionCallInfo fcinfo, RelayOp op)
{
	return relay_ops[op].nargs >= 0 ? Min(relay_ops[op].nargs, PG_NARGS()) : PG_NARGS();
}

#define RELAY_MAX_ARGS 8

/* The kept plans, prepared at each one's first call, and their type's OID */
static SPIPlanPtr relay_plans[RELAY_NOPS];
static Oid	relay_plans_type = InvalidOid;

/*
 * What every relay call does first: the kept plans checked (outbox.c), the
 * database checked writable for a call that writes.
 */
static void
relay_start(RelayOp op)
{
	if (outbox_plans_stale(&relay_plans_type))
	{
		for (int i = 0; i < RELAY_NOPS; i++)
		{
			if (relay_plans[i])
				SPI_freeplan(relay_plans[i]);
			relay_plans[i] = NULL;
		}
	}
	outbox_fast_plans_check();
	if (!relay_ops[op].read_only)
		dedup_check_writable(relay_ops[op].name);
}

/* A call's identity while it runs as the owner of the outbox */
typedef struct RelayAsOwner
{
	Oid			caller;
	Oid			save_userid;
	int			save_sec_context;
} RelayAsOwner;

/* Run as the owner of the outbox, inside SPI, until relay_as_caller(). */
static void
relay_as_owner(RelayAsOwner *who)
{
	who->caller = GetUserId();
	GetUserIdAndSecContext(&who->save_userid, &who->save_sec_context);
	SetUserIdAndSecContext(dedup_catalog_relation_owner(DEDUP_REL_OUTBOX),
						   who->save_sec_context | SECURITY_LOCAL_USERID_CHANGE);
	SPI_connect();
}

static void
relay_as_caller(RelayAsOwner *who)
{
	SPI_finish();
	SetUserIdAndSecContext(who->save_userid, who->save_sec_context);
}

/* The kept plan of op, prepared inside SPI at its first call. */
static SPIPlanPtr
relay_plan(FunctionCallInfo fcinfo, RelayOp op)
{
	StringInfoData sql;
	Oid		   *fnargtypes;
	int			nargs;
	Oid			argtypes[RELAY_MAX_ARGS + 2];

	if (relay_plans[op])
		return relay_plans[op];
	get_func_signature(fcinfo->flinfo->fn_oid, &fnargtypes, &nargs);
	nargs = Min(nargs, relay_nargs(fcinfo, op));
	if (nargs > RELAY_MAX_ARGS)
		elog(ERROR, "%s() has too many arguments", relay_ops[op].name);
	argtypes[0] = OIDOID;
	argtypes[1] = dedup_catalog_fingerprint_type();
	memcpy(argtypes + 2, fnargtypes, nargs * sizeof(Oid));
	initStringInfo(&sql);
	appendStringInfo(&sql, "SELECT * FROM %s.%s($1, $2", DEDUP_INTERNAL_SCHEMA,
					 relay_ops[op].internal);
	for (int i = 0; i < nargs; i++)
		appendStringInfo(&sql, ", $%d", i + 3);
	appendStringInfoChar(&sql, ')');
	relay_plans[op] = SPI_prepare(sql.data, nargs + 2, argtypes);
	if (relay_plans[op] == NULL)
		elog(ERROR, "could not prepare \"%s\": %s", sql.data, SPI_result_code_string(SPI_result));
	SPI_keepplan(relay_plans[op]);
	return relay_plans[op];
}

/*
 * Run the PL/pgSQL function of op for caller, in partition part (NULL: in
 * every one, for the figures), with the call's own arguments; inside SPI,
 * as the owner.  A set-returning call's rows go into its result set
 * (materialized by the caller); a scalar's value is returned (*isnull).
 */
static Datum
relay_plpgsql(FunctionCallInfo fcinfo, RelayOp op, Oid caller, const DedupFingerprint *part,
			  bool *isnull)
{
	Datum		values[RELAY_MAX_ARGS + 2];
	char		nulls[RELAY_MAX_ARGS + 2];
	SPIPlanPtr	plan = relay_plan(fcinfo, op);
	Datum		result = (Datum) 0;

	values[0] = ObjectIdGetDatum(caller);
	nulls[0] = ' ';
	values[1] = PointerGetDatum(part);
	nulls[1] = part ? ' ' : 'n';
	for (int i = 0; i < relay_nargs(fcinfo, op); i++)
	{
		values[i + 2] = PG_GETARG_DATUM(i);
		nulls[i + 2] = PG_ARGISNULL(i) ? 'n' : ' ';
	}
	*isnull = true;
	if (SPI_execute_plan(plan, values, nulls, relay_ops[op].read_only, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not run the outbox relay's %s()", relay_ops[op].name);
	if (fcinfo->flinfo->fn_retset)
	{
		ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;

		for (uint64 i = 0; i < SPI_processed; i++)
			tuplestore_puttuple(rsinfo->setResult, SPI_tuptable->vals[i]);
	}
	else if (SPI_processed > 0)
	{
		Oid			rettype = SPI_gettypeid(SPI_tuptable->tupdesc, 1);
		int16		typlen;
		bool		typbyval;

		get_typlenbyval(rettype, &typlen, &typbyval);
		result = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, isnull);
		if (!*isnull)
			result = SPI_datumTransfer(result, typbyval, typlen);
	}
	return result;
}

/* Run op's PL/pgSQL function as the owner; the scalar result, or NULL. */
static Datum
relay_run(FunctionCallInfo fcinfo, RelayOp op, const DedupFingerprint *part)
{
	RelayAsOwner who;
	Datum		result;
	bool		isnull;

	if (fcinfo->flinfo->fn_retset)
		InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
	relay_as_owner(&who);
	result = relay_plpgsql(fcinfo, op, who.caller, part, &isnull);
	relay_as_caller(&who);
	if (fcinfo->flinfo->fn_retset)
		return (Datum) 0;
	if (isnull)
		PG_RETURN_NULL();
	return result;
}

/*
 * On a Citus cluster, a call that works in one partition (*part: forwarded
 * to this node, or its batch's) runs on that partition's node: true, with
 * *result the routed call's, if it ran there; false if it runs here, under
 * the shard's lock.
 */
static bool
relay_route(FunctionCallInfo fcinfo, DedupFingerprint *part, Datum *result)
{
	const DedupFingerprint *forwarded = dedup_routing_forwarded_key();

	if (forwarded != NULL)
		memcpy(part, forwarded, sizeof(*part));
	if (dedup_routing_route_key(fcinfo, DEDUP_REL_OUTBOX, part, result))
		return true;
	dedup_shards_lock_key(DEDUP_REL_OUTBOX, part);
	return false;
}

/* The 1.0 calls name events by id, which does not say their partition. */
static void
relay_not_on_cluster(RelayOp op)
{
	ereport(ERROR,
			(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			 errmsg("%s() does not run on a Citus cluster", relay_ops[op].name),
			 errdetail("The outbox is kept in partitions there, and an event's id does not say its partition."),
			 errhint("Take, ack and nack batches: dedup_outbox_take_batch, dedup_outbox_ack_batch, dedup_outbox_nack_batch.")));
}

/*
 * The first and the longest sleep between two polls of a take that waits.
 * With dedup preloaded, a commit that put an event of the take's topic
 * wakes it at once (outbox_wait_begin(), outbox.c), and it sleeps the
 * longest from the first: what it polls for then is only what no commit
 * wakes it for (a lease or a retry falling due, an ack letting the next
 * event of an aggregate go).
 */
#define RELAY_POLL_FIRST_MS 10
#define RELAY_POLL_MAX_MS 100

/*
 * The longest wait of a take: a waiting take holds its statement's snapshot,
 * and so keeps vacuum from the rows deleted since it started; a minute
 * bounds that, and a relay loses nothing by taking again (pgmq's
 * read_with_poll waits 5 seconds by default, SQS at most 20).
 */
#define RELAY_WAIT_MAX_SECS 60

/*
 * One poll of a take, into its result set: the fast path, else the PL/pgSQL
 * take; as the owner.
 */
static void
relay_take_once(FunctionCallInfo fcinfo, RelayOp op, bool with_id, const DedupFingerprint *part,
				bool fast, const Interval *lease, DedupScopeSettings *settings)
{
	RelayAsOwner who;
	bool		isnull;

	relay_as_owner(&who);
	if (!(fast && dedup_outbox_fast_path &&
		  outbox_fast_take((ReturnSetInfo *) fcinfo->resultinfo, with_id, part,
						   PG_GETARG_TEXT_PP(0), PG_GETARG_INT32(1), lease, settings)))
		(void) relay_plpgsql(fcinfo, op, who.caller, part, &isnull);
	relay_as_caller(&who);
}

/*
 * Sleep before the next poll of a take that waits until deadline: false,
 * without sleeping, once it passed.  A take woken by commits (woken: it
 * called outbox_wait_begin()) sleeps RELAY_POLL_MAX_MS at most, or until a
 * commit wakes it; one that polls sleeps *sleep_ms, which doubles, up to
 * RELAY_POLL_MAX_MS.  The sleep holds no lock a producer waits for; it
 * holds its statement's snapshot, like any running statement, so the
 * database's xmin horizon (hence the cap on wait).  A cancel or a shutdown
 * ends it.
 */
static bool
relay_take_sleep(TimestampTz deadline, long *sleep_ms, bool woken)
{
	long		left = TimestampDifferenceMilliseconds(GetCurrentTimestamp(), deadline);

	if (left <= 0)
		return false;
	if (woken)
	{
		outbox_wait_sleep(Min(RELAY_POLL_MAX_MS, left));
		CHECK_FOR_INTERRUPTS();
		return true;
	}
	(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
					 Min(*sleep_ms, left), PG_WAIT_EXTENSION);
	ResetLatch(MyLatch);
	CHECK_FOR_INTERRUPTS();
	*sleep_ms = Min(*sleep_ms * 2, RELAY_POLL_MAX_MS);
	return true;
}

/*
 * A take: dedup_outbox_take_batch (with_id: its lease and wait arguments)
 * or the 1.0 dedup_outbox_take, fast path first.  With a wait, a take that
 * finds nothing polls again, after a short sleep, until it hands out a
 * batch or the wait has passed: each poll reads with snapshots of its own,
 * so it sees what committed meanwhile; between polls it holds no lock a
 * producer waits for, and lets its topic's relay lock go, so that another
 * relay of the topic is not kept waiting.  It can let it go only when the
 * transaction wrote nothing (has no id, nor has a savepoint's parent) and
 * did not hold the lock before the take (an earlier take of the
 * transaction: LockRelease() lets go only of the statement's own hold,
 * outbox_unlock_relay()): a poll that handed out nothing may
 * still have written (locked a retry slot not yet due, held an aggregate
 * back) or the transaction may have before it (an ack), and then the lock
 * stays to the end of the transaction, so the take returns no row at once
 * rather than sleep with it.  "Now", for leases and retries falling due, is
 * each poll's clock (both paths read clock_timestamp()), so a lease that
 * passes during the wait is seen by the next poll.  With dedup preloaded,
 * the commit of a put of the topic wakes the take (outbox_wait_begin()):
 * it polls again at once, and sleeps again if it finds nothing (the put's
 * event went to another relay, or a topic of the same slot woke it).  No
 * LISTEN: it works through a pooler.
 */
static Datum
relay_take(FunctionCallInfo fcinfo, RelayOp op, bool with_id)
{
	DedupFingerprint part;
	DedupScopeSettings settings;
	bool		fast;
	Interval   *lease = NULL;
	Interval   *wait = NULL;
	bool		forwarded = false;
	TimestampTz deadline = 0;
	long		sleep_ms = RELAY_POLL_FIRST_MS;
	bool		woken = false;
	bool		held_before;

	relay_start(op);
	if (with_id)
	{
		TimestampTz now = GetCurrentStatementStartTimestamp();

		if (!PG_ARGISNULL(2))
		{
			lease = PG_GETARG_INTERVAL_P(2);
			dedup_check_interval(lease, "lease", false, now);
		}
		if (!PG_ARGISNULL(3))
		{
			wait = PG_GETARG_INTERVAL_P(3);
			dedup_check_interval(wait, "wait", true, now);
			if (dedup_check_timestamp_plus(now, wait) - now > RELAY_WAIT_MAX_SECS * USECS_PER_SEC)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("wait must be at most %d seconds", RELAY_WAIT_MAX_SECS),
						 errdetail("The value given was %s.",
								   DatumGetCString(DirectFunctionCall1(interval_out, IntervalPGetDatum(wait)))),
						 errhint("A waiting take holds its statement's snapshot, and so the database's "
								 "xmin horizon: wait briefly and take again.")));
			deadline = dedup_check_timestamp_plus(GetCurrentTimestamp(), wait);
		}
	}
	dedup_shards_outbox_part(0, &part);
	if (outbox_distributed())
	{
		Datum		routed;

		if (!with_id)
			relay_not_on_cluster(op);
		if (dedup_routing_forwarded_key() == NULL)
		{
			/*
			 * The wait is the coordinator's: each partition is polled once a
			 * poll.  The forwarded takes keep the relay locks of the
			 * partitions they went through (their remote transactions stay
			 * open to this one's end), so while this take waits another
			 * relay's take of the topic passes those partitions.
			 */
			while (outbox_cluster_take_batch(fcinfo) == 0 && wait != NULL &&
				   relay_take_sleep(deadline, &sleep_ms, false))
				;
			return (Datum) 0;
		}
		if (relay_route(fcinfo, &part, &routed))
			return routed;
		forwarded = true;

		/*
		 * A take of a cluster's relay passes a partition whose relay lock
		 * another take holds (it is taking from it): no take waits for
		 * another, so takes that go through the partitions in different
		 * orders, each holding the locks of those it passed until it commits,
		 * never deadlock.
		 */
		if (!PG_ARGISNULL(0) && !outbox_lock_relay(&part, PG_GETARG_TEXT_PP(0), true))
		{
			InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
			return (Datum) 0;
		}
	}
	outbox_check_isolation();

	/*
	 * The checks of the PL/pgSQL take, first, for the fast path (a bad
	 * argument is left to the PL/pgSQL take's errors)
	 */
	fast = !PG_ARGISNULL(0) && !PG_ARGISNULL(1) && PG_GETARG_INT32(1) >= 1 &&
		PG_GETARG_INT32(1) <= OUTBOX_MAX_BATCH_SIZE;
	if (fast)
	{
		dedup_scope_use(dedup_check_name_arg(fcinfo, 0, "topic"), DEDUP_PRIV_RELAY, &settings);
		if (lease == NULL)
			lease = &settings.value[DEDUP_SCOPE_LEASE];
	}
	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
	/* the lock held before this take (an earlier take of the transaction) */
	held_before = wait != NULL && !forwarded && !PG_ARGISNULL(0) &&
		outbox_relay_lock_held(&part, PG_GETARG_TEXT_PP(0));
	if (wait != NULL && !forwarded && !PG_ARGISNULL(0))
		woken = outbox_wait_begin(PG_GETARG_TEXT_PP(0));
	PG_TRY();
	{
		for (;;)
		{
			relay_take_once(fcinfo, op, with_id, &part, fast, lease, &settings);
			if (wait == NULL || forwarded ||
				tuplestore_tuple_count(((ReturnSetInfo *) fcinfo->resultinfo)->setResult) > 0)
				break;

			/*
			 * The lock stays: the transaction wrote (a savepoint's parent
			 * too), or held it before this take (an earlier statement's hold,
			 * which this one cannot let go: outbox_unlock_relay())
			 */
			if (held_before || TransactionIdIsValid(GetTopTransactionIdIfAny()))
				break;
			outbox_unlock_relay(&part, PG_GETARG_TEXT_PP(0));
			/* a commit woke the take during the poll: poll again at once */
			if (woken && outbox_wait_changed())
			{
				if (GetCurrentTimestamp() >= deadline)
					break;
				continue;
			}
			if (!relay_take_sleep(deadline, &sleep_ms, woken))
				break;
		}
	}
	PG_FINALLY();
	{
		if (woken)
			outbox_wait_end();
	}
	PG_END_TRY();
	return (Datum) 0;
}

/*
 * dedup_outbox_take_batch(topic text, batch_size integer DEFAULT 100,
 *						   lease interval DEFAULT NULL, wait interval DEFAULT NULL)
 *	RETURNS TABLE (batch_id bigint, id uuid, ..., seq bigint)
 */
PG_FUNCTION_INFO_V1(dedup_outbox_take_batch);
Datum
dedup_outbox_take_batch(PG_FUNCTION_ARGS)
{
	return relay_take(fcinfo, RELAY_TAKE_BATCH, true);
}

/*
 * dedup_outbox_take(topic text, batch_size integer DEFAULT 100)
 *	RETURNS TABLE (id uuid, ...): 1.0's take
 */
PG_FUNCTION_INFO_V1(dedup_outbox_take);
Datum
dedup_outbox_take(PG_FUNCTION_ARGS)
{
	return relay_take(fcinfo, RELAY_TAKE, false);
}

/*
 * The partition of a call of a batch (its first argument, its id), for an
 * ack or nack: false if it ran on the partition's node (*result).
 */
static bool
relay_batch_partition(FunctionCallInfo fcinfo, DedupFingerprint *part, Datum *result)
{
	/* one of no batch's id finds none, in partition 0 */
	dedup_shards_outbox_part(0, part);
	if (!PG_ARGISNULL(0))
		(void) outbox_batch_part(PG_GETARG_INT64(0), part);
	if (outbox_distributed() && relay_route(fcinfo, part, result))
		return false;
	return true;
}

/*
 * A call of a batch (an ack, nack or heartbeat: its id first) made by a
 * client on a Citus cluster, where the batch may be the leader of a take
 * across partitions: the same call at its members first
 * (outbox_cluster.c), then the batch's own (at, which runs it in its
 * partition).  Its result: the members' counts added (an ack's or nack's),
 * or NULL if one of them was not handed out under its id any more (a
 * heartbeat's).  Anywhere else, at alone.
 */
static Datum
relay_batch_call(FunctionCallInfo fcinfo, Datum (*at) (FunctionCallInfo fcinfo))
{
	int64		sum = 0;
	bool		all = true;
	int			members = 0;
	Datum		result;

	if (outbox_distributed() && dedup_routing_forwarded_key() == NULL)
		members = outbox_cluster_fan_out(fcinfo, &sum, &all);
	result = at(fcinfo);
	if (members <= 0 || fcinfo->isnull)
		return result;
	if (!all)
		PG_RETURN_NULL();
	if (get_func_rettype(fcinfo->flinfo->fn_oid) == INT4OID)
		return Int32GetDatum((int32) Min(DatumGetInt32(result) + sum, PG_INT32_MAX));
	return result;
}

/*
 * dedup_outbox_ack_batch at the batch itself: a batch acked whole (no
 * failed event) tries the fast path first.
 */
static Datum
relay_ack_batch_at(FunctionCallInfo fcinfo)
{
	DedupFingerprint part;
	Datum		result;
	bool		whole;
	RelayAsOwner who;
	int32		acked = -1;
	bool		isnull;

	if (!relay_batch_partition(fcinfo, &part, &result))
		return result;
	whole = !PG_ARGISNULL(0) && !PG_ARGISNULL(2) &&
		(PG_ARGISNULL(1) || ArrayGetNItems(ARR_NDIM(PG_GETARG_ARRAYTYPE_P(1)),
										   ARR_DIMS(PG_GETARG_ARRAYTYPE_P(1))) == 0);
	if (whole)
		dedup_check_interval(PG_GETARG_INTERVAL_P(2), "retry_delay", true,
							 GetCurrentStatementStartTimestamp());
	relay_as_owner(&who);
	if (whole && dedup_outbox_fast_path)
		acked = outbox_fast_ack(&part, PG_GETARG_INT64(0), who.caller);
	if (acked >= 0)
	{
		result = Int32GetDatum(acked);
		isnull = false;
	}
	else
		result = relay_plpgsql(fcinfo, RELAY_ACK_BATCH, who.caller, &part, &isnull);
	relay_as_caller(&who);
	if (isnull)
		PG_RETURN_NULL();
	return result;
}

/*
 * dedup_outbox_ack_batch(batch_id bigint, failed uuid[] DEFAULT NULL,
 *						  retry_delay interval DEFAULT '0', error text DEFAULT NULL)
 *	RETURNS integer
 */
PG_FUNCTION_INFO_V1(dedup_outbox_ack_batch);
Datum
dedup_outbox_ack_batch(PG_FUNCTION_ARGS)
{
	relay_start(RELAY_ACK_BATCH);
	return relay_batch_call(fcinfo, relay_ack_batch_at);
}

/* A call of a batch that runs its PL/pgSQL function in its partition */
static Datum
relay_batch_run(FunctionCallInfo fcinfo, RelayOp op)
{
	DedupFingerprint part;
	Datum		result;

	if (!relay_batch_partition(fcinfo, &part, &result))
		return result;
	return relay_run(fcinfo, op, &part);
}

static Datum
relay_nack_batch_at(FunctionCallInfo fcinfo)
{
	return relay_batch_run(fcinfo, RELAY_NACK_BATCH);
}

/*
 * dedup_outbox_nack_batch(batch_id bigint, retry_delay interval DEFAULT '0',
 *						   error text DEFAULT NULL) RETURNS integer
 */
PG_FUNCTION_INFO_V1(dedup_outbox_nack_batch);
Datum
dedup_outbox_nack_batch(PG_FUNCTION_ARGS)
{
	relay_start(RELAY_NACK_BATCH);
	return relay_batch_call(fcinfo, relay_nack_batch_at);
}

/* The 1.0 ack and nack: by ids, on one server only. */
static Datum
relay_by_ids(FunctionCallInfo fcinfo, RelayOp op)
{
	DedupFingerprint part;

	relay_start(op);
	if (outbox_distributed())
		relay_not_on_cluster(op);
	dedup_shards_outbox_part(0, &part);
	return relay_run(fcinfo, op, &part);
}

/* dedup_outbox_ack(ids uuid[], attempts integer[] DEFAULT NULL) RETURNS integer */
PG_FUNCTION_INFO_V1(dedup_outbox_ack);
Datum
dedup_outbox_ack(PG_FUNCTION_ARGS)
{
	return relay_by_ids(fcinfo, RELAY_ACK);
}

/*
 * dedup_outbox_nack(ids uuid[], retry_delay interval DEFAULT '0',
 *					 error text DEFAULT NULL, attempts integer[] DEFAULT NULL)
 *	RETURNS integer
 */
PG_FUNCTION_INFO_V1(dedup_outbox_nack);
Datum
dedup_outbox_nack(PG_FUNCTION_ARGS)
{
	return relay_by_ids(fcinfo, RELAY_NACK);
}

/*
 * dedup_outbox_redrive(topic text, ids uuid[] DEFAULT NULL) RETURNS integer
 *
 * A redrive that moved events wakes the topic's relays; not on a cluster
 * (see dedup_outbox_put).
 */
PG_FUNCTION_INFO_V1(dedup_outbox_redrive);
Datum
dedup_outbox_redrive(PG_FUNCTION_ARGS)
{
	DedupFingerprint part;
	Datum		result;

	relay_start(RELAY_REDRIVE);
	dedup_shards_outbox_part(0, &part);
	if (outbox_distributed())
	{
		if (dedup_routing_forwarded_key() == NULL)
			PG_RETURN_INT32(outbox_cluster_redrive(fcinfo));
		if (relay_route(fcinfo, &part, &result))
			return result;
	}
	result = relay_run(fcinfo, RELAY_REDRIVE, &part);
	if (!fcinfo->isnull && DatumGetInt32(result) > 0 && !outbox_distributed())
		Async_Notify(OUTBOX_CHANNEL, text_to_cstring(PG_GETARG_TEXT_PP(0)));
	return result;
}

/*
 * dedup_outbox_stats(topic text DEFAULT NULL) RETURNS SETOF record
 *
 * Of every partition; on a cluster, each partition's on its node, summed.
 */
PG_FUNCTION_INFO_V1(dedup_outbox_stats);
Datum
dedup_outbox_stats(PG_FUNCTION_ARGS)
{
	DedupFingerprint part;
	Datum		result;

	relay_start(RELAY_STATS);
	if (!outbox_distributed())
		return relay_run(fcinfo, RELAY_STATS, NULL);
	if (dedup_routing_forwarded_key() == NULL)
	{
		outbox_cluster_stats(fcinfo);
		return (Datum) 0;
	}
	if (relay_route(fcinfo, &part, &result))
		return result;
	return relay_run(fcinfo, RELAY_STATS, &part);
}

/*
 * dedup_outbox_extend_batch(batch_id bigint, lease interval DEFAULT NULL)
 *	RETURNS timestamptz
 *
 * The heartbeat of a batch: see dedup.outbox_extend_batch().
 */
static Datum
relay_extend_batch_at(FunctionCallInfo fcinfo)
{
	return relay_batch_run(fcinfo, RELAY_EXTEND_BATCH);
}

PG_FUNCTION_INFO_V1(dedup_outbox_extend_batch);
Datum
dedup_outbox_extend_batch(PG_FUNCTION_ARGS)
{
	relay_start(RELAY_EXTEND_BATCH);
	if (!PG_ARGISNULL(1))
		dedup_check_interval(PG_GETARG_INTERVAL_P(1), "lease", false,
							 GetCurrentStatementStartTimestamp());
	return relay_batch_call(fcinfo, relay_extend_batch_at);
}

/*
 * dedup.outbox_batch_group(batch_id bigint, members bigint[])
 *	RETURNS bigint[]
 *
 * The members of a batch handed out by a take across a cluster's
 * partitions, set first with members: see dedup.outbox_group().  Called by
 * outbox_cluster.c, in the batch's partition, as the role that called.
 */
PG_FUNCTION_INFO_V1(dedup_outbox_batch_group);
Datum
dedup_outbox_batch_group(PG_FUNCTION_ARGS)
{
	relay_start(RELAY_GROUP);
	return relay_batch_run(fcinfo, RELAY_GROUP);
}

/*
 * dedup_outbox_dead(topic text, max integer DEFAULT 100)
 *	RETURNS TABLE (id uuid, seq bigint, ..., last_error text, died_at timestamptz)
 *
 * The dead events of a topic, for its relays; on a cluster, up to max of
 * each partition, partition by partition.
 */
PG_FUNCTION_INFO_V1(dedup_outbox_dead);
Datum
dedup_outbox_dead(PG_FUNCTION_ARGS)
{
	DedupFingerprint part;
	Datum		result;

	relay_start(RELAY_DEAD);
	dedup_shards_outbox_part(0, &part);
	if (outbox_distributed())
	{
		if (dedup_routing_forwarded_key() == NULL)
		{
			outbox_cluster_rows(fcinfo);
			return (Datum) 0;
		}
		if (relay_route(fcinfo, &part, &result))
			return result;
	}
	return relay_run(fcinfo, RELAY_DEAD, &part);
}
