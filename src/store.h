/*-------------------------------------------------------------------------
 *
 * store.h
 *	  The rows of the key tables, as claims (claim.c), idempotency records
 *	  (record.c), outbox keys (outbox_put.c) and stream marks (stream.c) read
 *	  and write them: one expiry rule, one concurrency protocol (store.c).
 *
 * Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.
 *-------------------------------------------------------------------------
 */
#ifndef DEDUP_STORE_H
#define DEDUP_STORE_H

#include "access/genam.h"
#include "access/relscan.h"
#include "executor/tuptable.h"
#include "nodes/execnodes.h"
#include "miscadmin.h"
#include "storage/lock.h"
#include "utils/jsonb.h"
#include "utils/rel.h"
#include "utils/snapshot.h"

#include "bucket.h"
#include "catalog.h"
#include "scope.h"

/* Status of an idempotency record */
#define RECORD_PROCESSING	'p'
#define RECORD_COMPLETE		'c'
#define RECORD_RELEASED		'r' /* a tombstone: counts as absent */

/*
 * The record part of a row (column "record" of type dedup.record_state).
 * A plain claim has none: it is a record that completed with its
 * transaction and stored no response.
 */
typedef struct DedupRecord
{
	char		status;			/* RECORD_PROCESSING, _COMPLETE or _RELEASED */
	int32		attempts;
	TimestampTz lease_until;
	bool		has_request;
	DedupFingerprint request;	/* fingerprint of the request, if given */
	bool		has_response_code;
	int32		response_code;
	Jsonb	   *response;		/* NULL when none */
	TimestampTz first_seen;
	bool		has_completed_at;
	TimestampTz completed_at;

	/*
	 * The key was taken over from a holder whose lease had passed (kept
	 * through a release until the record would have expired, never past an
	 * expiry): a caller that gives no attempt may be that holder.  Read whole
	 * records only; a record written before 1.1 (none stored) counts as taken
	 * over once past attempt 1.
	 */
	bool		taken_over;

	/*
	 * How long the record stays once its lease ends or it completes, given to
	 * dedup_begin() (else the scope's ttl applies).  Records written before
	 * 1.1 have none.
	 */
	bool		has_ttl;
	Interval	ttl;
} DedupRecord;

/* What a look-up found. */
typedef enum KeyState
{
	KEY_ABSENT,					/* no row */
	KEY_BUSY,					/* a transaction in progress is writing it */
	KEY_LIVE,					/* a row that has not expired */
	KEY_EXPIRED					/* a row that has expired: counts as absent */
} KeyState;

/* What a look-up does about a transaction in progress on the key. */
typedef enum KeyBusyPolicy
{
	KEY_BUSY_WAIT,				/* wait for it to end, then look again */
	KEY_BUSY_ERROR,				/* lock_not_available (55P03) at once */
	KEY_BUSY_RETURN				/* return KEY_BUSY at once */
} KeyBusyPolicy;

/* The stream part of a row of dedup.streams (stream.c). */
typedef struct DedupStreamRow
{
	bool		has_epoch;
	int64		epoch;
	bool		has_mark;		/* false after a new epoch, before its first
								 * advance */
	int64		mark;
} DedupStreamRow;

/* A key's row as found; the key lock is held unless the state is KEY_BUSY. */
typedef struct KeyRow
{
	KeyState	state;
	LOCKTAG		tag;
	int			part;			/* the part of the store it was found in */
	ItemPointerData tid;
	TimestampTz expires_at;
	bool		has_record;
	DedupRecord record;
	DedupStreamRow stream;		/* rows of dedup.streams */
} KeyRow;

/*
 * One relation of a key table with its primary key: dedup.claims has one
 * a time bucket (bucket.c), the other key tables one in all.
 */
typedef struct KeyStorePart
{
	Oid			heap_oid;
	Oid			index_oid;
	int32		number;			/* a bucket's number (bucket.c) */
	bool		opened;			/* a sealed bucket is opened when first needed */
	bool		sealed;			/* a sealed bucket: its filter may be asked */
	TimestampTz closed_at;		/* of a sealed bucket: names its filter */
	bool		written;		/* its write lock is held (a bucket of
								 * dedup.claims) */
	Relation	heap;
	Relation	index;
	IndexScanDesc scan;			/* look-ups with the dirty snapshot */
	IndexInfo  *indexinfo;		/* built when a row is first inserted */
} KeyStorePart;

/* Everything one call needs to read and write keys of one scope. */
typedef struct KeyStore
{
	const text *scope;			/* for messages */
	DedupRelation table;		/* which key table */
	LOCKMODE	lockmode;		/* on every part */
	bool		bucketed;		/* the buckets of dedup.claims (bucket.c) */
	bool		cluster;		/* on a Citus cluster: their shards of
								 * cluster_key */
	DedupFingerprint cluster_key;
	int			nparts;
	KeyStorePart parts[DEDUP_MAX_BUCKETS];	/* newest first */
	int			current;		/* the part new rows go into */
	Relation	heap;			/* parts[current]: every part has its columns */
	RegProcedure eqproc;		/* fingerprint equality, for the scan key */
	TupleTableSlot *slot;
	SnapshotData dirty;			/* sees rows of transactions in progress */
	TupleDesc	record_desc;	/* of dedup.record_state */
	int32		record_head_len;	/* bytes of a record read for its status */
	bool		whole_records;	/* read records whole, response included */
	TimestampTz now;			/* the time of the call: expiry is decided by
								 * it */
	int32		history_id;		/* the scope's history (history.c), or 0 */
	TimestampTz history_from;	/* a claim that expired after it is still seen */
	bool		wrote;			/* a row was written or deleted */
} KeyStore;

extern void key_store_open(KeyStore *ks, DedupRelation table, const text *scope,
						   const DedupFingerprint *key, bool for_write);
extern bool key_store_claim(KeyStore *ks, const DedupFingerprint *fp,
							TimestampTz expires_at, bool nowait);
extern void key_store_claim_batch(KeyStore *ks, const DedupFingerprint *keys, int nkeys,
								  TimestampTz expires_at, bool nowait, bool *claimed);
extern void key_store_close(KeyStore *ks);
extern void key_store_use_history(KeyStore *ks, const DedupScopeSettings *settings);
extern bool key_store_history_seen(KeyStore *ks, const DedupFingerprint *fp,
								   const KeyRow *row);

/*
 * Whether a scope's history may hold a key: the history tier, above the
 * store, answers (module.c installs dedup_history_may_contain).
 */
typedef bool (*KeyStoreHistoryHook) (int32 history_id, const DedupFingerprint *fp);
extern KeyStoreHistoryHook key_store_history_hook;
extern KeyState key_store_find(KeyStore *ks, const DedupFingerprint *fp,
							   KeyBusyPolicy busy, KeyRow *row);
extern void key_store_unlock(KeyRow *row);
extern bool key_store_put(KeyStore *ks, const DedupFingerprint *fp, KeyRow *row,
						  TimestampTz expires_at, const DedupRecord *record,
						  KeyBusyPolicy busy);
extern bool key_store_write(KeyStore *ks, const DedupFingerprint *fp, KeyRow *row,
							HeapTuple tuple, KeyBusyPolicy busy);
extern KeyState key_store_read(KeyStore *ks, const DedupFingerprint *fp, KeyRow *row);
extern void key_store_stream_of(TupleTableSlot *slot, DedupStreamRow *stream);

#endif							/* DEDUP_STORE_H */
