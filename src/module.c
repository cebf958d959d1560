/*-------------------------------------------------------------------------
 *
 * module.c
 *	  Module entry point of the dedup extension, the top of its layers
 *	  (src/README.md): _PG_init defines the settings (settings.c), installs
 *	  the hooks by which the history tier (history.c) answers the layers
 *	  below it, and, when preloaded, the shared-memory hooks and the
 *	  cleanup launcher.
 *
 * The library works both loaded on demand by CREATE EXTENSION and loaded
 * through shared_preload_libraries; only the cleanup worker, its figures
 * (cleanup_stats.c), the scopes' counters (scope_counters.c), the
 * buckets' filters (filter.c) and the ttls that set the buckets' interval
 * (bucket.c) need the latter.
 *
 * Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "storage/ipc.h"

#include "bucket.h"
#include "cleanup_stats.h"
#include "filter.h"
#include "history.h"
#include "scope_counters.h"
#include "settings.h"
#include "store.h"
#include "worker.h"

PG_MODULE_MAGIC;

void		_PG_init(void);

static void dedup_shmem_request(void);
static void dedup_shmem_startup(void);

static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

void
_PG_init(void)
{
	dedup_settings_define();

	/* the history tier answers the store and the filters, which are below it */
	key_store_history_hook = dedup_history_may_contain;
	dedup_filter_history_hook = dedup_history_generation_is;

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
	dedup_bucket_shmem_request();
}

static void
dedup_shmem_startup(void)
{
	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();
	dedup_stats_shmem_startup();
	dedup_scopestats_shmem_startup();
	dedup_filter_shmem_startup();
	dedup_bucket_shmem_startup();
}
