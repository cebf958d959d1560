/*-------------------------------------------------------------------------
 *
 * bucket.h
 *	  Which relations hold the claims: the time buckets of dedup.claims
 *	  (bucket.c), as store.c reads and writes them and the cleanup opens,
 *	  closes and drops them.
 *
 * Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.
 *-------------------------------------------------------------------------
 */
#ifndef DEDUP_BUCKET_H
#define DEDUP_BUCKET_H

#include "cleanup.h"
#include "dedup.h"
#include "storage/lockdefs.h"
#include "utils/relcache.h"

/* Most buckets a database keeps at once; the cleanup opens no more. */
#define DEDUP_MAX_BUCKETS	64

/* A bucket a call reads, and writes if it is the current one. */
typedef struct DedupBucket
{
	int32		number;
	Oid			heap;
	Oid			index;			/* its primary key, on the fingerprint */
	bool		current;		/* the bucket new rows go into */
	bool		sealed;			/* gets no new row: its filter may be used */
	TimestampTz closed_at;		/* names its filter, with heap (filter.c) */
} DedupBucket;

/* The buckets a call reads, newest first; one of them is current. */
typedef struct DedupBucketList
{
	int			nbuckets;
	DedupBucket buckets[DEDUP_MAX_BUCKETS];
} DedupBucketList;

extern const DedupBucketList *dedup_bucket_list(uint64 *generation);
extern bool dedup_bucket_list_changed(uint64 generation);
extern bool dedup_bucket_lock(Oid relid, LOCKMODE lockmode);
extern void dedup_bucket_lock_written(Oid relid);

/* The cleanup's work on buckets: steps of its first stage (cleanup.c). */
#define DEDUP_BUCKET_NSTEPS	5
extern bool dedup_bucket_storage(void);
extern Relation dedup_bucket_open_current(LOCKMODE lockmode);
extern int64 dedup_bucket_step(int step, int64 removed[DEDUP_NUM_KINDS]);

/* filter.c: filters of the sealed buckets, in shared memory */
extern int	dedup_bucket_filter_memory;	/* MB */
extern void dedup_filter_shmem_request(void);
extern void dedup_filter_shmem_startup(void);
extern void dedup_filter_register_hooks(void);
extern void dedup_filter_prefetch(Oid relid, TimestampTz closed_at, const DedupFingerprint *fp);
extern bool dedup_filter_may_contain(Oid relid, TimestampTz closed_at,
									 const DedupFingerprint *fp);
extern bool dedup_filter_enabled(void);
extern bool dedup_filter_exists(Oid relid, TimestampTz closed_at);
extern bool dedup_filter_build(Oid relid, TimestampTz closed_at, int64 nkeys);
extern void dedup_filter_free(Oid relid);

#endif							/* DEDUP_BUCKET_H */
