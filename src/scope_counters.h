/*-------------------------------------------------------------------------
 *
 * scope_counters.h
 *	  Per-scope call counters in shared memory, by kind (scope_counters.c).
 *
 * Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.
 *-------------------------------------------------------------------------
 */
#ifndef DEDUP_SCOPE_COUNTERS_H
#define DEDUP_SCOPE_COUNTERS_H

/* the kinds of calls counted */
typedef enum DedupCounter
{
	DEDUP_COUNT_CLAIMS,			/* claims answered true (new) */
	DEDUP_COUNT_DUPLICATES,		/* claims answered false */
	DEDUP_COUNT_RECORDS_STARTED,	/* dedup_begin: started */
	DEDUP_COUNT_RECORDS_REPLAYED,	/* dedup_begin: replay */
	DEDUP_COUNT_RECORDS_COMPLETED,
	DEDUP_COUNT_RECORDS_RELEASED,
	DEDUP_COUNT_EVENTS_PUT,		/* new outbox events */
	DEDUP_COUNT_EVENTS_TAKEN,	/* events handed out to relays */
	DEDUP_COUNT_EVENTS_ACKED,
	DEDUP_COUNT_EVENTS_NACKED,
	DEDUP_NUM_COUNTERS
} DedupCounter;

typedef struct DedupScopeCounters DedupScopeCounters;

extern void dedup_scope_counters_shmem_request(void);
extern void dedup_scope_counters_shmem_startup(void);
extern DedupScopeCounters *dedup_scope_counters_get(const char *scope);
extern void dedup_scope_counters_count(DedupScopeCounters *counters, DedupCounter which, int64 n);
extern void dedup_scope_counters_forget_database(Oid recreated);

#endif							/* DEDUP_SCOPE_COUNTERS_H */
