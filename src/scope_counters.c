/*-------------------------------------------------------------------------
 *
 * scope_counters.c
 *	  Per-scope call counters in shared memory, for monitoring: claims that
 *	  were new and duplicates, records started, replayed, completed and
 *	  released, outbox events put, taken, acked and nacked.
 *	  dedup_scope_stats() and the view of the same name read them.
 *
 * A call counts when it returns, whether or not its transaction commits, as
 * pg_stat_statements counts calls: the counters say what callers were
 * answered, not what the tables hold.  They live in shared memory, so they
 * exist only when the library is in shared_preload_libraries, and start
 * again from zero at a restart.
 *
 * A fixed table of SCOPESTATS_MAX entries, keyed by database and scope, is
 * filled as scopes are first counted and never emptied before a restart:
 * a backend keeps a pointer to the entry of each scope it uses (in its scope
 * cache, scope.c), and a call counts with one atomic add, without a lock.
 *
 * The counters are the extension's, as its scopes are: after DROP EXTENSION
 * dedup and CREATE EXTENSION dedup, a scope of the same name is another
 * scope, counted from zero.  The entry stays the name's (so that dropping
 * and creating the extension again, as test suites do, takes no more of the
 * table), and notes the extension it counts for, by the OID of its
 * dedup.scopes: the first look-up of the scope by another extension (every
 * backend looks its counters up again once the scope cache was emptied,
 * which the drop of dedup.scopes does) sets it to zero for that one.  As
 * the transaction that drops the extension commits (module.c's hook calls
 * dedup_scope_counters_forget_database), the database's entries are set to zero
 * and marked dropped, no longer shown; where that hook did not run (a
 * prepared transaction, a standby replaying the drop), the first look-up by
 * the new extension marks the database's entries of the old one.  Readers
 * of the current database show its current extension's entries only,
 * whatever the marks.  (A new dedup.scopes given the OID of the dropped
 * one, once the OID counter wrapped, is told apart only by the hook.)
 * Once all but the last 64 entries are taken, a further scope counts in its
 * database's entry for other scopes (an empty scope name, shown as NULL);
 * those 64 are for such entries, and a database that finds none left is
 * not counted (a server would need over 4,000 scopes in more than 64
 * databases).  Entries of a dropped database stay until a restart; a scope
 * used only for sequence marks has an entry of zeros.
 *
 * Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "commands/dbcommands.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"

#include "catalog.h"
#include "checks.h"
#include "scope_counters.h"

#define SCOPESTATS_MAX	4096

typedef struct ScopeStatsKey
{
	Oid			dboid;
	char		scope[DEDUP_MAX_SCOPE_BYTES + 1];	/* "": other scopes */
} ScopeStatsKey;

struct DedupScopeCounters
{
	ScopeStatsKey key;			/* hash key: first */
	/* both written under the exclusive lock */
	Oid			scopes;			/* the extension's dedup.scopes it counts for */
	bool		dropped;		/* that extension was dropped: not shown */
	pg_atomic_uint64 count[DEDUP_NUM_COUNTERS];
};

typedef struct ScopeStatsShared
{
	LWLock	   *lock;			/* adding entries; counting takes none */
	int			nentries;
} ScopeStatsShared;

static ScopeStatsShared *scopestats_shared = NULL;
static HTAB *scopestats_hash = NULL;

/* column names of dedup_scope_stats(), by DedupCounter */
static const char *const scopestats_names[DEDUP_NUM_COUNTERS] = {
	[DEDUP_COUNT_CLAIMS] = "claims",
	[DEDUP_COUNT_DUPLICATES] = "duplicates",
	[DEDUP_COUNT_RECORDS_STARTED] = "records_started",
	[DEDUP_COUNT_RECORDS_REPLAYED] = "records_replayed",
	[DEDUP_COUNT_RECORDS_COMPLETED] = "records_completed",
	[DEDUP_COUNT_RECORDS_RELEASED] = "records_released",
	[DEDUP_COUNT_EVENTS_PUT] = "events_put",
	[DEDUP_COUNT_EVENTS_TAKEN] = "events_taken",
	[DEDUP_COUNT_EVENTS_ACKED] = "events_acked",
	[DEDUP_COUNT_EVENTS_NACKED] = "events_nacked",
};

static Size
scopestats_size(void)
{
	return add_size(MAXALIGN(sizeof(ScopeStatsShared)),
					hash_estimate_size(SCOPESTATS_MAX, sizeof(DedupScopeCounters)));
}

void
dedup_scope_counters_shmem_request(void)
{
	RequestAddinShmemSpace(scopestats_size());
	RequestNamedLWLockTranche("dedup scope counters", 1);
}

void
dedup_scope_counters_shmem_startup(void)
{
	HASHCTL		info;
	bool		found;

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	scopestats_shared = ShmemInitStruct("dedup scope counters", sizeof(ScopeStatsShared), &found);
	if (!found)
	{
		scopestats_shared->lock = &(GetNamedLWLockTranche("dedup scope counters"))->lock;
		scopestats_shared->nentries = 0;
	}
	info.keysize = sizeof(ScopeStatsKey);
	info.entrysize = sizeof(DedupScopeCounters);
	scopestats_hash = ShmemInitHash("dedup scope counters hash", SCOPESTATS_MAX, SCOPESTATS_MAX,
									&info, HASH_ELEM | HASH_BLOBS);
	LWLockRelease(AddinShmemInitLock);
}

/*
 * Set to zero and mark dropped the entries of the current database but
 * those of the extension whose dedup.scopes is kept (InvalidOid: every one).
 * Under the exclusive lock.
 */
static void
scopestats_drop_others(Oid kept)
{
	HASH_SEQ_STATUS seq;
	DedupScopeCounters *entry;

	hash_seq_init(&seq, scopestats_hash);
	while ((entry = hash_seq_search(&seq)) != NULL)
	{
		if (entry->key.dboid != MyDatabaseId || entry->dropped || entry->scopes == kept)
			continue;
		for (int i = 0; i < DEDUP_NUM_COUNTERS; i++)
			pg_atomic_write_u64(&entry->count[i], 0);
		entry->dropped = true;
	}
}

/*
 * The counters of a scope of the current database's extension, added when
 * it has none yet; NULL when dedup is not preloaded.  The caller keeps the
 * pointer: an entry is never removed.
 */
DedupScopeCounters *
dedup_scope_counters_get(const char *scope)
{
	ScopeStatsKey key;
	DedupScopeCounters *entry;
	bool		found;
	Oid			scopes;

	if (scopestats_shared == NULL)
		return NULL;
	scopes = dedup_catalog_relation_oid(DEDUP_REL_SCOPES);
	memset(&key, 0, sizeof(key));
	key.dboid = MyDatabaseId;
	strlcpy(key.scope, scope, sizeof(key.scope));

	LWLockAcquire(scopestats_shared->lock, LW_SHARED);
	entry = hash_search(scopestats_hash, &key, HASH_FIND, NULL);
	found = entry != NULL && !entry->dropped && entry->scopes == scopes;
	LWLockRelease(scopestats_shared->lock);
	if (found)
		return entry;

	LWLockAcquire(scopestats_shared->lock, LW_EXCLUSIVE);
	/* the last entries are left for the other scopes of each database */
	if (entry == NULL && scopestats_shared->nentries >= SCOPESTATS_MAX - 64)
		memset(key.scope, 0, sizeof(key.scope));
	entry = hash_search(scopestats_hash, &key, HASH_ENTER_NULL, &found);
	if (entry != NULL && (!found || entry->dropped || entry->scopes != scopes))
	{
		/*
		 * A new entry, or the name's entry of an extension dropped since:
		 * from zero, this extension's.  It is the database's only one: the
		 * entries of any other were dropped.
		 */
		for (int i = 0; i < DEDUP_NUM_COUNTERS; i++)
			pg_atomic_init_u64(&entry->count[i], 0);
		entry->scopes = scopes;
		entry->dropped = false;
		if (!found)
			scopestats_shared->nentries++;
		scopestats_drop_others(scopes);
	}
	LWLockRelease(scopestats_shared->lock);
	return entry;
}

/*
 * DROP EXTENSION dedup committed in the current database (module.c): its
 * entries are set to zero and no longer shown, until a scope of the same
 * name is counted by a new extension; those of an extension created again
 * in the same transaction (its dedup.scopes: recreated) stay.
 */
void
dedup_scope_counters_forget_database(Oid recreated)
{
	if (scopestats_shared == NULL)
		return;
	LWLockAcquire(scopestats_shared->lock, LW_EXCLUSIVE);
	scopestats_drop_others(recreated);
	LWLockRelease(scopestats_shared->lock);
}

/* Count n calls of a kind: lock-free, a no-op without counters. */
void
dedup_scope_counters_count(DedupScopeCounters *counters, DedupCounter which, int64 n)
{
	if (counters != NULL && n > 0)
		pg_atomic_fetch_add_u64(&counters->count[which], (uint64) n);
}

/*
 * dedup.scope_count(scope text, counter text, n bigint) RETURNS void: for
 * the relay's PL/pgSQL functions, which count acks and nacks per topic.
 */
PG_FUNCTION_INFO_V1(dedup_scope_count_sql);
Datum
dedup_scope_count_sql(PG_FUNCTION_ARGS)
{
	char	   *scope;
	char	   *name;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1) || PG_ARGISNULL(2) || PG_GETARG_INT64(2) <= 0)
		PG_RETURN_VOID();
	scope = text_to_cstring(PG_GETARG_TEXT_PP(0));
	name = text_to_cstring(PG_GETARG_TEXT_PP(1));
	for (int i = 0; i < DEDUP_NUM_COUNTERS; i++)
	{
		if (strcmp(name, scopestats_names[i]) == 0)
		{
			dedup_scope_counters_count(dedup_scope_counters_get(scope), (DedupCounter) i,
									   PG_GETARG_INT64(2));
			PG_RETURN_VOID();
		}
	}
	elog(ERROR, "unknown dedup counter \"%s\"", name);
	PG_RETURN_VOID();
}

/*
 * dedup_scope_stats(all_databases boolean DEFAULT false)
 *	  RETURNS TABLE (datname name, scope text, claims bigint, duplicates bigint,
 *					 records_started bigint, records_replayed bigint,
 *					 records_completed bigint, records_released bigint,
 *					 events_put bigint, events_taken bigint, events_acked bigint,
 *					 events_nacked bigint)
 *
 * One row per scope counted: of the current database's extension, or of
 * every database's (but those dropped, as far as known).
 */
PG_FUNCTION_INFO_V1(dedup_scope_stats);
Datum
dedup_scope_stats(PG_FUNCTION_ARGS)
{
	bool		all_databases = PG_GETARG_BOOL(0);
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	HASH_SEQ_STATUS seq;
	DedupScopeCounters *entry;
	ScopeStatsKey *keys;
	uint64	   *counts;
	int			n = 0;
	Oid			scopes;

	if (scopestats_shared == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("dedup scope counters are not available"),
				 errdetail("The counters live in shared memory, which dedup has only when it is in shared_preload_libraries."),
				 errhint("Add dedup to shared_preload_libraries and restart the server.")));

	InitMaterializedSRF(fcinfo, 0);

	/* the current database's extension (none: no row of this database) */
	scopes = dedup_catalog_relation_lookup(DEDUP_REL_SCOPES);
	keys = palloc(sizeof(ScopeStatsKey) * SCOPESTATS_MAX);
	counts = palloc(sizeof(uint64) * SCOPESTATS_MAX * DEDUP_NUM_COUNTERS);
	LWLockAcquire(scopestats_shared->lock, LW_SHARED);
	hash_seq_init(&seq, scopestats_hash);
	while ((entry = hash_seq_search(&seq)) != NULL)
	{
		if (entry->dropped || (!all_databases && entry->key.dboid != MyDatabaseId) ||
			(entry->key.dboid == MyDatabaseId && entry->scopes != scopes))
			continue;
		if (n >= SCOPESTATS_MAX)
		{
			hash_seq_term(&seq);
			break;
		}
		keys[n] = entry->key;
		for (int i = 0; i < DEDUP_NUM_COUNTERS; i++)
			counts[n * DEDUP_NUM_COUNTERS + i] = pg_atomic_read_u64(&entry->count[i]);
		n++;
	}
	LWLockRelease(scopestats_shared->lock);

	for (int e = 0; e < n; e++)
	{
		Datum		values[2 + DEDUP_NUM_COUNTERS];
		bool		nulls[2 + DEDUP_NUM_COUNTERS] = {0};
		char	   *datname = get_database_name(keys[e].dboid);
		NameData	name;

		if (datname == NULL)
			continue;			/* dropped since */
		namestrcpy(&name, datname);
		values[0] = NameGetDatum(&name);
		if (keys[e].scope[0] == '\0')
			nulls[1] = true;
		else
			values[1] = CStringGetTextDatum(keys[e].scope);
		for (int i = 0; i < DEDUP_NUM_COUNTERS; i++)
			values[2 + i] = Int64GetDatum((int64) counts[e * DEDUP_NUM_COUNTERS + i]);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}
