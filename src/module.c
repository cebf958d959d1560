/*-------------------------------------------------------------------------
 *
 * module.c
 *	  Module entry point of the dedup extension, the top of its layers
 *	  (src/README.md): _PG_init defines the settings (settings.c), installs
 *	  the hooks by which the history tier (history.c) answers the layers
 *	  below it, and, when preloaded, the shared-memory hooks, the utility
 *	  hook that notes the sessions listening on the outbox's channel
 *	  (outbox.c), the object-access hook that notes DROP EXTENSION dedup
 *	  (whose commit frees the database's filters and its scopes' counters)
 *	  and the cleanup launcher.  It also names the fix of a
 *	  known slip in a call that matches no dedup function (dedup_emit_log).
 *
 * The library works both loaded on demand by CREATE EXTENSION and loaded
 * through shared_preload_libraries; only the cleanup worker, its figures
 * (cleanup_stats.c), the scopes' counters (scope_counters.c), the
 * buckets' filters (filter.c), the ttls that set the buckets' interval
 * (bucket.c) and the outbox's listeners (outbox.c: without, every put
 * notifies) need the latter.
 *
 * Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <string.h>

#include "access/htup_details.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/objectaccess.h"
#include "catalog/pg_extension_d.h"
#include "catalog/pg_language_d.h"
#include "catalog/pg_proc.h"
#include "commands/extension.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "storage/ipc.h"
#include "tcop/utility.h"
#include "utils/builtins.h"
#include "utils/catcache.h"
#include "utils/elog.h"
#include "utils/memutils.h"
#include "utils/syscache.h"

#include "bucket.h"
#include "catalog.h"
#include "cleanup_stats.h"
#include "filter.h"
#include "history.h"
#include "outbox.h"
#include "scope_counters.h"
#include "settings.h"
#include "store.h"
#include "worker.h"

PG_MODULE_MAGIC;

void		_PG_init(void);

static void dedup_shmem_request(void);
static void dedup_shmem_startup(void);
static void dedup_emit_log(ErrorData *edata);
static void dedup_process_utility(PlannedStmt *pstmt, const char *queryString,
								  bool readOnlyTree, ProcessUtilityContext context,
								  ParamListInfo params, QueryEnvironment *queryEnv,
								  DestReceiver *dest, QueryCompletion *qc);
static const char *dedup_nowait_as_ttl(const char *message, const char **name, int *which);
static bool dedup_call_is_ours(const char *message, const char *name, const char *funcname);
static void dedup_object_access(ObjectAccessType access, Oid classId, Oid objectId, int subId,
								void *arg);

static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;
static emit_log_hook_type prev_emit_log_hook = NULL;
static ProcessUtility_hook_type prev_process_utility_hook = NULL;
static object_access_hook_type prev_object_access_hook = NULL;

void
_PG_init(void)
{
	dedup_settings_define();

	/* the history tier answers the store and the filters, which are below it */
	key_store_history_hook = dedup_history_may_contain;
	dedup_filter_history_hook = dedup_history_generation_is;

	prev_emit_log_hook = emit_log_hook;
	emit_log_hook = dedup_emit_log;

	if (process_shared_preload_libraries_in_progress)
	{
		prev_shmem_request_hook = shmem_request_hook;
		shmem_request_hook = dedup_shmem_request;
		prev_shmem_startup_hook = shmem_startup_hook;
		shmem_startup_hook = dedup_shmem_startup;
		prev_process_utility_hook = ProcessUtility_hook;
		ProcessUtility_hook = dedup_process_utility;
		prev_object_access_hook = object_access_hook;
		object_access_hook = dedup_object_access;
		dedup_worker_register_launcher();
	}
}

static void
dedup_shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	dedup_cleanup_stats_shmem_request();
	dedup_scope_counters_shmem_request();
	dedup_filter_shmem_request();
	dedup_bucket_shmem_request();
	outbox_listeners_shmem_request();
	outbox_aggregates_shmem_request();
}

static void
dedup_shmem_startup(void)
{
	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();
	dedup_cleanup_stats_shmem_startup();
	dedup_scope_counters_shmem_startup();
	dedup_filter_shmem_startup();
	dedup_bucket_shmem_startup();
	outbox_listeners_shmem_startup();
	outbox_aggregates_shmem_startup();
}

/*
 * Every utility statement: a LISTEN is noted for the outbox's wake-ups
 * (outbox_note_listen(), before the LISTEN runs), then the statement runs.
 */
static void
dedup_process_utility(PlannedStmt *pstmt, const char *queryString, bool readOnlyTree,
					  ProcessUtilityContext context, ParamListInfo params,
					  QueryEnvironment *queryEnv, DestReceiver *dest, QueryCompletion *qc)
{
	if (IsA(pstmt->utilityStmt, ListenStmt))
		outbox_note_listen(((ListenStmt *) pstmt->utilityStmt)->conditionname);
	if (prev_process_utility_hook)
		prev_process_utility_hook(pstmt, queryString, readOnlyTree, context, params,
								  queryEnv, dest, qc);
	else
		standard_ProcessUtility(pstmt, queryString, readOnlyTree, context, params,
								queryEnv, dest, qc);
}

/* ---------------------------------------------------------------------
 * DROP EXTENSION dedup
 *
 * What dedup keeps in shared memory for a database outlives its tables:
 * the filters of its buckets and generations (filter.c) and its scopes'
 * counters (scope_counters.c).  A transaction that drops the extension
 * frees the one and marks the other dropped as it commits, and only then:
 * a drop in a subtransaction that is rolled back (ROLLBACK TO SAVEPOINT, a
 * PL/pgSQL exception block) is forgotten with it, and one in a
 * subtransaction that commits becomes its parent's, as PostgreSQL keeps its
 * own pending actions (the subtransaction id that noted it, moved to the
 * parent's as the subtransaction commits).  A prepared transaction's drop
 * is not noted: its outcome is decided elsewhere (filter.c and
 * scope_counters.c recognise what it left).
 * ---------------------------------------------------------------------
 */

/* The subtransaction that noted a drop of the extension, or none. */
static SubTransactionId dedup_drop_subid = InvalidSubTransactionId;

/* The extension created again after the drop: its dedup.scopes, read before commit */
static Oid	dedup_drop_recreated = InvalidOid;

static void
dedup_drop_xact_callback(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_PRE_COMMIT:
			/* (catalogs are read before the commit, not in it) */
			if (dedup_drop_subid != InvalidSubTransactionId)
				dedup_drop_recreated = OidIsValid(get_extension_oid("dedup", true)) ?
					dedup_catalog_relation_lookup(DEDUP_REL_SCOPES) : InvalidOid;
			break;
		case XACT_EVENT_COMMIT:
			if (dedup_drop_subid != InvalidSubTransactionId)
			{
				dedup_drop_subid = InvalidSubTransactionId;
				dedup_filter_free_database();
				/* the counts of an extension created again since stay */
				dedup_scope_counters_forget_database(dedup_drop_recreated);
				dedup_drop_recreated = InvalidOid;
			}
			break;
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PREPARE:
			dedup_drop_subid = InvalidSubTransactionId;
			break;
		default:
			break;
	}
}

static void
dedup_drop_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
							SubTransactionId parentSubid, void *arg)
{
	if (dedup_drop_subid != mySubid)
		return;
	if (event == SUBXACT_EVENT_ABORT_SUB)
		dedup_drop_subid = InvalidSubTransactionId;
	else if (event == SUBXACT_EVENT_COMMIT_SUB)
		dedup_drop_subid = parentSubid;
}

static void
dedup_object_access(ObjectAccessType access, Oid classId, Oid objectId, int subId, void *arg)
{
	static bool registered = false;

	if (prev_object_access_hook)
		prev_object_access_hook(access, classId, objectId, subId, arg);
	if (access != OAT_DROP || classId != ExtensionRelationId ||
		objectId != get_extension_oid("dedup", true))
		return;
	if (!registered)
	{
		RegisterXactCallback(dedup_drop_xact_callback, NULL);
		RegisterSubXactCallback(dedup_drop_subxact_callback, NULL);
		registered = true;
	}
	/* noted already by this subtransaction or one above it: it stays theirs */
	if (dedup_drop_subid == InvalidSubTransactionId)
		dedup_drop_subid = GetCurrentSubTransactionId();
}

/* The names of the functions whose slip has a hint, and the fix of each */
static const char *const dedup_slip_names[] = {"dedup_claim", "dedup_claim_batch"};
static const char *const dedup_slip_calls[] = {"dedup_claim(scope, key, nowait => true)",
"dedup_claim_batch(scope, keys, nowait => true)"};

/* The library dedup's C functions name (module_pathname of dedup.control) */
#define DEDUP_MODULE_PATHNAME "$libdir/dedup"

/*
 * A call that matches no function only says so, with PostgreSQL's hint to
 * add casts.  For a known slip, the hint names the fix instead: nowait
 * given in the ttl position of dedup_claim or dedup_claim_batch
 * (dedup_claim('p', 'k', true)), which an overload cannot take without
 * making dedup_claim('p', 'k', '1 hour') ambiguous.  The error is
 * recognized by its untranslated message and the signature PostgreSQL
 * prints in it, and only when the name resolves to dedup's own function
 * (dedup_call_is_ours): a user's function of the same name, called with
 * its schema or found on a search_path without dedup's, keeps PostgreSQL's
 * hint.  Runs only for errors that go to the server log (log_min_messages),
 * as emit_log_hook does.
 */
static void
dedup_emit_log(ErrorData *edata)
{
	const char *call;
	const char *name;
	int			which;

	if (edata->elevel >= ERROR && edata->sqlerrcode == ERRCODE_UNDEFINED_FUNCTION &&
		edata->message_id != NULL && edata->message != NULL &&
		strcmp(edata->message_id, "function %s does not exist") == 0 &&
		(call = dedup_nowait_as_ttl(edata->message, &name, &which)) != NULL &&
		dedup_call_is_ours(edata->message, name, dedup_slip_names[which]))
	{
		MemoryContext old = MemoryContextSwitchTo(ErrorContext);

		edata->hint = psprintf(_("The third argument is the ttl, an interval; nowait is the "
								 "fourth: pass it by name, as in %s."), call);
		MemoryContextSwitchTo(old);
	}
	if (prev_emit_log_hook)
		prev_emit_log_hook(edata);
}

/*
 * When message names dedup_claim or dedup_claim_batch (schema-qualified or
 * not) with a boolean third argument given by position: the call as it
 * should be written, with where the name starts in message and which of
 * dedup_slip_names it is; else NULL.
 */
static const char *
dedup_nowait_as_ttl(const char *message, const char **name, int *which)
{
	for (int i = 0; i < lengthof(dedup_slip_names); i++)
	{
		size_t		len = strlen(dedup_slip_names[i]);
		const char *p = strstr(message, dedup_slip_names[i]);
		int			arg = 0;
		int			depth = 0;
		const char *start;

		if (p == NULL || p[len] != '(' || (p > message && p[-1] != ' ' && p[-1] != '.'))
			continue;
		*name = p;
		*which = i;
		p += len + 1;
		start = p;
		for (; *p != '\0'; p++)
		{
			if (*p == '(')
				depth++;
			else if (*p == ')' && depth > 0)
				depth--;
			else if ((*p == ',' || *p == ')') && depth == 0)
			{
				if (arg == 2)
				{
					if (p - start == 7 && strncmp(start, "boolean", 7) == 0)
						return dedup_slip_calls[i];
					break;
				}
				if (*p == ')')
					break;
				arg++;
				start = p + 1;
				while (*start == ' ')
					start++;
			}
		}
	}
	return NULL;
}

/*
 * Whether the function name that message shows at name (funcname, with
 * the schema PostgreSQL printed before it or none) is dedup's: a C function
 * of dedup's library of that name in the schema named, or in a schema of
 * the search_path for a name without one.  Another function of the name
 * (a user's own, in a database where dedup is not installed, or while
 * dedup's schema is off the search_path) is not.
 *
 * This runs while the error is reported, before the transaction aborts:
 * only while it is still in progress, and from the caches alone, which the
 * parser's failed look-up of the same name and schema just filled (the
 * schema by name, the functions of the name, the search_path), so that it
 * reads nothing from disk.  The message's text before the name is the
 * (maybe translated) message's up to its %s, then the schema and a '.'.
 */
static bool
dedup_call_is_ours(const char *message, const char *name, const char *funcname)
{
	const char *format = _("function %s does not exist");
	const char *hole = strstr(format, "%s");
	const char *signature;
	Oid			nsp = InvalidOid;
	List	   *path = NIL;
	CatCList   *procs;
	bool		ours = false;
	MemoryContext old;

	if (!IsTransactionState() || hole == NULL ||
		strncmp(message, format, hole - format) != 0)
		return false;
	signature = message + (hole - format);
	if (name < signature)
		return false;
	old = MemoryContextSwitchTo(ErrorContext);
	if (name > signature)
	{
		/* "schema.name(": the schema as NameListToString printed it */
		char	   *schema = pnstrdup(signature, name - 1 - signature);

		nsp = get_namespace_oid(schema, true);
		if (!OidIsValid(nsp))
		{
			MemoryContextSwitchTo(old);
			return false;
		}
	}
	else
		path = fetch_search_path(false);
	procs = SearchSysCacheList1(PROCNAMEARGSNSP, CStringGetDatum(funcname));
	for (int i = 0; i < procs->n_members && !ours; i++)
	{
		HeapTuple	tuple = &procs->members[i]->tuple;
		Form_pg_proc proc = (Form_pg_proc) GETSTRUCT(tuple);
		Datum		probin;
		bool		isnull;

		if (OidIsValid(nsp) ? proc->pronamespace != nsp :
			!list_member_oid(path, proc->pronamespace))
			continue;
		if (proc->prolang != ClanguageId)
			continue;
		probin = SysCacheGetAttr(PROCOID, tuple, Anum_pg_proc_probin, &isnull);
		ours = !isnull && strcmp(TextDatumGetCString(probin), DEDUP_MODULE_PATHNAME) == 0;
	}
	ReleaseSysCacheList(procs);
	MemoryContextSwitchTo(old);
	return ours;
}
