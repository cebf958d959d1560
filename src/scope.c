/*-------------------------------------------------------------------------
 *
 * scope.c
 *	  Scopes: their settings, cached per backend, and a call's first use
 *	  of its scope.
 *
 * Settings (ttl, lease, retention, and the outbox's max_attempts, the
 * sequence mode, the history): the row of dedup.scopes for a scope when
 * there is one, the GUC defaults for what it leaves NULL or when there is
 * none.  They are read through one backend-local cache, keyed by scope
 * name; a statement trigger on dedup.scopes (and on dedup.grants, for
 * privileges.c's cache) sends a relcache invalidation of the table, and the
 * callback below empties the cache.
 *
 * A call's first use of its scope (dedup_scope_use, dedup_scope_of_call)
 * reads the settings here and checks its caller's privilege on the scope in
 * privileges.c, which holds who may use a scope (dedup.grants).  Holds the
 * SQL functions dedup_scope(), dedup_set_scope(), dedup_reset_scope() and
 * the trigger function of both tables.
 *
 * Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.
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
#include "commands/trigger.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

#include "catalog.h"
#include "checks.h"
#include "privileges.h"
#include "scope.h"
#include "scope_counters.h"
#include "settings.h"

/* Column numbers of dedup.scopes */
#define Anum_scopes_scope		1
#define Anum_scopes_ttl			2
#define Anum_scopes_lease		3
#define Anum_scopes_retention	4
#define Anum_scopes_max_attempts 5
#define Anum_scopes_sequence_mode 7 /* after updated_at: added in 1.1 */
#define Anum_scopes_history		8	/* the history tier: added in 1.1 */
#define Anum_scopes_false_positive_rate 9
#define Anum_scopes_history_id	10
#define SCOPE_NSETTINGS			DEDUP_SCOPE_NSETTINGS

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
	bool		strict;			/* sequence_mode 'strict' */
	int32		history_id;		/* 0: no history */
	Interval	history;
	double		false_positive_rate;
	bool		counters_known; /* counters looked up (scope_counters.c) */
	DedupScopeCounters *counters;
} ScopeCacheEntry;

#define SCOPE_CACHE_MAX 10000

static HTAB *scope_cache = NULL;
static Oid	scope_cache_relid = InvalidOid;
static uint64 scope_cache_generation = 0;	/* counts invalidations */

static void
scope_cache_reset(void)
{
	scope_cache_generation++;
	if (scope_cache != NULL)
	{
		hash_destroy(scope_cache);
		scope_cache = NULL;
	}
}

static void
scope_cache_callback(Datum arg, Oid relid)
{
	if (!OidIsValid(relid) || relid == scope_cache_relid)
		scope_cache_reset();
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
	Relation	rel = dedup_catalog_relation_open(DEDUP_REL_SCOPES, AccessShareLock);
	Snapshot	snapshot = dedup_catalog_cache_snapshot();
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tuple;

	memset(entry, 0, sizeof(ScopeCacheEntry));
	dedup_check_scope_name(scope, "scope");
	memcpy(entry->scope, VARDATA_ANY(scope), VARSIZE_ANY_EXHDR(scope));
	ScanKeyEntryInitialize(&key, 0, Anum_scopes_scope, BTEqualStrategyNumber,
						   InvalidOid, C_COLLATION_OID, F_TEXTEQ,
						   PointerGetDatum(scope));
	scan = systable_beginscan(rel, dedup_catalog_relation_oid(DEDUP_REL_SCOPES_PKEY), true,
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
		/* a database still at 1.0 has no sequence_mode */
		if (RelationGetDescr(rel)->natts >= Anum_scopes_sequence_mode)
		{
			bool		isnull;
			Datum		d = heap_getattr(tuple, Anum_scopes_sequence_mode,
										 RelationGetDescr(rel), &isnull);

			entry->strict = !isnull && strcmp(TextDatumGetCString(d), "strict") == 0;
		}
		if (RelationGetDescr(rel)->natts >= Anum_scopes_history_id)
		{
			bool		isnull;
			bool		id_isnull;
			Datum		d = heap_getattr(tuple, Anum_scopes_history,
										 RelationGetDescr(rel), &isnull);
			Datum		id = heap_getattr(tuple, Anum_scopes_history_id,
										  RelationGetDescr(rel), &id_isnull);

			if (!isnull && !id_isnull)
			{
				entry->history_id = DatumGetInt32(id);
				memcpy(&entry->history, DatumGetIntervalP(d), sizeof(Interval));
				d = heap_getattr(tuple, Anum_scopes_false_positive_rate,
								 RelationGetDescr(rel), &isnull);
				entry->false_positive_rate = isnull ? 0 : DatumGetFloat8(d);
			}
		}
	}
	systable_endscan(scan);
	UnregisterSnapshot(snapshot);
	table_close(rel, AccessShareLock);
}

/*
 * The cache entry of a scope, loaded if it is not cached; "loaded" holds it
 * when it cannot be cached (an invalidation arrived while it was read).
 */
static ScopeCacheEntry *
scope_entry(const text *scope, ScopeCacheEntry *loaded)
{
	static bool registered = false;
	char		name[DEDUP_MAX_SCOPE_BYTES + 1] = {0};
	ScopeCacheEntry *entry;
	uint64		generation;

	/* the buffer's bound: callers check first, this is the last word */
	dedup_check_scope_name(scope, "scope");
	memcpy(name, VARDATA_ANY(scope), VARSIZE_ANY_EXHDR(scope));

	if (!registered)
	{
		dedup_catalog_relcache_register(scope_cache_callback);
		registered = true;
	}
	scope_cache_relid = dedup_catalog_relation_oid(DEDUP_REL_SCOPES);
	entry = scope_cache ? hash_search(scope_cache, name, HASH_FIND, NULL) : NULL;
	if (entry != NULL)
		return entry;

	generation = scope_cache_generation;
	scope_load(scope, loaded);
	/* cache it only if no invalidation arrived while it was read */
	if (generation != scope_cache_generation || IsInParallelMode())
		return loaded;
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
	memcpy(entry, loaded, sizeof(ScopeCacheEntry));
	return entry;
}

/* A scope's settings: its own where its row sets them, the GUC defaults otherwise. */
static void
scope_settings_of(const ScopeCacheEntry *entry, DedupScopeSettings *settings)
{
	const int	defaults[SCOPE_NSETTINGS] = {
		dedup_default_ttl, dedup_default_lease, dedup_default_retention
	};

	settings->configured = entry->found;
	settings->strict = entry->strict;
	settings->history_id = entry->history_id;
	settings->history = entry->history;
	settings->false_positive_rate = entry->false_positive_rate;
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

static void
scope_read(const text *scope, DedupScopeSettings *settings)
{
	ScopeCacheEntry loaded;

	scope_settings_of(scope_entry(scope, &loaded), settings);
}

/*
 * Whether a role has one of the privileges (DEDUP_PRIV_* bits) on a scope,
 * without raising; when it has, its settings filled in (unless settings is
 * NULL).  For a call that must answer a role refused as if the scope were
 * not there (the relay's batch ids: a relay learns no topic it may not see).
 */
bool
dedup_scope_allows(const text *scope, Oid roleid, int privileges,
				   DedupScopeSettings *settings)
{
	ScopeCacheEntry loaded;
	ScopeCacheEntry *entry = scope_entry(scope, &loaded);
	uint64		generation;

	/* read before the check, which may empty the cache, entry included */
	if (settings)
		scope_settings_of(entry, settings);
	generation = scope_cache_generation;
	if (!dedup_privileges_allow(scope, roleid, privileges))
		return false;
	/* counted only once allowed: a refused role adds no scope to the counters */
	if (settings)
	{
		if (generation != scope_cache_generation && entry != &loaded)
			settings->counters = dedup_scope_counters_get(text_to_cstring(scope));
		else
		{
			if (!entry->counters_known)
			{
				entry->counters = dedup_scope_counters_get(entry->scope);
				entry->counters_known = true;
			}
			settings->counters = entry->counters;
		}
	}
	return true;
}

/*
 * The first use of a scope in a call: fill in its settings (unless settings
 * is NULL) and check that the current user has one of the privileges
 * (DEDUP_PRIV_* bits) on it, 42501 otherwise.  One hash lookup.
 */
void
dedup_scope_use(const text *scope, int privileges, DedupScopeSettings *settings)
{
	Oid			roleid = GetUserId();

	if (!dedup_scope_allows(scope, roleid, privileges, settings))
		dedup_privileges_denied(scope, roleid, privileges);
}

/*
 * Under dedup.require_declared_scopes, a write under a scope that has no
 * row in dedup.scopes is refused (22023) before anything is written: a
 * scope mistyped, or a key passed where the scope goes, would otherwise
 * make a scope of its own and answer true.
 */
static void
scope_check_declared(const text *scope, const char *what)
{
	ScopeCacheEntry loaded;

	if (scope_entry(scope, &loaded)->found)
		return;
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("%s \"%s\" is not declared", what, text_to_cstring(scope)),
			 errdetail("dedup.require_declared_scopes is on, and dedup_set_scope() was never called for it."),
			 errhint("Declare it with dedup_set_scope('%s'), or check the order of the arguments: the %s comes first.",
					 text_to_cstring(scope), what)));
}

/*
 * The scope argument of a call that uses it (argument 0; "what" names it in
 * errors): a writing function (funcname given) is refused first where it
 * may not write (25006, 25000), before it reads anything; then the
 * argument is checked, then the caller's privilege (42501), and the
 * settings filled in (unless settings is NULL).
 */
text *
dedup_scope_of_call(FunctionCallInfo fcinfo, const char *what, const char *funcname,
					int privileges, DedupScopeSettings *settings)
{
	text	   *scope;

	if (funcname)
		dedup_check_writable(funcname);
	scope = dedup_check_name_arg(fcinfo, 0, what);
	if (funcname && settings && dedup_require_declared_scopes)
	{
		/* the caller's privilege first (42501), then whether it is declared */
		dedup_scope_use(scope, privileges, NULL);
		scope_check_declared(scope, what);
	}
	dedup_scope_use(scope, privileges, settings);
	return scope;
}

/* The row returned by dedup_scope() and dedup_set_scope(). */
static Datum
scope_result(FunctionCallInfo fcinfo, text *scope)
{
	DedupScopeSettings settings;
	TupleDesc	tupdesc;
	Datum		values[SCOPE_NSETTINGS + 6];
	bool		nulls[SCOPE_NSETTINGS + 6] = {false};

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	scope_read(scope, &settings);
	values[0] = PointerGetDatum(scope);
	for (int i = 0; i < SCOPE_NSETTINGS; i++)
		values[i + 1] = IntervalPGetDatum(&settings.value[i]);
	values[SCOPE_NSETTINGS + 1] = Int32GetDatum(settings.max_attempts);
	values[SCOPE_NSETTINGS + 2] = BoolGetDatum(settings.configured);
	/* last, so that 1.0's SQL, which has no such column, ignores it */
	values[SCOPE_NSETTINGS + 3] = CStringGetTextDatum(settings.strict ? "strict" : "monotonic");
	values[SCOPE_NSETTINGS + 4] = IntervalPGetDatum(&settings.history);
	values[SCOPE_NSETTINGS + 5] = Float8GetDatum(settings.false_positive_rate);
	nulls[SCOPE_NSETTINGS + 4] = nulls[SCOPE_NSETTINGS + 5] = (settings.history_id == 0);
	return HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(tupdesc), values, nulls));
}

PG_FUNCTION_INFO_V1(dedup_scope);
Datum
dedup_scope(PG_FUNCTION_ARGS)
{
	return scope_result(fcinfo, dedup_scope_of_call(fcinfo, "scope", NULL,
													DEDUP_PRIV_USAGE | DEDUP_PRIV_RELAY, NULL));
}

/*
 * dedup_set_scope(scope, ttl, lease, retention, max_attempts, sequence_mode,
 * history, false_positive_rate): upsert; a NULL argument leaves that
 * setting as it is (the GUC default for a new scope).  A history of zero
 * takes the history away; a scope given one gets a history_id, which its
 * claims carry (history.c), and false_positive_rate defaults to 0.001.
 * Called by 1.0's SQL, it has only the first five.
 */
#define SET_SCOPE_NARGS (SCOPE_NSETTINGS + 5)
#define SET_SCOPE_NARGS_10 (SCOPE_NSETTINGS + 2)
#define HISTORY_DEFAULT_RATE 0.001
#define HISTORY_MIN_RATE 0.0001
#define HISTORY_MAX_RATE 0.1

PG_FUNCTION_INFO_V1(dedup_set_scope);
Datum
dedup_set_scope(PG_FUNCTION_ARGS)
{
	static const char *const names[SCOPE_NSETTINGS] = {"ttl", "lease", "retention"};
	text	   *scope = dedup_check_name_arg(fcinfo, 0, "scope");
	Oid			argtypes[SET_SCOPE_NARGS + 2] = {TEXTOID, INTERVALOID, INTERVALOID, INTERVALOID,
	INT4OID, TEXTOID, INTERVALOID, FLOAT8OID, BOOLOID, INT4OID};
	Datum		values[SET_SCOPE_NARGS + 2];
	char		nulls[SET_SCOPE_NARGS + 2] = {' ', ' ', ' ', ' ', ' ', 'n', 'n', 'n', ' ', 'n'};
	bool		full = PG_NARGS() >= SET_SCOPE_NARGS;
	bool		no_history = false;
	bool		rate_given = false;
	int			rc;

	values[0] = PointerGetDatum(scope);
	for (int i = 0; i < SCOPE_NSETTINGS; i++)
	{
		Interval   *v = dedup_check_interval_arg(fcinfo, i + 1, names[i]);

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
	if (full && !PG_ARGISNULL(SCOPE_NSETTINGS + 2))
	{
		text	   *mode = PG_GETARG_TEXT_PP(SCOPE_NSETTINGS + 2);
		char	   *name = text_to_cstring(mode);

		if (strcmp(name, "strict") != 0 && strcmp(name, "monotonic") != 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("sequence_mode must be strict or monotonic"),
					 errdetail("The value given was \"%s\".", name)));
		values[SCOPE_NSETTINGS + 2] = PointerGetDatum(mode);
		nulls[SCOPE_NSETTINGS + 2] = ' ';
	}
	if (full && !PG_ARGISNULL(SCOPE_NSETTINGS + 3))
	{
		Interval   *history = PG_GETARG_INTERVAL_P(SCOPE_NSETTINGS + 3);

		dedup_check_interval(history, "history", true, GetCurrentTimestamp());
		no_history = (history->month == 0 && history->day == 0 && history->time == 0);
		if (!no_history)
		{
			values[SCOPE_NSETTINGS + 3] = IntervalPGetDatum(history);
			nulls[SCOPE_NSETTINGS + 3] = ' ';
		}
	}
	if (full && !PG_ARGISNULL(SCOPE_NSETTINGS + 4))
	{
		double		rate = PG_GETARG_FLOAT8(SCOPE_NSETTINGS + 4);

		if (!(rate >= HISTORY_MIN_RATE && rate <= HISTORY_MAX_RATE))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("false_positive_rate must be between %g and %g",
							HISTORY_MIN_RATE, HISTORY_MAX_RATE),
					 errdetail("The value given was %g.", rate)));
		if (no_history)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("false_positive_rate needs a history"),
					 errdetail("The history given was zero, which takes the scope's history away.")));
		values[SCOPE_NSETTINGS + 4] = Float8GetDatum(rate);
		nulls[SCOPE_NSETTINGS + 4] = ' ';
		rate_given = true;
	}
	values[SCOPE_NSETTINGS + 5] = BoolGetDatum(no_history);
	dedup_check_writable("dedup_set_scope");

	SPI_connect();

	/*
	 * A history given: the id it gets if the scope has none, taken here, not
	 * in the upsert, whose DO UPDATE holds no volatile function (Citus plans
	 * it on a reference table only so); an id not used is skipped.
	 */
	if (full && nulls[SCOPE_NSETTINGS + 3] == ' ')
	{
		bool		isnull;

		if (SPI_execute("SELECT pg_catalog.nextval('dedup.history_ids')::pg_catalog.int4",
						false, 1) != SPI_OK_SELECT || SPI_processed != 1)
			elog(ERROR, "could not take a history id");
		values[SCOPE_NSETTINGS + 6] = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc,
													1, &isnull);
		nulls[SCOPE_NSETTINGS + 6] = ' ';
	}
	rc = SPI_execute_with_args(full ?
							   "INSERT INTO dedup.scopes AS s"
							   " (scope, ttl, lease, retention, max_attempts, sequence_mode,"
							   "  history, false_positive_rate, history_id)"
							   " VALUES ($1, $2, $3, $4, $5, $6, $7,"
							   "  CASE WHEN $7 IS NOT NULL THEN COALESCE($8, " CppAsString2(HISTORY_DEFAULT_RATE) ") END,"
							   "  $10)"
							   " ON CONFLICT (scope) DO UPDATE SET"
							   " ttl = COALESCE(excluded.ttl, s.ttl),"
							   " lease = COALESCE(excluded.lease, s.lease),"
							   " retention = COALESCE(excluded.retention, s.retention),"
							   " max_attempts = COALESCE(excluded.max_attempts, s.max_attempts),"
							   " sequence_mode = COALESCE(excluded.sequence_mode, s.sequence_mode),"
							   " history = CASE WHEN $9 THEN NULL ELSE COALESCE($7, s.history) END,"
							   " false_positive_rate = CASE WHEN $9 OR COALESCE($7, s.history) IS NULL THEN NULL"
							   "  ELSE COALESCE($8, s.false_positive_rate, " CppAsString2(HISTORY_DEFAULT_RATE) ") END,"
							   " history_id = CASE WHEN $9 OR COALESCE($7, s.history) IS NULL THEN NULL"
							   "  ELSE COALESCE(s.history_id, $10) END,"
							   " updated_at = excluded.updated_at"
							   " RETURNING history IS NOT NULL" :
							   "INSERT INTO dedup.scopes AS s (scope, ttl, lease, retention, max_attempts)"
							   " VALUES ($1, $2, $3, $4, $5)"
							   " ON CONFLICT (scope) DO UPDATE SET"
							   " ttl = COALESCE(excluded.ttl, s.ttl),"
							   " lease = COALESCE(excluded.lease, s.lease),"
							   " retention = COALESCE(excluded.retention, s.retention),"
							   " max_attempts = COALESCE(excluded.max_attempts, s.max_attempts),"
							   " updated_at = excluded.updated_at",
							   full ? SET_SCOPE_NARGS + 2 : SET_SCOPE_NARGS_10,
							   argtypes, values, nulls, false, 0);
	if (rc != SPI_OK_INSERT_RETURNING && rc != SPI_OK_INSERT)
		elog(ERROR, "could not store the settings of a dedup scope");
	if (full && rate_given)
	{
		bool		isnull;
		bool		has_history = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0],
															 SPI_tuptable->tupdesc, 1, &isnull));

		if (!has_history)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("false_positive_rate needs a history"),
					 errdetail("Scope \"%s\" has no history.", text_to_cstring(scope)),
					 errhint("Give the history window with the rate, such as history => '30 days'.")));
	}
	SPI_finish();

	return scope_result(fcinfo, scope);
}

PG_FUNCTION_INFO_V1(dedup_reset_scope);
Datum
dedup_reset_scope(PG_FUNCTION_ARGS)
{
	text	   *scope = dedup_check_name_arg(fcinfo, 0, "scope");
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
 * Statement trigger on dedup.scopes and dedup.grants: whatever changed the
 * table (our functions, or the owner's own DML), every backend's cache of
 * it (here, privileges.c) is emptied when the change commits, and this
 * backend's at once.
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
