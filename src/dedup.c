/*-------------------------------------------------------------------------
 *
 * dedup.c
 *	  Module entry point of the dedup extension: the GUCs under the reserved
 *	  "dedup." prefix, the shared-memory hooks and the cleanup launcher when
 *	  preloaded, the lookup of the extension's own tables, and the argument
 *	  checks shared by every public function.
 *
 * The library works both loaded on demand by CREATE EXTENSION and loaded
 * through shared_preload_libraries; only the cleanup worker and its
 * figures (stats.c) need the latter.
 *
 * Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "access/relation.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/namespace.h"
#include "catalog/pg_namespace_d.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/lmgr.h"
#include "tcop/utility.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"
#include "catalog/pg_type.h"
#include "utils/varlena.h"

#include "dedup.h"
#include "cluster.h"
#include "cleanup.h"
#include "bucket.h"
#include "bucket.h"

PG_MODULE_MAGIC;

void		_PG_init(void);

static void dedup_shmem_request(void);
static void dedup_shmem_startup(void);
static bool dedup_check_database_list(char **newval, void **extra, GucSource source);

int			dedup_default_ttl = 86400;
int			dedup_default_lease = 300;
int			dedup_default_retention = 7 * 86400;
int			dedup_cleanup_batch_size = 10000;
int			dedup_cleanup_pause = 20;
char	   *dedup_cleanup_databases = NULL;
char	   *dedup_cleanup_role = NULL;
int			dedup_cleanup_interval = 60;
bool		dedup_cleanup_enabled = true;
int			dedup_outbox_max_attempts = 10;
int			dedup_bucket_interval = 6 * 3600;

static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

void
_PG_init(void)
{
	DefineCustomIntVariable("dedup.default_ttl",
							"Dedup window of scopes that have no ttl of their own.",
							"A claimed key counts as a duplicate for this long.",
							&dedup_default_ttl,
							86400, 1, INT_MAX,
							PGC_USERSET, GUC_UNIT_S,
							NULL, NULL, NULL);
	DefineCustomIntVariable("dedup.default_lease",
							"Processing lease of scopes that have no lease of their own.",
							NULL,
							&dedup_default_lease,
							300, 1, INT_MAX,
							PGC_USERSET, GUC_UNIT_S,
							NULL, NULL, NULL);
	DefineCustomIntVariable("dedup.default_retention",
							"Outbox retention of scopes that have no retention of their own.",
							NULL,
							&dedup_default_retention,
							7 * 86400, 1, INT_MAX,
							PGC_USERSET, GUC_UNIT_S,
							NULL, NULL, NULL);
	DefineCustomIntVariable("dedup.cleanup_batch_size",
							"Most expired rows one cleanup batch deletes.",
							"Each batch is its own short transaction.",
							&dedup_cleanup_batch_size,
							10000, 1, DEDUP_MAX_CLEANUP_BATCH,
							PGC_USERSET, 0,
							NULL, NULL, NULL);
	DefineCustomIntVariable("dedup.cleanup_pause",
							"Pause of the cleanup between two batches.",
							"Leaves the CPU and I/O to the traffic that writes new rows.",
							&dedup_cleanup_pause,
							20, 0, 60000,
							PGC_USERSET, GUC_UNIT_MS,
							NULL, NULL, NULL);
	DefineCustomIntVariable("dedup.outbox_max_attempts",
							"Hand-outs of an outbox event before a failure makes it dead, for topics without their own.",
							NULL,
							&dedup_outbox_max_attempts,
							10, 1, 1000000,
							PGC_USERSET, 0,
							NULL, NULL, NULL);
	DefineCustomStringVariable("dedup.cleanup_databases",
							   "Databases the cleanup worker cleans, as a comma-separated list.",
							   "Names as in SQL: unquoted names are lowercased.  A database "
							   "that does not exist or lacks the extension is skipped.",
							   &dedup_cleanup_databases,
							   "postgres",
							   PGC_SIGHUP, GUC_LIST_INPUT,
							   dedup_check_database_list, NULL, NULL);
	DefineCustomStringVariable("dedup.cleanup_role",
							   "Role the cleanup worker deletes as.",
							   "Empty means the bootstrap superuser.  The role needs DELETE on "
							   "dedup.claims and dedup.outbox_keys (and on dedup.streams, or idle streams are left), not LOGIN.",
							   &dedup_cleanup_role,
							   "",
							   PGC_SIGHUP, 0,
							   NULL, NULL, NULL);
	DefineCustomIntVariable("dedup.cleanup_interval",
							"Time between the starts of two cleanup passes in a database.",
							NULL,
							&dedup_cleanup_interval,
							60, 1, 86400,
							PGC_SIGHUP, GUC_UNIT_S,
							NULL, NULL, NULL);
	DefineCustomIntVariable("dedup.bucket_interval",
							"Time new claims go into one bucket of dedup.claims before the cleanup opens the next.",
							"Shorter keeps the index new keys go into smaller; every bucket "
							"that still holds a live row is read by each new claim.",
							&dedup_bucket_interval,
							6 * 3600, 1, 365 * 86400,
							PGC_SUSET, GUC_UNIT_S,
							NULL, NULL, NULL);
	DefineCustomBoolVariable("dedup.cleanup_enabled",
							 "Whether the cleanup worker runs.",
							 "Off stops passes at the next batch boundary; on resumes them.",
							 &dedup_cleanup_enabled,
							 true,
							 PGC_SIGHUP, 0,
							 NULL, NULL, NULL);
	/* shared memory is sized once, by a library loaded at server start */
	if (process_shared_preload_libraries_in_progress)
		DefineCustomIntVariable("dedup.bucket_filter_memory",
								"Shared memory for the filters of the sealed buckets of dedup.claims.",
								"A filter takes 24 bits a key; a bucket without one is read by every new claim.  0 disables them.",
								&dedup_bucket_filter_memory,
								64, 0, 1024,
								PGC_POSTMASTER, GUC_UNIT_MB,
								NULL, NULL, NULL);
	MarkGUCPrefixReserved("dedup");

	if (process_shared_preload_libraries_in_progress)
	{
		prev_shmem_request_hook = shmem_request_hook;
		shmem_request_hook = dedup_shmem_request;
		prev_shmem_startup_hook = shmem_startup_hook;
		shmem_startup_hook = dedup_shmem_startup;
		dedup_filter_register_hooks();
		dedup_worker_register_launcher();
	}
}

static void
dedup_shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	dedup_stats_shmem_request();
	dedup_scopestats_shmem_request();
	dedup_filter_shmem_request();
}

static void
dedup_shmem_startup(void)
{
	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();
	dedup_stats_shmem_startup();
	dedup_scopestats_shmem_startup();
	dedup_filter_shmem_startup();
}

/* dedup.cleanup_databases must be a list of names */
static bool
dedup_check_database_list(char **newval, void **extra, GucSource source)
{
	char	   *raw = pstrdup(*newval);
	List	   *names;
	bool		ok = SplitIdentifierString(raw, ',', &names);

	if (!ok)
		GUC_check_errdetail("List syntax is invalid.");
	list_free(names);
	pfree(raw);
	return ok;
}

/*
 * The OIDs of the extension's tables and indexes, looked up by name once per
 * backend and forgotten when any of them is invalidated (dropped, renamed,
 * the extension re-created).
 */
static Oid	dedup_relids[DEDUP_NUM_RELATIONS];
static const char *const dedup_relnames[DEDUP_NUM_RELATIONS] = {
	[DEDUP_REL_CLAIMS] = "claims",
	[DEDUP_REL_CLAIMS_PKEY] = "claims_pkey",
	[DEDUP_REL_SCOPES] = "scopes",
	[DEDUP_REL_SCOPES_PKEY] = "scopes_pkey",
	[DEDUP_REL_OUTBOX_KEYS] = "outbox_keys",
	[DEDUP_REL_OUTBOX_KEYS_PKEY] = "outbox_keys_pkey",
	[DEDUP_REL_OUTBOX] = "outbox",
	[DEDUP_REL_GRANTS] = "grants",
	[DEDUP_REL_STREAMS] = "streams",
	[DEDUP_REL_STREAMS_PKEY] = "streams_pkey",
	[DEDUP_REL_BUCKETS] = "buckets",
	[DEDUP_REL_OUTBOX_TOPICS] = "outbox_topics",
	[DEDUP_REL_OUTBOX_PKEY] = "outbox_pkey",
	[DEDUP_REL_OUTBOX_SEQ] = "outbox_seq_seq",
	[DEDUP_REL_HISTORY_GENERATIONS] = "history_generations",
	[DEDUP_REL_HISTORY_BLOCKS] = "history_blocks",
	[DEDUP_REL_HISTORY_BLOCKS_PKEY] = "history_blocks_pkey",
	[DEDUP_REL_OUTBOX_RETRY] = "outbox_retry",
	[DEDUP_REL_OUTBOX_RETRY_PKEY] = "outbox_retry_pkey",
	[DEDUP_REL_OUTBOX_DEAD] = "outbox_dead",
	[DEDUP_REL_OUTBOX_DEAD_PKEY] = "outbox_dead_pkey",
};
static DedupCitusKind dedup_relkind[DEDUP_NUM_RELATIONS];	/* Citus's kind of each */
static bool dedup_relremote[DEDUP_NUM_RELATIONS];	/* one shard, not on this node */
static bool dedup_citus_worker = false;	/* this node is a Citus worker */
static uint64 dedup_relids_resets = 0;	/* counts the resets of dedup_relids */
static bool dedup_callback_registered = false;

static void
dedup_relcache_callback(Datum arg, Oid relid)
{
	bool		reset = !OidIsValid(relid) || dedup_cluster_forget(relid);

	for (int i = 0; i < DEDUP_NUM_RELATIONS && !reset; i++)
		reset = (dedup_relids[i] == relid);
	if (reset)
	{
		memset(dedup_relids, 0, sizeof(dedup_relids));
		dedup_cluster_reset();
		dedup_relids_resets++;
	}
}

/* The table an index or sequence of the extension belongs to; a table itself. */
static DedupRelation
dedup_relation_table(DedupRelation rel)
{
	switch (rel)
	{
		case DEDUP_REL_CLAIMS_PKEY:
			return DEDUP_REL_CLAIMS;
		case DEDUP_REL_SCOPES_PKEY:
			return DEDUP_REL_SCOPES;
		case DEDUP_REL_OUTBOX_KEYS_PKEY:
			return DEDUP_REL_OUTBOX_KEYS;
		case DEDUP_REL_STREAMS_PKEY:
			return DEDUP_REL_STREAMS;
		case DEDUP_REL_OUTBOX_PKEY:
		case DEDUP_REL_OUTBOX_SEQ:
			return DEDUP_REL_OUTBOX;
		case DEDUP_REL_HISTORY_BLOCKS_PKEY:
			return DEDUP_REL_HISTORY_BLOCKS;
		case DEDUP_REL_OUTBOX_RETRY_PKEY:
			return DEDUP_REL_OUTBOX_RETRY;
		case DEDUP_REL_OUTBOX_DEAD_PKEY:
			return DEDUP_REL_OUTBOX_DEAD;
		default:
			return rel;
	}
}

/*
 * Whether this node is a worker of a Citus cluster: its group in Citus's
 * catalog pg_dist_local_group is not the coordinator's (0).  A worker holds
 * shards of dedup's distributed tables; the tables Citus does not manage
 * (the outbox, the buckets, the history) are the coordinator's, and a
 * worker's own copy of them would be a second, separate state.
 */
static bool
dedup_read_citus_worker(void)
{
	Oid			catalog = get_relname_relid("pg_dist_local_group", PG_CATALOG_NAMESPACE);
	Relation	rel;
	SysScanDesc scan;
	HeapTuple	tuple;
	bool		worker = false;

	if (!OidIsValid(catalog))
		return false;
	rel = table_open(catalog, AccessShareLock);
	scan = systable_beginscan(rel, InvalidOid, false, NULL, 0, NULL);
	tuple = systable_getnext(scan);
	if (HeapTupleIsValid(tuple))
	{
		bool		isnull;
		Datum		group = heap_getattr(tuple, 1, RelationGetDescr(rel), &isnull);

		worker = !isnull && DatumGetInt32(group) > 0;
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	return worker;
}

/*
 * The owner of one of the extension's tables: of the table, or of the shell
 * Citus keeps of it where it is distributed.
 */
Oid
dedup_relation_owner(DedupRelation rel)
{
	Relation	r;
	Oid			owner;

	if (dedup_relation_hashed(rel))
		r = relation_open(dedup_relation_lookup(rel), AccessShareLock);
	else
		r = dedup_relation_open(rel, AccessShareLock);
	owner = r->rd_rel->relowner;
	relation_close(r, NoLock);
	return owner;
}

/* The OID of type dedup_fingerprint: that of the key of dedup.claims. */
Oid
dedup_fingerprint_type(void)
{
	return get_atttype(dedup_relation_lookup(DEDUP_REL_CLAIMS), 1);
}

/*
 * The fingerprint's equality operator, schema-qualified, for SQL text:
 * "OPERATOR(schema.=)".
 */
char *
dedup_fingerprint_eq_sql(void)
{
	HeapTuple	tuple = SearchSysCache1(TYPEOID, ObjectIdGetDatum(dedup_fingerprint_type()));
	Oid			nsp;

	if (!HeapTupleIsValid(tuple))
		elog(ERROR, "cache lookup failed for type dedup_fingerprint");
	nsp = ((Form_pg_type) GETSTRUCT(tuple))->typnamespace;
	ReleaseSysCache(tuple);
	return psprintf("OPERATOR(%s.=)", quote_identifier(get_namespace_name(nsp)));
}

/*
 * OID of one of the extension's tables or indexes in the internal schema,
 * or InvalidOid when there is none (the extension is not installed, or at a
 * version that has no such relation).  Of a table Citus keeps in one shard
 * (a reference table: dedup.scopes, dedup.grants on a cluster), the OID is
 * that of the shard on this node, where the rows are; of a table distributed
 * by hash, the shell's (cluster.c finds a key's shard).
 */
Oid
dedup_relation_lookup(DedupRelation rel)
{
	if (!dedup_callback_registered)
	{
		CacheRegisterRelcacheCallback(dedup_relcache_callback, (Datum) 0);
		dedup_callback_registered = true;
	}
	/* a cheap check, so that a re-created extension is seen at once */
	AcceptInvalidationMessages();
	while (!OidIsValid(dedup_relids[rel]))
	{
		uint64		resets = dedup_relids_resets;
		Oid			nsp = get_namespace_oid(DEDUP_INTERNAL_SCHEMA, true);
		DedupRelation table = dedup_relation_table(rel);
		Oid			relid = OidIsValid(nsp) ?
			get_relname_relid(dedup_relnames[rel], nsp) : InvalidOid;
		Oid			table_relid = OidIsValid(nsp) ?
			get_relname_relid(dedup_relnames[table], nsp) : InvalidOid;
		DedupCitusKind kind;
		bool		remote = false;
		bool		worker;

		if (!OidIsValid(relid))
			return InvalidOid;
		/* Citus's catalogs, read under a lock that takes in invalidations */
		kind = dedup_cluster_kind(table_relid);
		worker = dedup_read_citus_worker();
		if (kind == DEDUP_CITUS_SINGLE && rel != DEDUP_REL_OUTBOX_SEQ)
		{
			bool		local;
			Oid			shard = dedup_cluster_single_shard(table_relid, dedup_relnames[rel], &local);

			remote = !local || !OidIsValid(shard);
			if (!remote)
				relid = shard;
		}
		if (resets != dedup_relids_resets)
			continue;			/* an invalidation came: look the name up again */
		dedup_relkind[rel] = kind;
		dedup_relremote[rel] = remote;
		dedup_citus_worker = worker;
		dedup_relids[rel] = relid;
	}
	return dedup_relids[rel];
}

/*
 * Whether this node is a worker of a Citus cluster, where only the shards of
 * dedup's distributed tables are dedup's to use.
 */
bool
dedup_node_is_citus_worker(void)
{
	(void) dedup_relation_lookup(DEDUP_REL_CLAIMS);
	return dedup_citus_worker;
}

/* Whether Citus distributes one of dedup's tables by hash of its key. */
bool
dedup_relation_hashed(DedupRelation rel)
{
	return OidIsValid(dedup_relation_lookup(rel)) && dedup_relkind[rel] == DEDUP_CITUS_HASH;
}

/*
 * OID of one of the extension's tables or indexes in the internal schema,
 * or an error that says the extension is not (yet) installed here, or that
 * the relation is not on this node of a Citus cluster.
 */
Oid
dedup_relation_oid(DedupRelation rel)
{
	Oid			relid = dedup_relation_lookup(rel);

	if (!OidIsValid(relid))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("extension \"dedup\" is not installed in this database"),
				 errdetail("Relation \"%s.%s\" does not exist.",
						   DEDUP_INTERNAL_SCHEMA, dedup_relnames[rel]),
				 errhint("Run CREATE EXTENSION dedup.")));
	if (dedup_citus_worker && dedup_relkind[rel] == DEDUP_CITUS_NONE)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("dedup's %s run on the coordinator of a Citus cluster, not on its workers",
						dedup_relation_table(rel) == DEDUP_REL_BUCKETS ? "buckets" :
						dedup_relation_table(rel) == DEDUP_REL_HISTORY_GENERATIONS ||
						dedup_relation_table(rel) == DEDUP_REL_HISTORY_BLOCKS ? "histories" :
						dedup_relation_table(rel) == DEDUP_REL_CLAIMS ? "claims" :
						dedup_relation_table(rel) == DEDUP_REL_STREAMS ? "sequence marks" : "outbox tables"),
				 errdetail("This node is a worker of a Citus cluster; table \"%s.%s\" is not distributed, so its copy here is not the one the coordinator's calls use.",
						   DEDUP_INTERNAL_SCHEMA, dedup_relnames[dedup_relation_table(rel)]),
				 errhint("Connect to the coordinator to call this function.")));
	if (dedup_relkind[rel] == DEDUP_CITUS_HASH)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("this call does not reach the shards of dedup.%s", dedup_relnames[dedup_relation_table(rel)]),
				 errdetail("Table \"%s.%s\" is distributed by Citus: dedup reaches a row of it through its key, on the node that holds the key's shard.",
						   DEDUP_INTERNAL_SCHEMA, dedup_relnames[dedup_relation_table(rel)]),
				 errhint("Call the functions that take a key, or query the table through the coordinator; the README's \"Distributed (Citus)\" section lists what runs on a cluster.")));
	if (dedup_relremote[rel])
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("table \"%s.%s\" has no placement on this node of the Citus cluster",
						DEDUP_INTERNAL_SCHEMA, dedup_relnames[dedup_relation_table(rel)]),
				 errdetail("Citus keeps it in one shard, and this node holds no copy of it."),
				 errhint("Add this node to the cluster's metadata (citus_set_coordinator_host on the coordinator), or call from a node that holds it.")));
	return relid;
}

/*
 * Open one of the extension's tables or indexes with a lock, the way
 * RangeVarGetRelidExtended() does: the OID found by name may belong to a
 * relation being dropped (DROP EXTENSION in a transaction still in
 * progress), so once the lock is held, and the invalidations that came with
 * it are processed, look the name up again.  The same OID: it is ours and
 * stays so while we hold the lock.  None: the extension is gone (42P01, from
 * dedup_relation_oid).  Another: the extension was dropped and created again
 * while we waited, and the function being run, its argument and result
 * types are the old extension's, so the call cannot go on: 42P01 as well,
 * asking for the statement to be run again.
 */
Relation
dedup_relation_open(DedupRelation rel, LOCKMODE lockmode)
{
	Oid			relid = dedup_relation_oid(rel);

	LockRelationOid(relid, lockmode);
	if (dedup_relation_oid(rel) != relid)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("extension \"dedup\" was dropped while this call waited for it"),
				 errdetail("Relation \"%s.%s\" was dropped and created again by a transaction that committed meanwhile.",
						   DEDUP_INTERNAL_SCHEMA, dedup_relnames[rel]),
				 errhint("Run the statement again.")));
	return relation_open(relid, NoLock);
}

/*
 * Refuse to write on a standby or in a read-only transaction, the way the
 * executor refuses DML there (our writes bypass the executor).
 */
void
dedup_check_writable(const char *funcname)
{
	if (RecoveryInProgress())
		ereport(ERROR,
				(errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION),
				 errmsg("cannot execute %s() during recovery", funcname),
				 errdetail("This server is a hot standby; dedup writes only on the primary."),
				 errhint("Connect to the primary server.")));
	/* format the command name only when it is needed: this runs per claim */
	if (XactReadOnly)
		PreventCommandIfReadOnly(psprintf("%s()", funcname));
	if (IsInParallelMode())
		PreventCommandIfParallelMode(psprintf("%s()", funcname));
}

/*
 * dedup.check_writable(funcname text): the same check for the relay's
 * plpgsql functions.
 */
PG_FUNCTION_INFO_V1(dedup_check_writable_sql);
Datum
dedup_check_writable_sql(PG_FUNCTION_ARGS)
{
	dedup_check_writable(text_to_cstring(PG_GETARG_TEXT_PP(0)));
	PG_RETURN_VOID();
}

/* A boolean argument that must not be NULL (nowait). */
bool
dedup_bool_arg(FunctionCallInfo fcinfo, int argno, const char *what)
{
	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not be null", what)));
	return PG_GETARG_BOOL(argno);
}

/*
 * A scope name (or an outbox topic, which is a scope; "what" names it in
 * errors): not empty, not absurdly long.  Every path that keeps a scope's
 * name in a buffer of DEDUP_MAX_SCOPE_BYTES + 1 bytes passes it here first.
 */
void
dedup_check_scope_name(const text *scope, const char *what)
{
	Size		len = VARSIZE_ANY_EXHDR(scope);

	if (len == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must not be empty", what)));
	if (len > DEDUP_MAX_SCOPE_BYTES)
		ereport(ERROR,
				(errcode(ERRCODE_STRING_DATA_RIGHT_TRUNCATION),
				 errmsg("%s name is too long", what),
				 errdetail("The %s name has %zu bytes; the limit is %d.",
						   what, len, DEDUP_MAX_SCOPE_BYTES)));
}

/* The scope argument of a call: not NULL, and a valid scope name. */
text *
dedup_scope_arg(FunctionCallInfo fcinfo, int argno, const char *what)
{
	text	   *scope;

	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not be null", what)));
	scope = PG_GETARG_TEXT_PP(argno);
	dedup_check_scope_name(scope, what);
	return scope;
}

/*
 * The rule for every interval dedup takes as a ttl, lease, retention or
 * delay.  Its months, days and microseconds are each added on the calendar
 * (a month is 28 to 31 days, a day 23 to 25 hours across a daylight-saving
 * change), so no single sum of them says where it ends: '-1200 mon 36500
 * days' would count as +500 days and end 25 days in the past.  Hence:
 *	- no part negative, and at least one part positive (unless allow_zero);
 *	- no part longer than 100 years, so that adding it cannot overflow;
 *	- its end, computed on the calendar from the time of the call, at most
 *	  100 years after that time.
 * The first two do not depend on the time: they are also the CHECK
 * constraints of dedup.scopes (dedup.interval_is_valid), so that a stored
 * setting can always be applied.  A stored setting was held to the third
 * when it was set.
 */
#define DEDUP_MAX_INTERVAL_MONTHS (100 * MONTHS_PER_YEAR)
#define DEDUP_MAX_INTERVAL_DAYS 36525	/* the most days 100 years have */
#define DEDUP_MIN_CENTURY_DAYS 36524	/* the fewest */
#define DEDUP_MAX_DAY_USECS (25 * USECS_PER_HOUR)	/* a calendar day across DST */

static char *
dedup_interval_text(const Interval *value)
{
	return DatumGetCString(DirectFunctionCall1(interval_out, IntervalPGetDatum(value)));
}

/* Which part of the rule an interval breaks, if any (not the calendar end). */
typedef enum IntervalProblem
{
	INTERVAL_OK,
	INTERVAL_ZERO,
	INTERVAL_NEGATIVE,
	INTERVAL_TOO_LONG
} IntervalProblem;

static IntervalProblem
dedup_interval_problem(const Interval *value, bool allow_zero)
{
	if (value->month < 0 || value->day < 0 || value->time < 0)
		return INTERVAL_NEGATIVE;
	if (!allow_zero && value->month == 0 && value->day == 0 && value->time == 0)
		return INTERVAL_ZERO;
	if (value->month > DEDUP_MAX_INTERVAL_MONTHS || value->day > DEDUP_MAX_INTERVAL_DAYS ||
		value->time > DEDUP_MAX_INTERVAL_DAYS * USECS_PER_DAY)
		return INTERVAL_TOO_LONG;
	return INTERVAL_OK;
}

static void
dedup_report_interval_too_long(const Interval *value, const char *what, TimestampTz from)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("%s must be at most 100 years", what),
			 errdetail("The value given was %s, which ends more than 100 years after %s.",
					   dedup_interval_text(value), timestamptz_to_str(from))));
}

/*
 * Check an interval against the whole rule, its end computed from the time
 * "from"; invalid_parameter_value (22023) when it breaks it.
 */
void
dedup_check_interval(const Interval *value, const char *what, bool allow_zero,
					 TimestampTz from)
{
	int64		longest_days;

	switch (dedup_interval_problem(value, allow_zero))
	{
		case INTERVAL_OK:
			break;
		case INTERVAL_ZERO:
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("%s must be greater than zero", what),
					 errdetail("The value given was %s.", dedup_interval_text(value))));
			break;
		case INTERVAL_NEGATIVE:
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("%s must not have a negative part", what),
					 errdetail("The value given was %s; its months, days and time must each be zero or more.",
							   dedup_interval_text(value)),
					 errhint("Write the %s with one sign, such as '1 day' or '36 hours'.", what)));
			break;
		case INTERVAL_TOO_LONG:
			dedup_report_interval_too_long(value, what, from);
			break;
	}

	/* the end on the calendar, unless it is plainly within 100 years */
	longest_days = ((int64) value->month * 31 + value->day) * DEDUP_MAX_DAY_USECS / USECS_PER_DAY +
		value->time / USECS_PER_DAY + 1;
	if (longest_days > DEDUP_MIN_CENTURY_DAYS)
	{
		Interval	century = {0};

		century.month = DEDUP_MAX_INTERVAL_MONTHS;
		if (dedup_timestamp_plus(from, value) > dedup_timestamp_plus(from, &century))
			dedup_report_interval_too_long(value, what, from);
	}
}

/*
 * An optional interval argument (NULL means "use the scope's setting"),
 * checked when given, its end from the time of the call.
 */
Interval *
dedup_interval_arg(FunctionCallInfo fcinfo, int argno, const char *what)
{
	Interval   *value;

	if (PG_NARGS() <= argno || PG_ARGISNULL(argno))
		return NULL;
	value = PG_GETARG_INTERVAL_P(argno);
	dedup_check_interval(value, what, false, GetCurrentTimestamp());
	return value;
}

/* t + span on the calendar (in the session's time zone, as SQL's + does). */
TimestampTz
dedup_timestamp_plus(TimestampTz t, const Interval *span)
{
	return DatumGetTimestampTz(DirectFunctionCall2(timestamptz_pl_interval,
												   TimestampTzGetDatum(t),
												   IntervalPGetDatum(span)));
}

/*
 * dedup.check_interval(value interval, what text, allow_zero boolean): the
 * same check for the relay's plpgsql functions, from the statement's start
 * (the time they add the interval to).
 */
PG_FUNCTION_INFO_V1(dedup_check_interval_sql);
Datum
dedup_check_interval_sql(PG_FUNCTION_ARGS)
{
	char	   *what;

	if (PG_ARGISNULL(1) || PG_ARGISNULL(2))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("what and allow_zero must not be null")));
	what = text_to_cstring(PG_GETARG_TEXT_PP(1));
	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not be null", what)));
	dedup_check_interval(PG_GETARG_INTERVAL_P(0), what, PG_GETARG_BOOL(2),
						 GetCurrentStatementStartTimestamp());
	PG_RETURN_VOID();
}

/*
 * dedup.interval_is_valid(value interval): the part of the rule that does
 * not depend on the time, for the CHECK constraints of dedup.scopes.
 */
PG_FUNCTION_INFO_V1(dedup_interval_is_valid);
Datum
dedup_interval_is_valid(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(dedup_interval_problem(PG_GETARG_INTERVAL_P(0), false) == INTERVAL_OK);
}
