/*-------------------------------------------------------------------------
 *
 * filter.h
 *	  Filters in shared memory (filter.c): of the sealed buckets of
 *	  dedup.claims, and of the generations of the scopes' histories, with
 *	  the one routine that sets and tests a key's bits in any filter.
 *
 * Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.
 *-------------------------------------------------------------------------
 */
#ifndef DEDUP_FILTER_H
#define DEDUP_FILTER_H

#include "utils/timestamp.h"

#include "fingerprint.h"

/*
 * A key's block and bits, by one routine for every filter.  A block is
 * 2^width bits: 512 (64 bytes, one cache line) in the buckets' filters,
 * 1024 (128 bytes, two adjacent lines) in the histories'.
 */
#define DEDUP_FILTER_BUCKET_WIDTH	9
#define DEDUP_FILTER_HISTORY_WIDTH	10
#define DEDUP_FILTER_BLOCK_BYTES(width)	((1 << (width)) / 8)
#define DEDUP_FILTER_MAX_K			13
extern uint32 dedup_filter_block_of(const DedupFingerprint *fp, uint32 nblocks);
extern void dedup_filter_set(uint8 *block, const DedupFingerprint *fp, int k, int width);
extern bool dedup_filter_test(const uint8 *block, const DedupFingerprint *fp, int k, int width);

/* shared memory, when the library is preloaded */
extern void dedup_filter_shmem_request(void);
extern void dedup_filter_shmem_startup(void);
extern void dedup_filter_free_database(void);

/* filters of the sealed buckets */
extern void dedup_filter_prefetch(Oid relid, TimestampTz closed_at, const DedupFingerprint *fp);
extern bool dedup_filter_may_contain(Oid relid, TimestampTz closed_at,
									 const DedupFingerprint *fp);
extern bool dedup_filter_enabled(void);
extern bool dedup_filter_exists(Oid relid, TimestampTz closed_at);
extern bool dedup_filter_build(Oid relid, TimestampTz closed_at, int64 nkeys);
extern void dedup_filter_free(Oid relid);

/* generations of the histories (history.c), read into shared memory */
#define DEDUP_FILTER_UNKNOWN	(-1)	/* not in memory */
#define DEDUP_FILTER_ABSENT		0
#define DEDUP_FILTER_MAYBE		1
extern int	dedup_filter_history_test(int64 generation, TimestampTz opened_at,
									  int64 version, const DedupFingerprint *fp);
extern bool dedup_filter_history_load(int64 generation, TimestampTz opened_at,
									  int64 version, uint32 nblocks, int k,
									  void (*fill) (uint8 *bits, void *arg),
									  void *arg, bool *no_room);
extern void dedup_filter_history_free(int64 generation);

/*
 * Whether a generation of a history, as a slot names it, is still the one
 * in its table: the history tier, above, answers (module.c installs
 * dedup_history_generation_is), so that a slot whose generation is gone
 * can be freed.
 */
typedef bool (*DedupFilterHistoryHook) (int64 generation, TimestampTz opened_at,
										int64 version);
extern DedupFilterHistoryHook dedup_filter_history_hook;

#endif							/* DEDUP_FILTER_H */
