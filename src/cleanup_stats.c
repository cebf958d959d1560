/*-------------------------------------------------------------------------
 *
 * cleanup_stats.c
 *	  The cleanup's figures: per database, the rows each kind lost to the
 *	  cleanup, the last pass's start and duration, batches, errors and the
 *	  cleanup lag.  They live in shared memory, so they exist only when the
 *	  library is in shared_preload_libraries; dedup_cleanup_stats() and the
 *	  view of the same name read them.
 *
 * Every batch, the worker's or a caller's of dedup_cleanup_batch(), notes
 * what it deleted in backend-local memory, with its subtransaction; the
 * transaction callbacks add it to the shared figures when the transaction
 * commits, and count a batch that did not commit (its transaction or
 * subtransaction aborted) as an error, so a rolled-back batch never counts
 * as deleted rows.  A step of a batch rolled back alone and left to the
 * next pass (cleanup.c: a lock not granted in time) counts as an error too,
 * when its batch commits (which counts as a batch): the cleanup fell
 * behind there, as when a batch fails.  A transaction that ran a batch cannot be prepared: its
 * outcome would be decided elsewhere.
 *
 * Figures are kept for STATS_MAX_DATABASES databases; a further one takes
 * the slot that changed least recently (a dropped database's, typically).
 *
 * The cleanup lag is an upper bound that costs nothing to keep: a pass
 * deletes every row it finds expired, so every expired row still present
 * expired after the last completed pass started.  The lag is the time since
 * then; it stays below the worker's interval plus one pass while the
 * cleanup keeps up, and grows without bound when it does not.
 *
 * Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <signal.h>

#include "access/htup_details.h"
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "commands/dbcommands.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "cleanup_stats.h"

/* Databases with figures of their own; more are cleaned but not counted. */
#define STATS_MAX_DATABASES 64

const char *const dedup_cleanup_stats_kind_names[DEDUP_NUM_KINDS] = {
	[DEDUP_KIND_CLAIM] = "claim",
	[DEDUP_KIND_RECORD] = "record",
	[DEDUP_KIND_OUTBOX] = "outbox",
	[DEDUP_KIND_STREAM] = "stream",
};

typedef struct StatsDatabase
{
	Oid			dboid;			/* InvalidOid: a free slot */
	TimestampTz touched;		/* last change, to reuse the least recent slot */
	DedupDatabaseState state;	/* what the worker last found there */
	int			pass_pid;		/* worker whose pass runs here, or 0 */
	int64		batches;		/* committed batches */
	int64		errors;			/* batches that rolled back, steps skipped */
	TimestampTz pass_started_at;	/* of the pass under way, or 0 */
	TimestampTz last_started_at;	/* of the last completed pass, or 0 */
	TimestampTz last_ended_at;
	int64		deleted_total[DEDUP_NUM_KINDS];
	int64		deleted_this_pass[DEDUP_NUM_KINDS];
	int64		deleted_last_pass[DEDUP_NUM_KINDS];
} StatsDatabase;

typedef struct StatsShared
{
	LWLock	   *lock;
	bool		reuse_logged;	/* a slot was reused, and that was logged */
	StatsDatabase databases[STATS_MAX_DATABASES];
} StatsShared;

static StatsShared *stats_shared = NULL;

/*
 * One batch of this backend's current transaction, not yet in the figures,
 * with the subtransaction it ran in.  Kept in TopMemoryContext until the
 * transaction ends.
 */
typedef struct StatsBatch
{
	SubTransactionId subid;
	bool		pass_start;
	bool		pass_end;
	TimestampTz started_at;
	int64		skipped;		/* steps rolled back alone, left to the next
								 * pass */
	int64		deleted[DEDUP_NUM_KINDS];
} StatsBatch;

static List *stats_batches = NIL;
static int64 stats_failed_batches = 0;	/* of aborted subtransactions */
static bool stats_callbacks_registered = false;

void
dedup_cleanup_stats_shmem_request(void)
{
	RequestAddinShmemSpace(MAXALIGN(sizeof(StatsShared)));
	RequestNamedLWLockTranche("dedup", 1);
}

void
dedup_cleanup_stats_shmem_startup(void)
{
	bool		found;

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	stats_shared = ShmemInitStruct("dedup cleanup figures", sizeof(StatsShared), &found);
	if (!found)
	{
		memset(stats_shared, 0, sizeof(StatsShared));
		stats_shared->lock = &(GetNamedLWLockTranche("dedup"))->lock;
	}
	LWLockRelease(AddinShmemInitLock);
}

/*
 * The slot of a database, taken when it has none yet: a free one, or else
 * the one that changed least recently.  Caller holds the lock exclusively;
 * *reused says whether another database's figures were dropped.
 */
static StatsDatabase *
stats_database_slot(Oid dboid, bool *reused)
{
	StatsDatabase *victim = NULL;

	*reused = false;
	for (int i = 0; i < STATS_MAX_DATABASES; i++)
	{
		StatsDatabase *db = &stats_shared->databases[i];

		if (db->dboid == dboid)
		{
			victim = db;
			break;
		}
		if (victim == NULL || (OidIsValid(victim->dboid) &&
							   (!OidIsValid(db->dboid) || db->touched < victim->touched)))
			victim = db;
	}
	if (victim->dboid != dboid)
	{
		*reused = OidIsValid(victim->dboid);
		memset(victim, 0, sizeof(StatsDatabase));
		victim->dboid = dboid;
	}
	victim->touched = GetCurrentTimestamp();
	return victim;
}

/* Lock the figures and find a database's slot; see stats_unlock(). */
static StatsDatabase *
stats_lock(Oid dboid, bool *reused)
{
	LWLockAcquire(stats_shared->lock, LW_EXCLUSIVE);
	return stats_database_slot(dboid, reused);
}

/* Unlock, and say once per server that figures were dropped for room. */
static void
stats_unlock(bool reused)
{
	bool		say = reused && !stats_shared->reuse_logged;

	if (say)
		stats_shared->reuse_logged = true;
	LWLockRelease(stats_shared->lock);
	if (say)
		ereport(LOG,
				(errmsg("dedup dropped the cleanup figures of a database to make room"),
				 errdetail("Cleanup figures are kept for %d databases at most; the least recently cleaned one gave way.",
						   STATS_MAX_DATABASES)));
}

/* Forget this transaction's batches. */
static void
stats_forget(void)
{
	list_free_deep(stats_batches);
	stats_batches = NIL;
	stats_failed_batches = 0;
}

/*
 * At commit, add the batches to the shared figures; at abort, count them as
 * errors.  A transaction that ran a batch cannot be prepared.
 */
static void
stats_xact_callback(XactEvent event, void *arg)
{
	StatsDatabase *db;
	bool		reused;
	ListCell   *lc;

	if (stats_batches == NIL && stats_failed_batches == 0)
		return;
	switch (event)
	{
		case XACT_EVENT_PRE_PREPARE:
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("cannot prepare a transaction that ran a dedup cleanup batch")));
			break;
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_ABORT:
			break;
		default:
			return;
	}

	db = stats_lock(MyDatabaseId, &reused);
	db->errors += stats_failed_batches;
	if (event == XACT_EVENT_ABORT)
		db->errors += list_length(stats_batches);
	else
	{
		foreach(lc, stats_batches)
		{
			StatsBatch *b = lfirst(lc);

			if (b->pass_start)
			{
				db->pass_started_at = b->started_at;
				memset(db->deleted_this_pass, 0, sizeof(db->deleted_this_pass));
			}
			db->batches++;
			db->errors += b->skipped;
			for (int k = 0; k < DEDUP_NUM_KINDS; k++)
			{
				db->deleted_total[k] += b->deleted[k];
				db->deleted_this_pass[k] += b->deleted[k];
			}
			if (b->pass_end)
			{
				/* a pass whose start we missed counts from its last batch */
				db->last_started_at = db->pass_started_at != 0 ?
					db->pass_started_at : b->started_at;
				db->last_ended_at = GetCurrentTimestamp();
				memcpy(db->deleted_last_pass, db->deleted_this_pass,
					   sizeof(db->deleted_last_pass));
				db->pass_started_at = 0;
			}
		}
	}
	stats_unlock(reused);
	stats_forget();
}

/*
 * A subtransaction that aborts takes its batches, and those of the
 * subtransactions under it (their ids are larger), with it.
 */
static void
stats_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
					   SubTransactionId parentSubid, void *arg)
{
	List	   *kept = NIL;
	ListCell   *lc;
	MemoryContext oldcxt;

	if (event != SUBXACT_EVENT_ABORT_SUB || stats_batches == NIL)
		return;
	/* the list outlives the subtransaction, whose memory goes now */
	oldcxt = MemoryContextSwitchTo(TopMemoryContext);
	foreach(lc, stats_batches)
	{
		StatsBatch *b = lfirst(lc);

		if (b->subid >= mySubid)
		{
			stats_failed_batches++;
			pfree(b);
		}
		else
			kept = lappend(kept, b);
	}
	list_free(stats_batches);
	stats_batches = kept;
	MemoryContextSwitchTo(oldcxt);
}

/*
 * A batch begins in the current (sub)transaction: from now on, its abort
 * counts as an error of the cleanup.
 */
void
dedup_cleanup_stats_begin_batch(bool pass_start)
{
	MemoryContext oldcxt;
	StatsBatch *b;

	if (stats_shared == NULL)
		return;
	if (!stats_callbacks_registered)
	{
		RegisterXactCallback(stats_xact_callback, NULL);
		RegisterSubXactCallback(stats_subxact_callback, NULL);
		stats_callbacks_registered = true;
	}
	oldcxt = MemoryContextSwitchTo(TopMemoryContext);
	b = palloc0(sizeof(StatsBatch));
	b->subid = GetCurrentSubTransactionId();
	b->pass_start = pass_start;
	b->started_at = GetCurrentStatementStartTimestamp();
	stats_batches = lappend(stats_batches, b);
	MemoryContextSwitchTo(oldcxt);
}

/*
 * The batch has done its work: whether it ended the pass, and how many rows
 * of each kind it deleted, to be counted when the transaction commits.
 */
void
dedup_cleanup_stats_end_batch(bool pass_end, const int64 deleted[DEDUP_NUM_KINDS])
{
	StatsBatch *b;

	if (stats_shared == NULL)
		return;
	b = llast(stats_batches);
	b->pass_end = pass_end;
	memcpy(b->deleted, deleted, sizeof(b->deleted));
}

/*
 * A step of the batch in progress was rolled back alone and left to the
 * next pass: an error of the figures once the batch commits.
 */
void
dedup_cleanup_stats_note_skipped(void)
{
	if (stats_shared == NULL || stats_batches == NIL)
		return;
	((StatsBatch *) llast(stats_batches))->skipped++;
}

/*
 * Record what the worker found in a database and return what it had found
 * before, so that only a change is logged.
 */
DedupDatabaseState
dedup_cleanup_stats_swap_state(Oid dboid, DedupDatabaseState state)
{
	StatsDatabase *db;
	DedupDatabaseState old;
	bool		reused;

	Assert(stats_shared != NULL);
	db = stats_lock(dboid, &reused);
	old = db->state;
	db->state = state;
	stats_unlock(reused);
	return old;
}

/* Clear this worker's claim on its database's pass (before_shmem_exit). */
static void
stats_end_pass(int code, Datum arg)
{
	bool		reused;
	StatsDatabase *db = stats_lock(DatumGetObjectId(arg), &reused);

	if (db->pass_pid == MyProcPid)
		db->pass_pid = 0;
	stats_unlock(reused);
}

/*
 * Claim a database's pass for this worker until it exits; false when a
 * pass of another worker still runs there (after a launcher restart, say).
 */
bool
dedup_cleanup_stats_begin_pass(Oid dboid)
{
	StatsDatabase *db;
	bool		reused;
	bool		mine;

	Assert(stats_shared != NULL);
	db = stats_lock(dboid, &reused);
	mine = (db->pass_pid == 0 || db->pass_pid == MyProcPid ||
			kill(db->pass_pid, 0) != 0);
	if (mine)
		db->pass_pid = MyProcPid;
	stats_unlock(reused);
	if (mine)
		before_shmem_exit(stats_end_pass, ObjectIdGetDatum(dboid));
	return mine;
}

static Datum
stats_interval_datum(int64 usecs)
{
	Interval   *result = palloc0(sizeof(Interval));

	result->time = usecs;
	return IntervalPGetDatum(result);
}

/*
 * dedup_cleanup_stats(all_databases boolean DEFAULT false)
 *	  RETURNS TABLE (datname name, kind text, rows_deleted bigint,
 *					 rows_deleted_last_pass bigint, last_pass_started_at timestamptz,
 *					 last_pass_duration interval, batches bigint, errors bigint,
 *					 cleanup_lag interval)
 *
 * One row per kind: of the current database, or of every database that has
 * figures.
 */
PG_FUNCTION_INFO_V1(dedup_cleanup_stats);
Datum
dedup_cleanup_stats(PG_FUNCTION_ARGS)
{
	bool		all_databases = PG_GETARG_BOOL(0);
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	StatsDatabase *copies;
	int			ncopies = 0;
	TimestampTz now = GetCurrentTimestamp();

	if (stats_shared == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("dedup cleanup figures are not available"),
				 errdetail("The figures live in shared memory, which dedup has only when it is in shared_preload_libraries."),
				 errhint("Add dedup to shared_preload_libraries and restart the server; "
						 "with pg_cron, cron.job_run_details records each cleanup run.")));

	InitMaterializedSRF(fcinfo, 0);

	copies = palloc0(sizeof(StatsDatabase) * STATS_MAX_DATABASES);
	LWLockAcquire(stats_shared->lock, LW_SHARED);
	for (int i = 0; i < STATS_MAX_DATABASES; i++)
	{
		StatsDatabase *db = &stats_shared->databases[i];

		if (OidIsValid(db->dboid) && (all_databases || db->dboid == MyDatabaseId))
			copies[ncopies++] = *db;
	}
	LWLockRelease(stats_shared->lock);

	/* the current database has figures, zero ones, before its first pass */
	if (ncopies == 0 && !all_databases)
		copies[ncopies++].dboid = MyDatabaseId;

	for (int i = 0; i < ncopies; i++)
	{
		StatsDatabase *db = &copies[i];
		char	   *datname = get_database_name(db->dboid);

		if (datname == NULL)
			continue;			/* dropped since */
		for (int k = 0; k < DEDUP_NUM_KINDS; k++)
		{
			Datum		values[9];
			bool		nulls[9] = {0};
			NameData	name;

			namestrcpy(&name, datname);
			values[0] = NameGetDatum(&name);
			values[1] = CStringGetTextDatum(dedup_cleanup_stats_kind_names[k]);
			values[2] = Int64GetDatum(db->deleted_total[k]);
			values[3] = Int64GetDatum(db->deleted_last_pass[k]);
			if (db->last_started_at != 0)
			{
				values[4] = TimestampTzGetDatum(db->last_started_at);
				values[5] = stats_interval_datum(db->last_ended_at - db->last_started_at);
				values[8] = stats_interval_datum(Max(now - db->last_started_at, 0));
			}
			else
				nulls[4] = nulls[5] = nulls[8] = true;
			values[6] = Int64GetDatum(db->batches);
			values[7] = Int64GetDatum(db->errors);
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
		}
	}
	return (Datum) 0;
}
