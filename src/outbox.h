/*-------------------------------------------------------------------------
 *
 * outbox.h
 *	  What the outbox's put and relay share (outbox.c): its partitions and
 *	  their numbers, batch ids, the producers' topic and aggregate locks,
 *	  the relay lock, the settled sequence a take reads up to, the check
 *	  that kept plans still name the fingerprint type of this database,
 *	  and the wake-ups of the relays: those that listen (NOTIFY dedup_outbox)
 *	  and the takes that wait (a condition variable in shared memory).
 *
 * Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.
 *-------------------------------------------------------------------------
 */
#ifndef DEDUP_OUTBOX_H
#define DEDUP_OUTBOX_H

#include "storage/lock.h"
#include "utils/uuid.h"

#include "fingerprint.h"

/* The channel relays LISTEN on. */
#define OUTBOX_CHANNEL "dedup_outbox"

/* A batch's id: partition number and a counter's (outbox_batch_new_id) */
#define OUTBOX_BATCH_PART_SHIFT 47
/* The counter's last value (dedup.outbox_batch_ids' MAXVALUE): 2^47 - 1 */
#define OUTBOX_BATCH_MAX_COUNTER ((INT64CONST(1) << OUTBOX_BATCH_PART_SHIFT) - 1)

/* The most events one take hands out (dedup_outbox_take_batch's batch_size) */
#define OUTBOX_MAX_BATCH_SIZE 10000

extern uint32 outbox_part_number(const DedupFingerprint *part);
extern bool outbox_distributed(void);
extern void outbox_partition(const text *topic, text *aggregate_id, DedupFingerprint *part);
extern int64 outbox_batch_new_id(const DedupFingerprint *part);
extern int64 outbox_batch_new_id_above(const DedupFingerprint *part, int64 above);
extern bool outbox_batch_part(int64 batch_id, DedupFingerprint *part);
extern bool outbox_batch_decode(int64 batch_id, uint32 *number, int64 *counter);
extern void outbox_batch_check_current(const DedupFingerprint *part, int64 batch_id, int32 rev);
extern int32 outbox_scan_limit(int32 batch_size, int32 room);
extern int64 outbox_next_position(int64 pos, int64 stable, int64 scanned, int64 kept,
								  int32 scan_limit, int64 last);
extern void outbox_topic_locktag(LOCKTAG *tag, const text *topic);
extern bool outbox_lock_relay(const DedupFingerprint *part, const text *topic, bool dont_wait);
extern bool outbox_relay_lock_held(const DedupFingerprint *part, const text *topic);
extern void outbox_unlock_relay(const DedupFingerprint *part, const text *topic);
extern void outbox_check_isolation(void);
extern int64 outbox_stable_seq(const DedupFingerprint *part, text *topic);
extern void outbox_wait_puts(const text *topic);
extern void outbox_event_locktag(LOCKTAG *tag, const pg_uuid_t *id);
extern bool outbox_partition_last_seq(const DedupFingerprint *part, text *topic, int64 *last);
extern bool outbox_plans_stale(Oid *made_with);
extern void outbox_listeners_shmem_request(void);
extern void outbox_listeners_shmem_startup(void);
extern void outbox_note_listen(const char *channel);
extern void outbox_wake(const text *topic);
extern bool outbox_wait_begin(const text *topic);
extern bool outbox_wait_changed(void);
extern void outbox_wait_sleep(long timeout_ms);
extern void outbox_wait_end(void);
extern void outbox_aggregates_shmem_request(void);
extern void outbox_aggregates_shmem_startup(void);
extern void outbox_lock_aggregate(const text *topic, const DedupFingerprint *aggregate);

#endif							/* DEDUP_OUTBOX_H */
