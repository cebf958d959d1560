/*-------------------------------------------------------------------------
 *
 * stats.c
 *	  The cleanup's figures: per database, the rows each kind lost to the
 *	  cleanup, the last pass's start and duration, batches, errors and the
 *	  cleanup lag.  They live in shared memory, so they exist only when the
 *	  library is in shared_preload_libraries; dedup_cleanup_stats() and the
 *	  view of the same name read them.
 *
 * Every batch, the worker's or a caller's of dedup_cleanup_batch(), notes
 * what it deleted in backend-local memory; a transaction callback adds it
 * to the shared figures when the transaction commits and counts an error
 * when it aborts, so a rolled-back batch never counts as deleted rows.
 *
 * The cleanup lag is an upper bound that costs nothing to keep: a pass
 * deletes every row it finds expired, so every expired row still present
 * expired after the last completed pass started.  The lag is the time since
 * then; it stays below the worker's interval plus one pass while the
 * cleanup keeps up, and grows without bound when it does not.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "commands/dbcommands.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "dedup.h"
#include "cleanup.h"

/* Databases with figures of their own; more are cleaned but not counted. */
#define STATS_MAX_DATABASES 64

const char *const dedup_kind_names[DEDUP_NUM_KINDS] = {
	[DEDUP_KIND_CLAIM] = "claim",
	[DEDUP_KIND_RECORD] = "record",
};

typedef struct StatsDatabase
{
	Oid			dboid;			/* InvalidOid: a free slot */
	DedupDatabaseState state;	/* what the worker last found there */
	int64		batches;		/* committed batches */
	int64		errors;			/* batches that rolled back */
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
	StatsDatabase databases[STATS_MAX_DATABASES];
} StatsShared;

static StatsShared *stats_shared = NULL;

/* What this backend's current transaction deleted, not yet in the figures. */
typedef struct StatsPending
{
	bool		active;
	bool		pass_start;
	bool		pass_end;
	TimestampTz pass_started_at;
	int64		batches;
	int64		deleted[DEDUP_NUM_KINDS];
} StatsPending;

static StatsPending stats_pending;
static bool stats_callback_registered = false;
static bool stats_full_logged = false;

void
dedup_stats_shmem_request(void)
{
	RequestAddinShmemSpace(MAXALIGN(sizeof(StatsShared)));
	RequestNamedLWLockTranche("dedup", 1);
}

void
dedup_stats_shmem_startup(void)
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
 * The slot of a database, taken when it has none yet; NULL when every slot
 * is taken.  Caller holds the lock exclusively.
 */
static StatsDatabase *
stats_database_slot(Oid dboid)
{
	StatsDatabase *free_slot = NULL;

	for (int i = 0; i < STATS_MAX_DATABASES; i++)
	{
		StatsDatabase *db = &stats_shared->databases[i];

		if (db->dboid == dboid)
			return db;
		if (free_slot == NULL && !OidIsValid(db->dboid))
			free_slot = db;
	}
	if (free_slot == NULL)
	{
		if (!stats_full_logged)
			ereport(LOG,
					(errmsg("dedup keeps cleanup figures for %d databases only",
							STATS_MAX_DATABASES),
					 errdetail("The cleanup of database %u runs, but is not counted.", dboid)));
		stats_full_logged = true;
		return NULL;
	}
	memset(free_slot, 0, sizeof(StatsDatabase));
	free_slot->dboid = dboid;
	return free_slot;
}

/* Add the pending figures to the shared ones (commit), or count an error. */
static void
stats_xact_callback(XactEvent event, void *arg)
{
	StatsDatabase *db;
	bool		committed;

	if (!stats_pending.active)
		return;
	switch (event)
	{
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PREPARE:
			committed = true;
			break;
		case XACT_EVENT_ABORT:
			committed = false;
			break;
		default:
			return;
	}

	LWLockAcquire(stats_shared->lock, LW_EXCLUSIVE);
	db = stats_database_slot(MyDatabaseId);
	if (db != NULL && !committed)
		db->errors++;
	else if (db != NULL)
	{
		if (stats_pending.pass_start)
		{
			db->pass_started_at = stats_pending.pass_started_at;
			memset(db->deleted_this_pass, 0, sizeof(db->deleted_this_pass));
		}
		db->batches += stats_pending.batches;
		for (int k = 0; k < DEDUP_NUM_KINDS; k++)
		{
			db->deleted_total[k] += stats_pending.deleted[k];
			db->deleted_this_pass[k] += stats_pending.deleted[k];
		}
		if (stats_pending.pass_end)
		{
			/* a pass whose start we missed counts from its last batch */
			db->last_started_at = db->pass_started_at != 0 ?
				db->pass_started_at : stats_pending.pass_started_at;
			db->last_ended_at = GetCurrentTimestamp();
			memcpy(db->deleted_last_pass, db->deleted_this_pass,
				   sizeof(db->deleted_last_pass));
			db->pass_started_at = 0;
		}
	}
	LWLockRelease(stats_shared->lock);
	memset(&stats_pending, 0, sizeof(stats_pending));
}

/*
 * A batch begins in the current transaction: from now on, an abort of the
 * transaction counts as an error of the cleanup.
 */
void
dedup_stats_begin_batch(bool pass_start)
{
	if (stats_shared == NULL)
		return;
	if (!stats_callback_registered)
	{
		RegisterXactCallback(stats_xact_callback, NULL);
		stats_callback_registered = true;
	}
	if (pass_start || !stats_pending.active)
		stats_pending.pass_started_at = GetCurrentStatementStartTimestamp();
	if (pass_start)
		stats_pending.pass_start = true;
	stats_pending.active = true;
}

/*
 * The batch has done its work: whether it ended the pass, and how many rows
 * of each kind it deleted, to be counted when the transaction commits.
 */
void
dedup_stats_end_batch(bool pass_end, const int64 deleted[DEDUP_NUM_KINDS])
{
	if (stats_shared == NULL)
		return;
	stats_pending.pass_end = pass_end;
	stats_pending.batches++;
	for (int k = 0; k < DEDUP_NUM_KINDS; k++)
		stats_pending.deleted[k] += deleted[k];
}

/*
 * Record what the worker found in a database and return what it had found
 * before, so that only a change is logged.  Without shared memory there is
 * no memory of the past: every state is news.
 */
DedupDatabaseState
dedup_stats_swap_state(Oid dboid, DedupDatabaseState state)
{
	StatsDatabase *db;
	DedupDatabaseState old = DEDUP_DB_UNKNOWN;

	if (stats_shared == NULL)
		return old;
	LWLockAcquire(stats_shared->lock, LW_EXCLUSIVE);
	db = stats_database_slot(dboid);
	if (db != NULL)
	{
		old = db->state;
		db->state = state;
	}
	LWLockRelease(stats_shared->lock);
	return old;
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
	bool		all_databases = !PG_ARGISNULL(0) && PG_GETARG_BOOL(0);
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
			values[1] = CStringGetTextDatum(dedup_kind_names[k]);
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
