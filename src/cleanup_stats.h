/*-------------------------------------------------------------------------
 *
 * cleanup_stats.h
 *	  The cleanup's figures (cleanup_stats.c): the kinds of rows that
 *	  expire, the figures kept per kind in shared memory, and what the
 *	  worker last found in each database.
 *
 * Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.
 *-------------------------------------------------------------------------
 */
#ifndef DEDUP_CLEANUP_STATS_H
#define DEDUP_CLEANUP_STATS_H

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

extern const char *const dedup_cleanup_stats_kind_names[DEDUP_NUM_KINDS];

/* the figures, in shared memory when the library is preloaded */
extern void dedup_cleanup_stats_shmem_request(void);
extern void dedup_cleanup_stats_shmem_startup(void);
extern void dedup_cleanup_stats_begin_batch(bool pass_start);
extern void dedup_cleanup_stats_end_batch(bool pass_end, const int64 deleted[DEDUP_NUM_KINDS]);
extern void dedup_cleanup_stats_note_skipped(void);

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

extern DedupDatabaseState dedup_cleanup_stats_swap_state(Oid dboid, DedupDatabaseState state);
extern bool dedup_cleanup_stats_begin_pass(Oid dboid);

#endif							/* DEDUP_CLEANUP_STATS_H */
