/*-------------------------------------------------------------------------
 *
 * cleanup.h
 *	  What the cleanup (cleanup.c), its figures (stats.c) and the background
 *	  worker that runs it (worker.c) share: the kinds of rows that expire,
 *	  one batch of a cleanup pass, and the shared-memory figures.
 *
 * Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.
 *-------------------------------------------------------------------------
 */
#ifndef DEDUP_CLEANUP_H
#define DEDUP_CLEANUP_H

#include "datatype/timestamp.h"

/*
 * The kinds of rows the cleanup deletes; the figures are kept per kind.
 * Claims and records share dedup.claims (a record has a record_state);
 * outbox event keys live in dedup.outbox_keys, stream marks in
 * dedup.streams.
 */
typedef enum DedupKind
{
	DEDUP_KIND_CLAIM,
	DEDUP_KIND_RECORD,
	DEDUP_KIND_OUTBOX,
	DEDUP_KIND_STREAM,
	DEDUP_NUM_KINDS
} DedupKind;

extern const char *const dedup_kind_names[DEDUP_NUM_KINDS];

/*
 * A cleanup pass is a sequence of batches, each in its own transaction.
 * A position says where a batch starts: 0 starts a pass, and each batch
 * returns the position of the next, or DEDUP_CLEANUP_DONE after the last.
 */
#define DEDUP_CLEANUP_DONE	(-1)

/* cleanup.c: one batch of a pass, in the current transaction */
extern int64 dedup_cleanup_run_batch(int64 *position, int batch_size);
extern bool dedup_cleanup_position_valid(int64 position);
extern int64 dedup_cleanup_next_stage(int64 position);

/* stats.c: the figures, in shared memory when the library is preloaded */
extern void dedup_stats_shmem_request(void);
extern void dedup_stats_shmem_startup(void);
extern void dedup_stats_begin_batch(bool pass_start);
extern void dedup_stats_end_batch(bool pass_end, const int64 deleted[DEDUP_NUM_KINDS]);

/* What the worker last found in a database, so that it logs only changes. */
typedef enum DedupDatabaseState
{
	DEDUP_DB_UNKNOWN,
	DEDUP_DB_CLEANING,
	DEDUP_DB_NO_EXTENSION,
	DEDUP_DB_NO_ROLE,
	DEDUP_DB_READ_ONLY,
	DEDUP_DB_NOT_PERMITTED
} DedupDatabaseState;

extern DedupDatabaseState dedup_stats_swap_state(Oid dboid, DedupDatabaseState state);
extern bool dedup_stats_begin_pass(Oid dboid);

/* worker.c: the launcher and the per-database cleanup workers */
extern void dedup_worker_register_launcher(void);

#endif							/* DEDUP_CLEANUP_H */
