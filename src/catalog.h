/*-------------------------------------------------------------------------
 *
 * catalog.h
 *	  The extension's own relations (catalog.c): their look-up by name, as
 *	  tables of this node or as Citus keeps them (citus.h reads Citus's
 *	  metadata); the column numbers of the key tables; and the lock tag
 *	  classes of dedup's own locks.
 *
 * Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.
 *-------------------------------------------------------------------------
 */
#ifndef DEDUP_CATALOG_H
#define DEDUP_CATALOG_H

#include "miscadmin.h"
#include "storage/lock.h"
#include "storage/lockdefs.h"
#include "utils/inval.h"
#include "utils/relcache.h"
#include "utils/snapshot.h"

#include "fingerprint.h"

/* The schema that holds the extension's tables; fixed, not relocatable. */
#define DEDUP_INTERNAL_SCHEMA	"dedup"

/* The extension's own relations, in schema dedup */
typedef enum DedupRelation
{
	DEDUP_REL_CLAIMS,
	DEDUP_REL_CLAIMS_PKEY,
	DEDUP_REL_SCOPES,
	DEDUP_REL_SCOPES_PKEY,
	DEDUP_REL_OUTBOX_KEYS,
	DEDUP_REL_OUTBOX_KEYS_PKEY,
	DEDUP_REL_OUTBOX,
	DEDUP_REL_GRANTS,
	DEDUP_REL_STREAMS,			/* a key table: its primary key follows it */
	DEDUP_REL_STREAMS_PKEY,
	DEDUP_REL_BUCKETS,
	DEDUP_REL_OUTBOX_TOPICS,
	DEDUP_REL_OUTBOX_PKEY,
	DEDUP_REL_OUTBOX_SEQ,		/* the identity sequence of dedup.outbox.seq */
	DEDUP_REL_HISTORY_GENERATIONS,
	DEDUP_REL_HISTORY_BLOCKS,
	DEDUP_REL_HISTORY_BLOCKS_PKEY,
	DEDUP_REL_OUTBOX_RETRY,
	DEDUP_REL_OUTBOX_RETRY_PKEY,
	DEDUP_REL_OUTBOX_DEAD,
	DEDUP_REL_OUTBOX_DEAD_PKEY,
	DEDUP_REL_HISTORY_SPANS,	/* on a Citus cluster: a reference table */
	DEDUP_REL_OUTBOX_BATCH_IDS, /* the counter of batch ids (outbox.c) */
	DEDUP_NUM_RELATIONS
} DedupRelation;

extern Oid	dedup_catalog_relation_lookup(DedupRelation rel);
extern Oid	dedup_catalog_relation_oid(DedupRelation rel);
extern Relation dedup_catalog_relation_open(DedupRelation rel, LOCKMODE lockmode);
extern Oid	dedup_catalog_relation_owner(DedupRelation rel);
extern bool dedup_catalog_relation_hashed(DedupRelation rel);
extern void dedup_catalog_relation_reset(void);
extern void dedup_catalog_relcache_register(RelcacheCallbackFunction func);
extern uint64 dedup_catalog_relation_generation(void);
extern Oid	dedup_catalog_fingerprint_type(void);
extern char *dedup_catalog_fingerprint_eq(void);
extern bool dedup_catalog_is_citus_worker(void);
extern Oid	dedup_catalog_shard_relid(const char *relname, int64 shardid);
extern Snapshot dedup_catalog_cache_snapshot(void);

/*
 * The lock tag classes of dedup's own locks: advisory-class lock tags with
 * a locktag_field4 of ours.  The key lock is a short heavyweight lock on one
 * fingerprint (store.c).  The
 * advisory locks of SQL (pg_advisory_lock) use 1 and 2 there, so they never
 * meet ours.  test/modules/dedup_test holds one to pause a caller.
 */
#define DEDUP_LOCKTAG_KEY		0x6464
/* the outbox's producer locks, one per stripe of aggregates (outbox_put.c) */
#define DEDUP_LOCKTAG_AGGREGATE	0x6465
/* the outbox's topic locks, held by its producers until they commit (outbox.c) */
#define DEDUP_LOCKTAG_TOPIC		0x6466
/* the outbox's event locks: a put's, on its event id, while it looks and inserts (outbox_put.c) */
#define DEDUP_LOCKTAG_EVENT		0x6467
/* the outbox's relay locks: a take's, on its topic, until it ends (outbox.c) */
#define DEDUP_LOCKTAG_RELAY		0x6468
/* (retired: the outbox's slot locks of 1.1's first batches; kept so that no class reuses it) */
#define DEDUP_LOCKTAG_SLOT		0x6469
/* the bucket write locks: a writer's, on a bucket it wrote into, until it ends (bucket.c) */
#define DEDUP_LOCKTAG_BUCKET	0x646A

/* The lock of class locktag_class named by the first 8 bytes of a fingerprint (or uuid) */
static inline void
dedup_bytes_locktag(LOCKTAG *tag, const uint8 *bytes, uint16 locktag_class)
{
	uint32		hi;
	uint32		lo;

	memcpy(&hi, bytes, sizeof(hi));
	memcpy(&lo, bytes + sizeof(hi), sizeof(lo));
	SET_LOCKTAG_ADVISORY(*tag, MyDatabaseId, hi, lo, locktag_class);
}

static inline void
dedup_key_locktag(LOCKTAG *tag, const DedupFingerprint *fp)
{
	dedup_bytes_locktag(tag, fp->bytes, DEDUP_LOCKTAG_KEY);
}

/*
 * The key tables: a key fingerprint first (the primary key), then the time
 * the row expires (the cleanup deletes by it), then what the table keeps.
 * dedup.claims and dedup.outbox_keys: (key, expires_at, record);
 * dedup.streams: (key, expires_at, epoch, mark, scope, stream).
 */
#define Anum_key_key			1
#define Anum_key_expires_at		2
#define Anum_claims_record		3
#define Anum_claims_history		4	/* dedup.claims only, added in 1.1 */
#define Natts_claims			4
#define Anum_streams_epoch		3
#define Anum_streams_mark		4
#define Anum_streams_scope		5
#define Anum_streams_stream		6
#define Natts_streams			6

#endif							/* DEDUP_CATALOG_H */
