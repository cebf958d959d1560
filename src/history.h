/*-------------------------------------------------------------------------
 *
 * history.h
 *	  The history tier of a scope (history.c): what its expired claims
 *	  leave behind, as blocked Bloom filters, and the bit routines it
 *	  shares with the filters of sealed buckets (filter.c).
 *
 * Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.
 *-------------------------------------------------------------------------
 */
#ifndef DEDUP_HISTORY_H
#define DEDUP_HISTORY_H

#include "dedup.h"

/*
 * filter.c: a key's block and bits, by one routine for every filter.  A
 * block is 2^width bits: 512 (64 bytes, one cache line) in the buckets'
 * filters, 1024 (128 bytes, two adjacent lines) in the histories'.
 */
#define DEDUP_FILTER_BUCKET_WIDTH	9
#define DEDUP_FILTER_HISTORY_WIDTH	10
#define DEDUP_FILTER_BLOCK_BYTES(width)	((1 << (width)) / 8)
#define DEDUP_FILTER_MAX_K			13
extern uint32 dedup_filter_block_of(const DedupFingerprint *fp, uint32 nblocks);
extern void dedup_filter_set(uint8 *block, const DedupFingerprint *fp, int k, int width);
extern bool dedup_filter_test(const uint8 *block, const DedupFingerprint *fp, int k, int width);

/* filter.c: generations read into shared memory */
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

/* history.c */
extern bool dedup_history_generation_is(int64 generation, TimestampTz opened_at,
										int64 version);
extern bool dedup_history_may_contain(int32 history_id, const DedupFingerprint *fp);
extern int64 dedup_history_fold(Oid bucket_relid);
extern int64 dedup_history_expire(void);

#endif							/* DEDUP_HISTORY_H */
