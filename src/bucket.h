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

#include "storage/lockdefs.h"
#include "utils/relcache.h"
#include "utils/timestamp.h"

#include "cleanup_stats.h"
#include "compat.h"

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
pg_noreturn extern void dedup_bucket_no_current(void);

/*
 * The ttls and expiries written into the current bucket, noted in shared
 * memory (when preloaded) for the interval that follows them
 * (dedup.bucket_interval = 0) and for the cleanup, which does not read the
 * bucket before a row in it may have expired.
 */
extern void dedup_bucket_shmem_request(void);
extern void dedup_bucket_shmem_startup(void);
extern void dedup_bucket_note_written(int32 number, TimestampTz now, TimestampTz expires_at);
extern int64 dedup_bucket_interval_usecs(int32 number);
extern int64 dedup_bucket_max_bytes(void);
extern bool dedup_bucket_skip_current(void);

/*
 * The cleanup's work on buckets: steps of its first stage (cleanup.c).  The
 * retire step calls fold(bucket) on each bucket before it retires it, in
 * the same transaction, and expire() after: the cleanup passes the history
 * tier's (history.c), which is above this file.
 */
#define DEDUP_BUCKET_NSTEPS	5
typedef int64 (*DedupBucketFold) (Oid bucket_relid);
typedef int64 (*DedupBucketExpire) (void);
extern bool dedup_bucket_storage(void);
extern Relation dedup_bucket_open_current(LOCKMODE lockmode);
extern int64 dedup_bucket_step(int step, int64 removed[DEDUP_NUM_KINDS],
							   DedupBucketFold fold, DedupBucketExpire expire);

#endif							/* DEDUP_BUCKET_H */
