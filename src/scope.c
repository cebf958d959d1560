/*-------------------------------------------------------------------------
 *
 * scope.c
 *	  Per-scope settings (ttl, lease, retention, and the outbox's
 *	  max_attempts): the row of dedup.scopes
 *	  for a scope when there is one, the GUC defaults for what it leaves
 *	  NULL or when there is none.  Holds the read used by the claim path
 *	  and the SQL functions dedup_scope(), dedup_set_scope() and
 *	  dedup_reset_scope().
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/skey.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "catalog/pg_collation_d.h"
#include "catalog/pg_type_d.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "utils/builtins.h"
#include "commands/trigger.h"
#include "utils/fmgroids.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

#include "dedup.h"

/* Column numbers of dedup.scopes */
#define Anum_scopes_scope		1
#define Anum_scopes_ttl			2
#define Anum_scopes_lease		3
#define Anum_scopes_retention	4
#define Anum_scopes_max_attempts 5
#define SCOPE_NSETTINGS			3	/* the intervals; max_attempts apart */

/* A scope's settings, indexed by DedupScopeSetting (the column order). */
typedef struct ScopeSettings
{
	Interval	value[SCOPE_NSETTINGS];
	int32		max_attempts;
	bool		configured;		/* dedup.scopes has a row for the scope */
} ScopeSettings;

/*
 * The backend's cache of dedup.scopes rows, keyed by scope name.  It holds
 * what the row says (a NULL setting stays unset), never the GUC defaults,
 * which a session may change at any time.  A statement trigger on
 * dedup.scopes sends a relcache invalidation of the table, and the
 * callback below empties the cache.
 */
typedef struct ScopeCacheEntry
{
	char		scope[DEDUP_MAX_SCOPE_BYTES + 1];	/* hash key */
	bool		found;			/* a row exists */
	bool		isset[SCOPE_NSETTINGS];
	Interval	value[SCOPE_NSETTINGS];
	bool		max_attempts_set;
	int32		max_attempts;
} ScopeCacheEntry;

#define SCOPE_CACHE_MAX 10000

static HTAB *scope_cache = NULL;
static Oid	scope_cache_relid = InvalidOid;
static uint64 scope_cache_generation = 0;	/* counts invalidations */

static void
scope_cache_callback(Datum arg, Oid relid)
{
	if (!OidIsValid(relid) || relid == scope_cache_relid)
	{
		scope_cache_generation++;
		if (scope_cache != NULL)
		{
			hash_destroy(scope_cache);
			scope_cache = NULL;
		}
	}
}

static void
scope_seconds(Interval *result, int seconds)
{
	/* whole days as days, so that a default of 1d reads as '1 day' */
	memset(result, 0, sizeof(Interval));
	result->day = seconds / SECS_PER_DAY;
	result->time = (int64) (seconds % SECS_PER_DAY) * USECS_PER_SEC;
}

/*
 * Fill a cache entry from the scope's row.  The row is read with a snapshot
 * taken after the table is locked, and so after every invalidation sent
 * before it was read: a change committed later invalidates the entry.
 */
static void
scope_load(const text *scope, ScopeCacheEntry *entry)
{
	Relation	rel = dedup_relation_open(DEDUP_REL_SCOPES, AccessShareLock);
	Snapshot	snapshot = RegisterSnapshot(GetLatestSnapshot());
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tuple;

	memset(entry, 0, sizeof(ScopeCacheEntry));
	memcpy(entry->scope, VARDATA_ANY(scope), VARSIZE_ANY_EXHDR(scope));
	ScanKeyEntryInitialize(&key, 0, Anum_scopes_scope, BTEqualStrategyNumber,
						   InvalidOid, C_COLLATION_OID, F_TEXTEQ,
						   PointerGetDatum(scope));
	scan = systable_beginscan(rel, dedup_relation_oid(DEDUP_REL_SCOPES_PKEY), true,
							  snapshot, 1, &key);
	tuple = systable_getnext(scan);
	if (HeapTupleIsValid(tuple))
	{
		entry->found = true;
		for (int i = 0; i < SCOPE_NSETTINGS; i++)
		{
			bool		isnull;
			Datum		d = heap_getattr(tuple, Anum_scopes_ttl + i,
										 RelationGetDescr(rel), &isnull);

			entry->isset[i] = !isnull;
			if (!isnull)
				memcpy(&entry->value[i], DatumGetIntervalP(d), sizeof(Interval));
		}
		{
			bool		isnull;
			Datum		d = heap_getattr(tuple, Anum_scopes_max_attempts,
										 RelationGetDescr(rel), &isnull);

			entry->max_attempts_set = !isnull;
			if (!isnull)
				entry->max_attempts = DatumGetInt32(d);
		}
	}
	systable_endscan(scan);
	UnregisterSnapshot(snapshot);
	table_close(rel, AccessShareLock);
}

/*
 * A scope's settings: its own where its row sets them, the GUC defaults
 * otherwise.
 */
static void
scope_read(const text *scope, ScopeSettings *settings)
{
	static bool registered = false;
	char		name[DEDUP_MAX_SCOPE_BYTES + 1] = {0};
	ScopeCacheEntry *entry;
	ScopeCacheEntry loaded;
	const int	defaults[SCOPE_NSETTINGS] = {
		dedup_default_ttl, dedup_default_lease, dedup_default_retention
	};

	/* the scope name was checked: not empty, at most DEDUP_MAX_SCOPE_BYTES */
	memcpy(name, VARDATA_ANY(scope), VARSIZE_ANY_EXHDR(scope));

	if (!registered)
	{
		CacheRegisterRelcacheCallback(scope_cache_callback, (Datum) 0);
		registered = true;
	}
	scope_cache_relid = dedup_relation_oid(DEDUP_REL_SCOPES);
	entry = scope_cache ? hash_search(scope_cache, name, HASH_FIND, NULL) : NULL;
	if (entry == NULL)
	{
		uint64		generation = scope_cache_generation;

		scope_load(scope, &loaded);
		entry = &loaded;
		/* cache it only if no invalidation arrived while it was read */
		if (generation == scope_cache_generation)
		{
			/* a backend that sees very many scopes starts over */
			if (scope_cache != NULL && hash_get_num_entries(scope_cache) >= SCOPE_CACHE_MAX)
			{
				hash_destroy(scope_cache);
				scope_cache = NULL;
			}
			if (scope_cache == NULL)
			{
				HASHCTL		ctl;

				ctl.keysize = DEDUP_MAX_SCOPE_BYTES + 1;
				ctl.entrysize = sizeof(ScopeCacheEntry);
				ctl.hcxt = CacheMemoryContext;
				scope_cache = hash_create("dedup scope settings", 64, &ctl,
										  HASH_ELEM | HASH_STRINGS | HASH_CONTEXT);
			}
			entry = hash_search(scope_cache, name, HASH_ENTER, NULL);
			memcpy(entry, &loaded, sizeof(ScopeCacheEntry));
		}
	}

	settings->configured = entry->found;
	settings->max_attempts = entry->max_attempts_set ?
		entry->max_attempts : dedup_outbox_max_attempts;
	for (int i = 0; i < SCOPE_NSETTINGS; i++)
	{
		if (entry->isset[i])
			settings->value[i] = entry->value[i];
		else
			scope_seconds(&settings->value[i], defaults[i]);
	}
}

/*
 * One setting of a scope: its own where its row sets it, the GUC default
 * otherwise.
 */
Interval *
dedup_scope_setting(const text *scope, DedupScopeSetting which)
{
	ScopeSettings settings;
	Interval   *result = palloc(sizeof(Interval));

	scope_read(scope, &settings);
	memcpy(result, &settings.value[which], sizeof(Interval));
	return result;
}

/* The row returned by dedup_scope() and dedup_set_scope(). */
static Datum
scope_result(FunctionCallInfo fcinfo, text *scope)
{
	ScopeSettings settings;
	TupleDesc	tupdesc;
	Datum		values[SCOPE_NSETTINGS + 3];
	bool		nulls[SCOPE_NSETTINGS + 3] = {false};

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	scope_read(scope, &settings);
	values[0] = PointerGetDatum(scope);
	for (int i = 0; i < SCOPE_NSETTINGS; i++)
		values[i + 1] = IntervalPGetDatum(&settings.value[i]);
	values[SCOPE_NSETTINGS + 1] = Int32GetDatum(settings.max_attempts);
	values[SCOPE_NSETTINGS + 2] = BoolGetDatum(settings.configured);
	return HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(tupdesc), values, nulls));
}

PG_FUNCTION_INFO_V1(dedup_scope);
Datum
dedup_scope(PG_FUNCTION_ARGS)
{
	return scope_result(fcinfo, dedup_scope_arg(fcinfo, 0, "scope"));
}

/*
 * dedup_set_scope(scope, ttl, lease, retention, max_attempts): upsert; a
 * NULL argument leaves that setting as it is (the GUC default for a new
 * scope).
 */
PG_FUNCTION_INFO_V1(dedup_set_scope);
Datum
dedup_set_scope(PG_FUNCTION_ARGS)
{
	static const char *const names[SCOPE_NSETTINGS] = {"ttl", "lease", "retention"};
	text	   *scope = dedup_scope_arg(fcinfo, 0, "scope");
	Oid			argtypes[SCOPE_NSETTINGS + 2] = {TEXTOID, INTERVALOID, INTERVALOID, INTERVALOID, INT4OID};
	Datum		values[SCOPE_NSETTINGS + 2];
	char		nulls[SCOPE_NSETTINGS + 2] = {' ', ' ', ' ', ' ', ' '};

	values[0] = PointerGetDatum(scope);
	for (int i = 0; i < SCOPE_NSETTINGS; i++)
	{
		Interval   *v = dedup_interval_arg(fcinfo, i + 1, names[i]);

		values[i + 1] = IntervalPGetDatum(v);
		nulls[i + 1] = v ? ' ' : 'n';
	}
	if (PG_ARGISNULL(SCOPE_NSETTINGS + 1))
		nulls[SCOPE_NSETTINGS + 1] = 'n';
	else
	{
		int32		max_attempts = PG_GETARG_INT32(SCOPE_NSETTINGS + 1);

		if (max_attempts < 1)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("max_attempts must be at least 1")));
		values[SCOPE_NSETTINGS + 1] = Int32GetDatum(max_attempts);
	}
	dedup_check_writable("dedup_set_scope");

	SPI_connect();
	if (SPI_execute_with_args(
							  "INSERT INTO dedup.scopes AS s (scope, ttl, lease, retention, max_attempts)"
							  " VALUES ($1, $2, $3, $4, $5)"
							  " ON CONFLICT (scope) DO UPDATE SET"
							  " ttl = COALESCE(excluded.ttl, s.ttl),"
							  " lease = COALESCE(excluded.lease, s.lease),"
							  " retention = COALESCE(excluded.retention, s.retention),"
							  " max_attempts = COALESCE(excluded.max_attempts, s.max_attempts),"
							  " updated_at = pg_catalog.now()",
							  SCOPE_NSETTINGS + 2, argtypes, values, nulls,
							  false, 0) != SPI_OK_INSERT)
		elog(ERROR, "could not store the settings of a dedup scope");
	SPI_finish();

	return scope_result(fcinfo, scope);
}

PG_FUNCTION_INFO_V1(dedup_reset_scope);
Datum
dedup_reset_scope(PG_FUNCTION_ARGS)
{
	text	   *scope = dedup_scope_arg(fcinfo, 0, "scope");
	Oid			argtypes[1] = {TEXTOID};
	Datum		values[1] = {PointerGetDatum(scope)};
	uint64		deleted;

	dedup_check_writable("dedup_reset_scope");
	SPI_connect();
	if (SPI_execute_with_args("DELETE FROM dedup.scopes"
							  " WHERE scope OPERATOR(pg_catalog.=) $1",
							  1, argtypes, values, NULL, false, 0) != SPI_OK_DELETE)
		elog(ERROR, "could not delete the settings of a dedup scope");
	deleted = SPI_processed;
	SPI_finish();
	PG_RETURN_BOOL(deleted > 0);
}

/*
 * Statement trigger on dedup.scopes: whatever changed the table (our
 * functions, or the owner's own DML), every backend's cache of it is
 * emptied when the change commits, and this backend's at once.
 */
PG_FUNCTION_INFO_V1(dedup_scopes_changed);
Datum
dedup_scopes_changed(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;

	if (!CALLED_AS_TRIGGER(fcinfo))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("dedup_scopes_changed() must be called as a trigger")));
	CacheInvalidateRelcache(trigdata->tg_relation);
	return PointerGetDatum(NULL);
}
