/*-------------------------------------------------------------------------
 *
 * fingerprint.h
 *	  The fingerprint type of dedup, and the one routine that fingerprints
 *	  anything (fingerprint.c).
 *
 * Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.
 *-------------------------------------------------------------------------
 */
#ifndef DEDUP_FINGERPRINT_H
#define DEDUP_FINGERPRINT_H

#include "fmgr.h"
#include "port/pg_bswap.h"
#include "utils/array.h"
#include "utils/jsonb.h"

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

/* the one place that fingerprints anything */
extern void dedup_fingerprint_key_datum(Datum key, int16 typlen, const text *scope,
										DedupFingerprint *result);
extern void dedup_fingerprint_stream_key(const text *scope, const text *stream,
										 DedupFingerprint *result);
extern void dedup_fingerprint_key_arg(FunctionCallInfo fcinfo, int argno, const text *scope,
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

/* the hash of the type's hash operator class, by which Citus distributes */
extern Datum dedup_fingerprint_hash(PG_FUNCTION_ARGS);

#endif							/* DEDUP_FINGERPRINT_H */
