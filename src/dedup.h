/*-------------------------------------------------------------------------
 *
 * dedup.h
 *	  Declarations shared by the dedup extension's C files: the fingerprint
 *	  type, the settings (GUCs), the extension's catalog lookups and the
 *	  argument checks every public function applies.
 *
 * Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.
 *-------------------------------------------------------------------------
 */
#ifndef DEDUP_H
#define DEDUP_H

#include "postgres.h"

#include "fmgr.h"
#include "storage/lockdefs.h"
#include "utils/relcache.h"
#include "port/pg_bswap.h"
#include "utils/array.h"
#include "utils/jsonb.h"
#include "utils/timestamp.h"

/* A key's stored form: the first 128 bits of a SHA-256 digest. */
#define DEDUP_FINGERPRINT_LEN 16

typedef struct DedupFingerprint
{
	uint8		bytes[DEDUP_FINGERPRINT_LEN];
} DedupFingerprint;

#define DatumGetDedupFingerprintP(X)	((DedupFingerprint *) DatumGetPointer(X))
#define DedupFingerprintPGetDatum(X)	PointerGetDatum(X)
#define PG_GETARG_DEDUP_FINGERPRINT_P(n) DatumGetDedupFingerprintP(PG_GETARG_DATUM(n))
#define PG_RETURN_DEDUP_FINGERPRINT_P(x) return DedupFingerprintPGetDatum(x)

/* Limits on what callers may pass (documented in the README). */
#define DEDUP_MAX_SCOPE_BYTES	200
#define DEDUP_MAX_BATCH_KEYS	100000
#define DEDUP_MAX_CLEANUP_BATCH	1000000

/* The schema that holds the extension's tables; fixed, not relocatable. */
#define DEDUP_INTERNAL_SCHEMA	"dedup"

/* GUCs (dedup.c) */
extern int	dedup_default_ttl;		/* seconds */
extern int	dedup_default_lease;	/* seconds */
extern int	dedup_default_retention;	/* seconds */
extern int	dedup_cleanup_batch_size;	/* rows */
extern int	dedup_cleanup_pause;	/* milliseconds */
extern char *dedup_cleanup_databases;
extern char *dedup_cleanup_role;
extern int	dedup_cleanup_interval;	/* seconds */
extern bool dedup_cleanup_enabled;
extern int	dedup_outbox_max_attempts;
extern int	dedup_bucket_interval;	/* seconds */

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
	DEDUP_NUM_RELATIONS
} DedupRelation;

/* dedup.c: catalog lookups and argument checks */
extern Oid	dedup_relation_lookup(DedupRelation rel);
extern Oid	dedup_relation_oid(DedupRelation rel);
extern Oid	dedup_fingerprint_type(void);
extern Oid	dedup_relation_owner(DedupRelation rel);
extern char *dedup_fingerprint_eq_sql(void);

/* outbox.c */
#define DEDUP_OUTBOX_MAX_PARTITION 65535	/* a batch's id has room for no more */
extern void dedup_outbox_part(uint32 n, DedupFingerprint *part);
extern bool dedup_relation_hashed(DedupRelation rel);
extern bool dedup_node_is_citus_worker(void);
extern Relation dedup_relation_open(DedupRelation rel, LOCKMODE lockmode);
extern void dedup_check_writable(const char *funcname);
extern void dedup_check_scope_name(const text *scope, const char *what);
extern text *dedup_scope_arg(FunctionCallInfo fcinfo, int argno,
							  const char *what);
extern bool dedup_bool_arg(FunctionCallInfo fcinfo, int argno, const char *what);
extern Interval *dedup_interval_arg(FunctionCallInfo fcinfo, int argno,
									const char *what);
extern void dedup_check_interval(const Interval *value, const char *what,
								 bool allow_zero, TimestampTz from);
extern TimestampTz dedup_timestamp_plus(TimestampTz t, const Interval *span);

/* fingerprint.c: the one place that fingerprints anything */
extern void dedup_key_datum(Datum key, int16 typlen, const text *scope,
							DedupFingerprint *result);
extern void dedup_stream_key(const text *scope, const text *stream,
							 DedupFingerprint *result);
extern void dedup_key_arg(FunctionCallInfo fcinfo, int argno, const text *scope,
						  int16 typlen, DedupFingerprint *result);
extern void dedup_fingerprint_of_jsonb(Jsonb *jb, ArrayType *ignore,
									   DedupFingerprint *result);
extern char *dedup_fingerprint_hex(const DedupFingerprint *fp);

/*
 * Bytewise order of two fingerprints, as two big-endian 64-bit words: the
 * btree calls this for every comparison, so it is inline and calls no memcmp.
 */
static inline int
dedup_fingerprint_compare(const DedupFingerprint *a, const DedupFingerprint *b)
{
	for (int i = 0; i < DEDUP_FINGERPRINT_LEN; i += sizeof(uint64))
	{
		uint64		wa;
		uint64		wb;

		memcpy(&wa, a->bytes + i, sizeof(uint64));
		memcpy(&wb, b->bytes + i, sizeof(uint64));
		if (wa != wb)
			return pg_ntoh64(wa) < pg_ntoh64(wb) ? -1 : 1;
	}
	return 0;
}

/* scope.c: per-scope settings with GUC defaults, in the column order */
typedef enum DedupScopeSetting
{
	DEDUP_SCOPE_TTL,
	DEDUP_SCOPE_LEASE,
	DEDUP_SCOPE_RETENTION,
	DEDUP_SCOPE_NSETTINGS
} DedupScopeSetting;

/* scopestats.c: per-scope call counters in shared memory, by kind */
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

extern void dedup_scopestats_shmem_request(void);
extern void dedup_scopestats_shmem_startup(void);
extern DedupScopeCounters *dedup_scope_counters(const char *scope);
extern void dedup_scope_count(DedupScopeCounters *counters, DedupCounter which, int64 n);

typedef struct DedupScopeSettings
{
	Interval	value[DEDUP_SCOPE_NSETTINGS];	/* by DedupScopeSetting */
	int32		max_attempts;
	bool		strict;			/* sequence_mode: strict, not monotonic */
	bool		configured;		/* dedup.scopes has a row for the scope */
	int32		history_id;		/* of the scope's history; 0 when it has none */
	Interval	history;		/* the history's window */
	double		false_positive_rate;	/* the history's */
	DedupScopeCounters *counters;	/* the scope's call counters, or NULL */
} DedupScopeSettings;

/* scope.c: privileges on a scope (dedup.grants), as bits */
#define DEDUP_PRIV_USAGE	0x01	/* claims, records, outbox puts, settings */
#define DEDUP_PRIV_RELAY	0x02	/* taking, acking, nacking outbox events */

extern void dedup_scope_use(const text *scope, int privileges,
							DedupScopeSettings *settings);
extern bool dedup_scope_allows(const text *scope, Oid roleid, int privileges,
							   DedupScopeSettings *settings);
extern text *dedup_scope_of_call(FunctionCallInfo fcinfo, const char *what,
								 const char *funcname, int privileges,
								 DedupScopeSettings *settings);

#endif							/* DEDUP_H */
