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
 * postmaster starts the launcher.  A database that does not exist, one
 * without the extension, and a role that may not clean are each logged
 * when first met, then skipped quietly until that changes.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/pg_authid.h"
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

#include "dedup.h"
#include "cleanup.h"

PGDLLEXPORT void dedup_launcher_main(Datum main_arg);
PGDLLEXPORT void dedup_worker_main(Datum main_arg);

/*
 * A cleanup worker waits at most this long for a lock, so that it never
 * queues behind DDL (and so never makes others queue behind it); a pass
 * that times out stops and is retried at the next interval.
 */
#define WORKER_LOCK_TIMEOUT "100ms"

/* The launcher sleeps this long when it has nothing scheduled. */
#define LAUNCHER_IDLE_MS	(3600 * 1000L)

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
static char *launcher_role_logged = NULL;	/* what was last logged of the role */
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
	strlcpy(worker.bgw_function_name, "dedup_launcher_main", BGW_MAXLEN);
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
 * The OID of a database or role by name, or InvalidOid, and whether a worker
 * can connect with it (datallowconn, rolcanlogin): a worker refused at
 * connection would die at every interval.  The launcher is connected to no
 * database, and may have started before any backend wrote the shared
 * relcache init file, so it reads the catalog's heap and uses no index
 * (autovacuum's launcher reads pg_database so too).
 */
static Oid
launcher_lookup(Oid catalog, const char *name, bool *can_connect)
{
	Relation	rel = table_open(catalog, AccessShareLock);
	TableScanDesc scan = table_beginscan_catalog(rel, 0, NULL);
	HeapTuple	tuple;
	Oid			result = InvalidOid;

	while ((tuple = heap_getnext(scan, ForwardScanDirection)) != NULL)
	{
		if (catalog == DatabaseRelationId)
		{
			Form_pg_database form = (Form_pg_database) GETSTRUCT(tuple);

			if (strcmp(NameStr(form->datname), name) == 0)
			{
				result = form->oid;
				*can_connect = form->datallowconn;
			}
		}
		else
		{
			Form_pg_authid form = (Form_pg_authid) GETSTRUCT(tuple);

			Assert(catalog == AuthIdRelationId);
			if (strcmp(NameStr(form->rolname), name) == 0)
			{
				result = form->oid;
				*can_connect = form->rolcanlogin;
			}
		}
		if (OidIsValid(result))
			break;
	}
	table_endscan(scan);
	table_close(rel, AccessShareLock);
	return result;
}

/*
 * The role the workers connect as (InvalidOid: the bootstrap superuser), or
 * false when there is none they can connect as; that is logged once.
 */
static bool
launcher_role(Oid *roleoid)
{
	bool		can_login = false;
	char	   *problem;

	*roleoid = InvalidOid;
	if (dedup_cleanup_role == NULL || dedup_cleanup_role[0] == '\0')
		return true;
	*roleoid = launcher_lookup(AuthIdRelationId, dedup_cleanup_role, &can_login);
	if (OidIsValid(*roleoid) && can_login)
	{
		if (launcher_role_logged != NULL)
			pfree(launcher_role_logged);
		launcher_role_logged = NULL;
		return true;
	}
	problem = psprintf("role \"%s\" %s", dedup_cleanup_role,
					   OidIsValid(*roleoid) ? "cannot log in" : "does not exist");
	if (launcher_role_logged == NULL || strcmp(launcher_role_logged, problem) != 0)
	{
		ereport(LOG,
				(errmsg("dedup cleanup is idle: %s", problem),
				 errhint("Create the role with LOGIN, or change dedup.cleanup_role.")));
		if (launcher_role_logged != NULL)
			pfree(launcher_role_logged);
		launcher_role_logged = MemoryContextStrdup(TopMemoryContext, problem);
	}
	return false;
}

/* Start the cleanup worker of one database; false when no slot was free. */
static bool
launcher_start_worker(LauncherDatabase *db, Oid dboid, Oid roleoid)
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
	memcpy(worker.bgw_extra, &roleoid, sizeof(Oid));
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
	long		sleep_ms = LAUNCHER_IDLE_MS;
	bool		in_xact = false;
	bool		role_ok = false;
	Oid			roleoid = InvalidOid;

	if (!dedup_cleanup_enabled)
		return sleep_ms;

	for (int i = 0; i < launcher_ndatabases; i++)
	{
		LauncherDatabase *db = &launcher_databases[i];
		TimestampTz due;
		Oid			dboid;
		bool		can_connect = false;
		pid_t		pid;

		if (db->handle != NULL)
		{
			if (GetBackgroundWorkerPid(db->handle, &pid) != BGWH_STOPPED)
				continue;		/* still cleaning; its exit wakes us */
			pfree(db->handle);
			db->handle = NULL;
		}
		due = db->last_start == 0 ? now : db->last_start + interval;
		if (due > now)
		{
			sleep_ms = Min(sleep_ms, (long) ((due - now + 999) / 1000));
			continue;
		}

		/* due: look up the role and the database in the shared catalogs */
		if (!in_xact)
		{
			SetCurrentStatementStartTimestamp();
			StartTransactionCommand();
			in_xact = true;
			role_ok = launcher_role(&roleoid);
		}
		db->last_start = now;
		sleep_ms = Min(sleep_ms, (long) (interval / 1000));
		if (!role_ok)
			continue;
		dboid = launcher_lookup(DatabaseRelationId, db->name, &can_connect);
		if (!OidIsValid(dboid) || !can_connect)
		{
			const char *problem = OidIsValid(dboid) ?
				"it does not allow connections" : "it does not exist";

			if (db->logged == NULL || strcmp(db->logged, problem) != 0)
				ereport(LOG,
						(errmsg("dedup cleanup skips database \"%s\": %s", db->name, problem),
						 errhint("Remove it from dedup.cleanup_databases, or create it (with ALLOW_CONNECTIONS).")));
			db->logged = problem;
			continue;
		}
		db->logged = NULL;
		if (!launcher_start_worker(db, dboid, roleoid))
			db->last_start = 0;	/* try again soon */
	}
	if (in_xact)
		CommitTransactionCommand();
	/* a worker that could not start is retried in a second */
	for (int i = 0; i < launcher_ndatabases; i++)
	{
		if (launcher_databases[i].last_start == 0)
			sleep_ms = Min(sleep_ms, 1000L);
	}
	return sleep_ms;
}

void
dedup_launcher_main(Datum main_arg)
{
	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();

	/* no database: the launcher reads only shared catalogs */
	BackgroundWorkerInitializeConnection(NULL, NULL, 0);
	pgstat_report_activity(STATE_IDLE, NULL);

	launcher_read_databases();
	ereport(LOG,
			(errmsg("dedup cleanup launcher started"),
			 errdetail("Databases: \"%s\"; interval: %d s; %s.",
					   dedup_cleanup_databases ? dedup_cleanup_databases : "",
					   dedup_cleanup_interval,
					   dedup_cleanup_enabled ? "enabled" : "disabled (dedup.cleanup_enabled is off)")));

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
 * Whether this database can be cleaned, by this role; a change from what
 * the last worker here found is logged.
 */
static bool
worker_check_database(void)
{
	DedupDatabaseState state;
	DedupDatabaseState before;
	char	   *datname;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	datname = get_database_name(MyDatabaseId);
	if (!OidIsValid(get_extension_oid("dedup", true)))
		state = DEDUP_DB_NO_EXTENSION;
	else if (pg_class_aclcheck(dedup_relation_oid(DEDUP_REL_CLAIMS), GetUserId(),
							   ACL_DELETE) != ACLCHECK_OK)
		state = DEDUP_DB_NOT_PERMITTED;
	else
		state = DEDUP_DB_CLEANING;

	before = dedup_stats_swap_state(MyDatabaseId, state);
	if (state != before)
	{
		switch (state)
		{
			case DEDUP_DB_NO_EXTENSION:
				ereport(LOG,
						(errmsg("dedup cleanup skips database \"%s\": extension \"dedup\" is not installed there",
								datname),
						 errhint("Run CREATE EXTENSION dedup there, or remove the database from dedup.cleanup_databases.")));
				break;
			case DEDUP_DB_NOT_PERMITTED:
				ereport(LOG,
						(errmsg("dedup cleanup skips database \"%s\": role \"%s\" may not delete from dedup.claims",
								datname, GetUserNameFromId(GetUserId(), false)),
						 errhint("Set dedup.cleanup_role to the extension's owner, or grant the role DELETE on dedup.claims.")));
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
 * between batches.  A batch that fails is reported and ends the pass; the
 * next one starts at the next interval.
 */
static void
worker_run_pass(void)
{
	int64		position = 0;

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
		pgstat_report_activity(STATE_RUNNING, "dedup cleanup: deleting expired claims and records");
		PG_TRY();
		{
			(void) dedup_cleanup_run_batch(&position, dedup_cleanup_batch_size);
			PopActiveSnapshot();
			CommitTransactionCommand();
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
			break;

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

	memcpy(&roleoid, MyBgworkerEntry->bgw_extra, sizeof(Oid));
	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	BackgroundWorkerInitializeConnectionByOid(dboid, roleoid, 0);
	SetConfigOption("lock_timeout", WORKER_LOCK_TIMEOUT, PGC_SUSET, PGC_S_OVERRIDE);

	if (worker_check_database())
		worker_run_pass();
	proc_exit(0);
}
