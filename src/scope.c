/*-------------------------------------------------------------------------
 *
 * scope.c
 *	  Per-scope settings (ttl, lease, retention): the row of dedup.scopes
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
#include "utils/fmgroids.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

#include "dedup.h"

/* Column numbers of dedup.scopes */
#define Anum_scopes_scope		1
#define Anum_scopes_ttl			2
#define Anum_scopes_lease		3
#define Anum_scopes_retention	4
#define SCOPE_NSETTINGS			3

/* A scope's settings in the order of the columns ttl, lease, retention. */
typedef struct ScopeSettings
{
	Interval	value[SCOPE_NSETTINGS];
	bool		configured;		/* dedup.scopes has a row for the scope */
} ScopeSettings;

static void
scope_seconds(Interval *result, int seconds)
{
	/* whole days as days, so that a default of 1d reads as '1 day' */
	memset(result, 0, sizeof(Interval));
	result->day = seconds / SECS_PER_DAY;
	result->time = (int64) (seconds % SECS_PER_DAY) * USECS_PER_SEC;
}

/*
 * Read a scope's settings as of the transaction's current snapshot.
 */
static void
scope_read(const text *scope, ScopeSettings *settings)
{
	Relation	rel = table_open(dedup_relation_oid("scopes"), AccessShareLock);
	Snapshot	snapshot = RegisterSnapshot(GetTransactionSnapshot());
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tuple;

	scope_seconds(&settings->value[0], dedup_default_ttl);
	scope_seconds(&settings->value[1], dedup_default_lease);
	scope_seconds(&settings->value[2], dedup_default_retention);
	settings->configured = false;

	ScanKeyEntryInitialize(&key, 0, Anum_scopes_scope, BTEqualStrategyNumber,
						   InvalidOid, C_COLLATION_OID, F_TEXTEQ,
						   PointerGetDatum(scope));
	scan = systable_beginscan(rel, dedup_relation_oid("scopes_pkey"), true,
							  snapshot, 1, &key);
	tuple = systable_getnext(scan);
	if (HeapTupleIsValid(tuple))
	{
		settings->configured = true;
		for (int i = 0; i < SCOPE_NSETTINGS; i++)
		{
			bool		isnull;
			Datum		d = heap_getattr(tuple, Anum_scopes_ttl + i,
										 RelationGetDescr(rel), &isnull);

			if (!isnull)
				memcpy(&settings->value[i], DatumGetIntervalP(d), sizeof(Interval));
		}
	}
	systable_endscan(scan);
	UnregisterSnapshot(snapshot);
	table_close(rel, AccessShareLock);
}

/*
 * The dedup window of a scope.
 */
Interval *
dedup_scope_ttl(const text *scope)
{
	ScopeSettings settings;
	Interval   *result = palloc(sizeof(Interval));

	scope_read(scope, &settings);
	memcpy(result, &settings.value[0], sizeof(Interval));
	return result;
}

/* The row returned by dedup_scope() and dedup_set_scope(). */
static Datum
scope_result(FunctionCallInfo fcinfo, text *scope)
{
	ScopeSettings settings;
	TupleDesc	tupdesc;
	Datum		values[SCOPE_NSETTINGS + 2];
	bool		nulls[SCOPE_NSETTINGS + 2] = {false};

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	scope_read(scope, &settings);
	values[0] = PointerGetDatum(scope);
	for (int i = 0; i < SCOPE_NSETTINGS; i++)
		values[i + 1] = IntervalPGetDatum(&settings.value[i]);
	values[SCOPE_NSETTINGS + 1] = BoolGetDatum(settings.configured);
	return HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(tupdesc), values, nulls));
}

PG_FUNCTION_INFO_V1(dedup_scope);
Datum
dedup_scope(PG_FUNCTION_ARGS)
{
	return scope_result(fcinfo, dedup_scope_arg(fcinfo, 0));
}

/*
 * dedup_set_scope(scope, ttl, lease, retention): upsert; a NULL argument
 * leaves that setting as it is (the GUC default for a new scope).
 */
PG_FUNCTION_INFO_V1(dedup_set_scope);
Datum
dedup_set_scope(PG_FUNCTION_ARGS)
{
	static const char *const names[SCOPE_NSETTINGS] = {"ttl", "lease", "retention"};
	text	   *scope = dedup_scope_arg(fcinfo, 0);
	Oid			argtypes[SCOPE_NSETTINGS + 1] = {TEXTOID, INTERVALOID, INTERVALOID, INTERVALOID};
	Datum		values[SCOPE_NSETTINGS + 1];
	char		nulls[SCOPE_NSETTINGS + 1] = {' ', ' ', ' ', ' '};

	values[0] = PointerGetDatum(scope);
	for (int i = 0; i < SCOPE_NSETTINGS; i++)
	{
		Interval   *v = dedup_interval_arg(fcinfo, i + 1, names[i]);

		values[i + 1] = IntervalPGetDatum(v);
		nulls[i + 1] = v ? ' ' : 'n';
	}
	dedup_check_writable("dedup_set_scope");

	SPI_connect();
	if (SPI_execute_with_args(
							  "INSERT INTO dedup.scopes AS s (scope, ttl, lease, retention)"
							  " VALUES ($1, $2, $3, $4)"
							  " ON CONFLICT (scope) DO UPDATE SET"
							  " ttl = COALESCE(excluded.ttl, s.ttl),"
							  " lease = COALESCE(excluded.lease, s.lease),"
							  " retention = COALESCE(excluded.retention, s.retention),"
							  " updated_at = pg_catalog.now()",
							  SCOPE_NSETTINGS + 1, argtypes, values, nulls,
							  false, 0) != SPI_OK_INSERT)
		elog(ERROR, "could not store the settings of a dedup scope");
	SPI_finish();

	return scope_result(fcinfo, scope);
}

PG_FUNCTION_INFO_V1(dedup_reset_scope);
Datum
dedup_reset_scope(PG_FUNCTION_ARGS)
{
	text	   *scope = dedup_scope_arg(fcinfo, 0);
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
