/*-------------------------------------------------------------------------
 *
 * settings.c
 *	  The settings (GUCs) of the dedup extension, under the reserved
 *	  "dedup." prefix: their variables, and dedup_settings_define(), which
 *	  the module's entry (module.c) calls as the library loads.
 *
 * dedup.bucket_filter_memory and dedup.outbox_aggregate_locks size shared
 * memory, so they are defined only when the library is loaded at server
 * start (shared_preload_libraries).
 *
 * Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <limits.h>

#include "miscadmin.h"
#include "utils/guc.h"
#include "utils/varlena.h"

#include "checks.h"
#include "settings.h"

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
int			dedup_bucket_interval = 0;
int			dedup_bucket_max_size = -1; /* kB */
bool		dedup_require_declared_scopes = false;
bool		dedup_outbox_fast_path = true;
int			dedup_bucket_filter_memory = 64;	/* MB */
int			dedup_outbox_aggregate_locks = 65536;

/* Define every setting of dedup, and reserve the prefix; from _PG_init. */
void
dedup_settings_define(void)
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
							"0 follows the ttls written into the bucket: a quarter of the shortest, at least "
							"the longest over 32, within 1s and 6h unless the longest needs more.  Every bucket that still holds a live "
							"row is read by each new claim.",
							&dedup_bucket_interval,
							0, 0, 365 * 86400,
							PGC_SUSET, GUC_UNIT_S,
							NULL, NULL, NULL);
	DefineCustomIntVariable("dedup.bucket_max_size",
							"Size of the current bucket's primary key at which the cleanup opens the next bucket.",
							"-1 means a sixteenth of shared_buffers, at least 8MB; 0 switches by time only.  "
							"Beyond the cache, each new key costs a full-page image after every checkpoint.",
							&dedup_bucket_max_size,
							-1, -1, INT_MAX,
							PGC_SUSET, GUC_UNIT_KB,
							NULL, NULL, NULL);
	DefineCustomBoolVariable("dedup.require_declared_scopes",
							 "Whether writes under a scope dedup_set_scope() never declared are refused.",
							 "Catches a mistyped scope or swapped arguments; set it for a database or a role "
							 "with ALTER DATABASE or ALTER ROLE.",
							 &dedup_require_declared_scopes,
							 false,
							 PGC_SUSET, 0,
							 NULL, NULL, NULL);
	DefineCustomBoolVariable("dedup.outbox_fast_path",
							 "Whether the outbox relay's take and ack use their fast path.",
							 "Off: every take and ack runs the PL/pgSQL functions, which own the "
							 "relay's rules; the tests run the relay both ways.",
							 &dedup_outbox_fast_path,
							 true,
							 PGC_USERSET, 0,
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
	if (process_shared_preload_libraries_in_progress)
		DefineCustomIntVariable("dedup.outbox_aggregate_locks",
								"Aggregates the outbox's producers in progress can hold at once, over all sessions.",
								"Each aggregate an open transaction put an event of takes one entry (24 bytes) until it ends.",
								&dedup_outbox_aggregate_locks,
								65536, 1024, 16777216,
								PGC_POSTMASTER, 0,
								NULL, NULL, NULL);
	MarkGUCPrefixReserved("dedup");
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
