/*-------------------------------------------------------------------------
 *
 * worker.c
 *	  The cleanup background worker.  With dedup in shared_preload_libraries
 *	  the postmaster starts a launcher; every dedup.cleanup_interval the
 *	  launcher starts, for each database named in dedup.cleanup_databases, a
 *	  cleanup worker that connects there, runs one cleanup pass (cleanup.c),
 *	  one transaction per batch, and exits.
 *
 * Modelled on worker_spi and pg_prewarm's autoprewarm: WaitLatch, ResetLatch
 * and CHECK_FOR_INTERRUPTS in every loop, SIGTERM handled by die() so a
 * batch under way is rolled back at once, SIGHUP re-reading the settings.
 *
 * Why a worker per pass rather than one per database for good: a worker
 * holds a connection to its database only while it cleans, so DROP
 * DATABASE and CREATE DATABASE ... TEMPLATE are not refused for it between
 * passes; the launcher alone knows the schedule, so a changed interval or
 * list of databases takes effect at the next wake-up.  Databases are
 * cleaned independently: a long pass in one does not delay another.
 *
 * Both start only when recovery has finished: on a standby there is
 * nothing to clean (and nothing may be written); after promotion the
 * postmaster starts the launcher.  A worker connects as the bootstrap
 * superuser, so that no CONNECT privilege, connection limit or LOGIN can
 * refuse it at every interval, and cleans as dedup.cleanup_role.  A
 * database that does not exist, allows no connections or lacks the
 * extension, and a role that does not exist or may not delete, are each
 * logged when first met, then skipped quietly until that changes.  One
 * pass at a time runs in a database.
 *
 * Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/pg_database.h"
#include "commands/dbcommands.h"
#include "commands/extension.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "tcop/tcopprot.h"
#include "utils/acl.h"
#include "utils/backend_status.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"
#include "utils/varlena.h"

#include "catalog.h"
#include "cleanup.h"
#include "cleanup_stats.h"
#include "settings.h"
#include "worker.h"

PGDLLEXPORT void dedup_worker_launcher_main(Datum main_arg);
PGDLLEXPORT void dedup_worker_main(Datum main_arg);

/*
 * A cleanup worker waits at most this long for a lock, so that it never
 * queues behind DDL (and so never makes others queue behind it); a pass
 * that times out stops and is retried at the next interval.
 */
#define WORKER_LOCK_TIMEOUT "100ms"

/* The launcher sleeps this long when it has nothing scheduled. */
#define LAUNCHER_IDLE_MS	(3600 * 1000L)

/* A worker that could not be started is tried again this much later. */
#define LAUNCHER_RETRY_USECS	(10 * USECS_PER_SEC)

/* The launcher's memory of one database of dedup.cleanup_databases */
typedef struct LauncherDatabase
{
	char		name[NAMEDATALEN];
	TimestampTz last_start;		/* of its last pass, 0 if none yet */
	const char *logged;			/* why it is skipped, as last logged, or NULL */
	BackgroundWorkerHandle *handle; /* of its worker, while one may run */
} LauncherDatabase;

static LauncherDatabase *launcher_databases = NULL;
static int	launcher_ndatabases = 0;
static bool launcher_no_slot_logged = false;

/*
 * Register the launcher; called from _PG_init while shared_preload_libraries
 * is processed.
 */
void
dedup_worker_register_launcher(void)
{
	BackgroundWorker worker;

	memset(&worker, 0, sizeof(worker));
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker.bgw_restart_time = 10;
	strlcpy(worker.bgw_library_name, "dedup", BGW_MAXLEN);
	strlcpy(worker.bgw_function_name, "dedup_worker_launcher_main", BGW_MAXLEN);
	strlcpy(worker.bgw_name, "dedup cleanup launcher", BGW_MAXLEN);
	strlcpy(worker.bgw_type, "dedup cleanup launcher", BGW_MAXLEN);
	RegisterBackgroundWorker(&worker);
}

/*
 * (Re)read dedup.cleanup_databases, keeping what the launcher knows of the
 * databases that stay on the list.  The GUC's check hook has validated the
 * syntax already.
 */
static void
launcher_read_databases(void)
{
	char	   *raw = pstrdup(dedup_cleanup_databases ? dedup_cleanup_databases : "");
	List	   *names = NIL;
	LauncherDatabase *old = launcher_databases;
	int			nold = launcher_ndatabases;
	ListCell   *lc;
	int			n = 0;

	if (!SplitIdentifierString(raw, ',', &names))
		names = NIL;
	launcher_databases = MemoryContextAllocZero(TopMemoryContext,
												sizeof(LauncherDatabase) * Max(list_length(names), 1));
	foreach(lc, names)
	{
		const char *name = lfirst(lc);
		LauncherDatabase *db = &launcher_databases[n];
		bool		duplicate = false;

		for (int i = 0; i < n; i++)
			duplicate |= (strcmp(launcher_databases[i].name, name) == 0);
		if (duplicate)
			continue;
		strlcpy(db->name, name, NAMEDATALEN);
		for (int i = 0; i < nold; i++)
		{
			if (strcmp(old[i].name, db->name) == 0)
			{
				*db = old[i];
				old[i].handle = NULL;
			}
		}
		n++;
	}
	/* workers of databases taken off the list finish their pass alone */
	for (int i = 0; i < nold; i++)
	{
		if (old[i].handle != NULL)
			pfree(old[i].handle);
	}
	if (old != NULL)
		pfree(old);
	launcher_ndatabases = n;
	list_free(names);
	pfree(raw);
}

/*
 * Why a database cannot be cleaned, as far as pg_database says: it does not
 * exist, allows no connections, or is invalid (an interrupted DROP
 * DATABASE); NULL when it can, with its OID.  The launcher is connected to
 * no database, and may have started before any backend wrote the shared
 * relcache init file, so it reads the catalog's heap and uses no index
 * (autovacuum's launcher reads pg_database so too).
 */
static const char *
launcher_lookup_database(const char *name, Oid *dboid)
{
	Relation	rel = table_open(DatabaseRelationId, AccessShareLock);
	TableScanDesc scan = table_beginscan_catalog(rel, 0, NULL);
	HeapTuple	tuple;
	const char *problem = "it does not exist";

	*dboid = InvalidOid;
	while ((tuple = heap_getnext(scan, ForwardScanDirection)) != NULL)
	{
		Form_pg_database form = (Form_pg_database) GETSTRUCT(tuple);

		if (strcmp(NameStr(form->datname), name) != 0)
			continue;
		*dboid = form->oid;
		if (database_is_invalid_form(form))
			problem = "it is invalid";
		else if (!form->datallowconn)
			problem = "it does not allow connections";
		else
			problem = NULL;
		break;
	}
	table_endscan(scan);
	table_close(rel, AccessShareLock);
	return problem;
}

/* Say once why a listed database is skipped. */
static void
launcher_log_skip(LauncherDatabase *db, const char *problem)
{
	if (db->logged != NULL && strcmp(db->logged, problem) == 0)
		return;
	db->logged = problem;
	if (strcmp(problem, "it does not exist") == 0)
		ereport(LOG,
				(errmsg("dedup cleanup skips database \"%s\": it does not exist", db->name),
				 errhint("Create the database, or remove it from dedup.cleanup_databases.")));
	else if (strcmp(problem, "it does not allow connections") == 0)
		ereport(LOG,
				(errmsg("dedup cleanup skips database \"%s\": it does not allow connections", db->name),
				 errhint("Run ALTER DATABASE ... WITH ALLOW_CONNECTIONS true, or remove it from dedup.cleanup_databases.")));
	else
		ereport(LOG,
				(errmsg("dedup cleanup skips database \"%s\": it is invalid", db->name),
				 errdetail("A DROP DATABASE of it was interrupted."),
				 errhint("Drop it, or remove it from dedup.cleanup_databases.")));
}

/* Start the cleanup worker of one database; false when no slot was free. */
static bool
launcher_start_worker(LauncherDatabase *db, Oid dboid)
{
	BackgroundWorker worker;
	MemoryContext oldcxt;
	bool		started;

	memset(&worker, 0, sizeof(worker));
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker.bgw_restart_time = BGW_NEVER_RESTART;
	strlcpy(worker.bgw_library_name, "dedup", BGW_MAXLEN);
	strlcpy(worker.bgw_function_name, "dedup_worker_main", BGW_MAXLEN);
	snprintf(worker.bgw_name, BGW_MAXLEN, "dedup cleanup worker for database %s", db->name);
	strlcpy(worker.bgw_type, "dedup cleanup worker", BGW_MAXLEN);
	worker.bgw_main_arg = ObjectIdGetDatum(dboid);
	worker.bgw_notify_pid = MyProcPid;

	/* the handle outlives the transaction the launcher is in */
	oldcxt = MemoryContextSwitchTo(TopMemoryContext);
	started = RegisterDynamicBackgroundWorker(&worker, &db->handle);
	MemoryContextSwitchTo(oldcxt);
	if (!started)
	{
		db->handle = NULL;
		if (!launcher_no_slot_logged)
			ereport(LOG,
					(errmsg("dedup cleanup could not start a worker for database \"%s\"", db->name),
					 errdetail("All background worker slots are in use."),
					 errhint("Increase max_worker_processes.")));
		launcher_no_slot_logged = true;
		return false;
	}
	launcher_no_slot_logged = false;
	return true;
}

/*
 * Start the passes that are due; returns how long to sleep, in ms, before
 * the next one is.  A worker's exit wakes the launcher (bgw_notify_pid).
 */
static long
launcher_schedule(void)
{
	TimestampTz now = GetCurrentTimestamp();
	int64		interval = (int64) dedup_cleanup_interval * USECS_PER_SEC;
	int64		sleep_usecs = LAUNCHER_IDLE_MS * 1000;
	bool		in_xact = false;

	if (!dedup_cleanup_enabled)
		return LAUNCHER_IDLE_MS;

	for (int i = 0; i < launcher_ndatabases; i++)
	{
		LauncherDatabase *db = &launcher_databases[i];
		TimestampTz due;
		Oid			dboid;
		const char *problem;
		pid_t		pid;

		if (db->handle != NULL)
		{
			if (GetBackgroundWorkerPid(db->handle, &pid) != BGWH_STOPPED)
				continue;		/* still cleaning; its exit wakes us */
			pfree(db->handle);
			db->handle = NULL;
		}
		/* a clock that stepped back does not hold a database back */
		if (db->last_start > now)
			db->last_start = now;
		due = db->last_start == 0 ? now : db->last_start + interval;
		if (due > now)
		{
			sleep_usecs = Min(sleep_usecs, due - now);
			continue;
		}

		/* due: look the database up in pg_database */
		if (!in_xact)
		{
			SetCurrentStatementStartTimestamp();
			StartTransactionCommand();
			in_xact = true;
		}
		db->last_start = now;
		sleep_usecs = Min(sleep_usecs, interval);
		problem = launcher_lookup_database(db->name, &dboid);
		if (problem != NULL)
		{
			launcher_log_skip(db, problem);
			continue;
		}
		db->logged = NULL;
		if (!launcher_start_worker(db, dboid))
		{
			/* no free slot: try again a little later, not at every wake-up */
			db->last_start = now - interval + Min(interval, LAUNCHER_RETRY_USECS);
			sleep_usecs = Min(sleep_usecs, Min(interval, LAUNCHER_RETRY_USECS));
		}
	}
	if (in_xact)
	{
		CommitTransactionCommand();
		pgstat_report_stat(false);
	}
	return (long) ((sleep_usecs + 999) / 1000);
}

void
dedup_worker_launcher_main(Datum main_arg)
{
	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();

	/* no database: the launcher reads only shared catalogs */
	BackgroundWorkerInitializeConnection(NULL, NULL, 0);
	pgstat_report_activity(STATE_IDLE, NULL);

	launcher_read_databases();
	if (dedup_cleanup_enabled)
		ereport(LOG,
				(errmsg("dedup cleanup launcher started"),
				 errdetail("It cleans the databases \"%s\" every %d s.",
						   dedup_cleanup_databases ? dedup_cleanup_databases : "",
						   dedup_cleanup_interval)));
	else
		ereport(LOG,
				(errmsg("dedup cleanup launcher started"),
				 errdetail("Cleanup is off: dedup.cleanup_enabled is false.")));

	for (;;)
	{
		long		sleep_ms;

		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
			launcher_read_databases();
		}
		sleep_ms = launcher_schedule();
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 sleep_ms, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}
}

/*
 * Whether this database can be cleaned, and by which role; a change from
 * what the last worker here found is logged.
 */
static bool
worker_check_database(Oid *roleoid)
{
	DedupDatabaseState state;
	char	   *datname;
	const char *role = dedup_cleanup_role ? dedup_cleanup_role : "";

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	datname = get_database_name(MyDatabaseId);
	*roleoid = (role[0] == '\0') ? GetUserId() : get_role_oid(role, true);
	if (!OidIsValid(get_extension_oid("dedup", true)))
		state = DEDUP_DB_NO_EXTENSION;
	else if (!OidIsValid(*roleoid))
		state = DEDUP_DB_NO_ROLE;
	else if (XactReadOnly)
		state = DEDUP_DB_READ_ONLY;
	else if (pg_class_aclcheck(dedup_catalog_relation_lookup(DEDUP_REL_CLAIMS), *roleoid,
							   ACL_DELETE) != ACLCHECK_OK ||
			 pg_class_aclcheck(dedup_catalog_relation_lookup(DEDUP_REL_OUTBOX_KEYS), *roleoid,
							   ACL_DELETE) != ACLCHECK_OK)
		state = DEDUP_DB_NOT_PERMITTED;
	else
		state = DEDUP_DB_CLEANING;

	if (dedup_cleanup_stats_swap_state(MyDatabaseId, state) != state)
	{
		switch (state)
		{
			case DEDUP_DB_NO_ROLE:
				ereport(LOG,
						(errmsg("dedup cleanup skips database \"%s\": role \"%s\" does not exist",
								datname, role),
						 errhint("Create the role, or change dedup.cleanup_role.")));
				break;
			case DEDUP_DB_NO_EXTENSION:
				ereport(LOG,
						(errmsg("dedup cleanup skips database \"%s\": extension \"dedup\" is not installed there",
								datname),
						 errhint("Run CREATE EXTENSION dedup there, or remove the database from dedup.cleanup_databases.")));
				break;
			case DEDUP_DB_READ_ONLY:
				ereport(LOG,
						(errmsg("dedup cleanup skips database \"%s\": its transactions are read-only",
								datname),
						 errdetail("default_transaction_read_only is on for it.")));
				break;
			case DEDUP_DB_NOT_PERMITTED:
				ereport(LOG,
						(errmsg("dedup cleanup skips database \"%s\": role \"%s\" may not delete from dedup.claims and dedup.outbox_keys",
								datname, GetUserNameFromId(*roleoid, false)),
						 errhint("Set dedup.cleanup_role to the extension's owner, or grant the role DELETE on both tables (and on dedup.streams).")));
				break;
			case DEDUP_DB_CLEANING:
				ereport(LOG,
						(errmsg("dedup cleanup is cleaning database \"%s\"", datname)));
				break;
			case DEDUP_DB_UNKNOWN:
				break;
		}
	}
	CommitTransactionCommand();
	return state == DEDUP_DB_CLEANING;
}

/*
 * One cleanup pass, a transaction per batch, pausing dedup.cleanup_pause
 * between batches.  A batch that fails is reported, and the pass goes on
 * with the next stage (cleanup.c): a table that cannot be cleaned now (a
 * lock not granted within the worker's lock_timeout) holds back neither the
 * buckets' work nor the trimming of the outbox's log.  The stage is tried
 * again at the next interval.
 */
static void
worker_run_pass(void)
{
	int64		position = 0;
	volatile int64 failed_at = 0;

	while (position != DEDUP_CLEANUP_DONE)
	{
		bool		failed = false;

		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}
		if (!dedup_cleanup_enabled)
			break;

		SetCurrentStatementStartTimestamp();
		StartTransactionCommand();
		PushActiveSnapshot(GetTransactionSnapshot());
		pgstat_report_activity(STATE_RUNNING, "dedup cleanup: deleting expired claims, records and outbox keys");
		PG_TRY();
		{
			failed_at = position;
			(void) dedup_cleanup_run_batch(&position, dedup_cleanup_batch_size);
			PopActiveSnapshot();
			CommitTransactionCommand();
			/* the deleted rows reach autovacuum now, not when the pass ends */
			pgstat_report_stat(false);
		}
		PG_CATCH();
		{
			HOLD_INTERRUPTS();
			EmitErrorReport();
			AbortCurrentTransaction();
			FlushErrorState();
			RESUME_INTERRUPTS();
			failed = true;
		}
		PG_END_TRY();
		pgstat_report_activity(STATE_IDLE, NULL);
		if (failed)
			position = dedup_cleanup_next_stage(failed_at);

		if (position != DEDUP_CLEANUP_DONE && dedup_cleanup_pause > 0)
		{
			(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
							 dedup_cleanup_pause, PG_WAIT_EXTENSION);
			ResetLatch(MyLatch);
		}
	}
}

void
dedup_worker_main(Datum main_arg)
{
	Oid			dboid = DatumGetObjectId(main_arg);
	Oid			roleoid;

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	BackgroundWorkerInitializeConnectionByOid(dboid, InvalidOid, 0);
	SetConfigOption("lock_timeout", WORKER_LOCK_TIMEOUT, PGC_SUSET, PGC_S_OVERRIDE);

	if (!dedup_cleanup_stats_begin_pass(dboid))
	{
		elog(DEBUG1, "dedup cleanup: a pass already runs in this database");
		proc_exit(0);
	}
	if (worker_check_database(&roleoid))
	{
		/* the pass runs with the role's identity */
		SetUserIdAndSecContext(roleoid, SECURITY_LOCAL_USERID_CHANGE);
		worker_run_pass();
	}
	proc_exit(0);
}
