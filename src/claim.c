/*-------------------------------------------------------------------------
 *
 * claim.c
 *	  The transactional claim: dedup_claim() and dedup_claim_batch() write
 *	  a row of dedup.claims in the caller's transaction, so that the claim
 *	  commits or rolls back with the caller's business writes.  The rows and
 *	  the concurrency protocol are store.c's; this file holds the claim's
 *	  semantics and its SQL functions.
 *
 * Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type_d.h"
#include "funcapi.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"

#include "catalog.h"
#include "checks.h"
#include "fingerprint.h"
#include "routing.h"
#include "scope.h"
#include "scope_counters.h"
#include "store.h"

/* ---------------------------------------------------------------------
 * Arguments
 * ---------------------------------------------------------------------
 */

/* The ttl argument, else the scope's. */
static Interval *
claim_ttl(FunctionCallInfo fcinfo, int argno, DedupScopeSettings *settings)
{
	Interval   *ttl = dedup_check_interval_arg(fcinfo, argno, "ttl");

	return ttl ? ttl : &settings->value[DEDUP_SCOPE_TTL];
}

/*
 * dedup_claim(scope text, key <text|bytea|uuid|dedup_fingerprint|bigint>,
 *			   ttl interval DEFAULT NULL, nowait boolean DEFAULT false)
 */
static Datum
claim_single(FunctionCallInfo fcinfo, int16 typlen)
{
	DedupScopeSettings settings;
	text	   *scope;
	Datum		route_result;
	bool		nowait;
	Interval   *ttl;
	DedupFingerprint fp;
	KeyStore	ks;
	bool		claimed;

	if (dedup_routing_route(fcinfo, DEDUP_REL_CLAIMS, DEDUP_ROUTE_KEY, typlen, &route_result))
		return route_result;
	scope = dedup_scope_of_call(fcinfo, "scope", "dedup_claim", DEDUP_PRIV_USAGE, &settings);

	dedup_fingerprint_key_arg(fcinfo, 1, scope, typlen, &fp);
	nowait = dedup_check_bool_arg(fcinfo, 3, "nowait");
	ttl = claim_ttl(fcinfo, 2, &settings);

	key_store_open(&ks, DEDUP_REL_CLAIMS, scope, &fp, true);
	key_store_use_history(&ks, &settings);
	claimed = key_store_claim(&ks, &fp, dedup_check_timestamp_plus(ks.now, ttl), nowait);
	key_store_close(&ks);
	dedup_scope_counters_count(settings.counters, claimed ? DEDUP_COUNT_CLAIMS : DEDUP_COUNT_DUPLICATES, 1);
	PG_RETURN_BOOL(claimed);
}

PG_FUNCTION_INFO_V1(dedup_claim_varlena);
Datum
dedup_claim_varlena(PG_FUNCTION_ARGS)
{
	return claim_single(fcinfo, -1);
}

PG_FUNCTION_INFO_V1(dedup_claim_fixed);
Datum
dedup_claim_fixed(PG_FUNCTION_ARGS)
{
	return claim_single(fcinfo, DEDUP_FINGERPRINT_LEN);
}

PG_FUNCTION_INFO_V1(dedup_claim_int8);
Datum
dedup_claim_int8(PG_FUNCTION_ARGS)
{
	return claim_single(fcinfo, sizeof(int64));
}

/* ---------------------------------------------------------------------
 * dedup_claim_batch(scope text, keys <type>[], ttl interval DEFAULT NULL,
 *					 nowait boolean DEFAULT false) RETURNS SETOF <type>
 *
 * Returns the keys that were new, in the order given; a key given twice
 * is new at most once.  Keys are claimed in fingerprint order, so that two
 * batches sharing keys never deadlock.
 * ---------------------------------------------------------------------
 */
typedef struct BatchEntry
{
	DedupFingerprint fp;
	int			pos;			/* position in the input array */
} BatchEntry;

static int
claim_fingerprint_cmp(const void *a, const void *b)
{
	return dedup_fingerprint_compare((const DedupFingerprint *) a, (const DedupFingerprint *) b);
}

static int
claim_batch_entry_cmp(const void *a, const void *b)
{
	const BatchEntry *ea = (const BatchEntry *) a;
	const BatchEntry *eb = (const BatchEntry *) b;
	int			c = dedup_fingerprint_compare(&ea->fp, &eb->fp);

	if (c != 0)
		return c;
	return (ea->pos > eb->pos) - (ea->pos < eb->pos);
}

/*
 * Claim keys, in fingerprint order, in one store (the buckets of
 * dedup.claims, or one shard of it on a Citus cluster); counts them.
 */
static void
claim_keys(const text *scope, DedupScopeSettings *settings, const DedupFingerprint *fps,
		   int nkeys, TimestampTz expires_at, bool nowait, bool *claimed_key)
{
	KeyStore	ks;
	int64		nnew = 0;

	key_store_open(&ks, DEDUP_REL_CLAIMS, scope, dedup_catalog_relation_hashed(DEDUP_REL_CLAIMS) ? &fps[0] : NULL,
				   true);
	key_store_use_history(&ks, settings);
	key_store_claim_batch(&ks, fps, nkeys, expires_at, nowait, claimed_key);
	key_store_close(&ks);
	for (int k = 0; k < nkeys; k++)
		nnew += claimed_key[k];
	dedup_scope_counters_count(settings->counters, DEDUP_COUNT_CLAIMS, nnew);
	dedup_scope_counters_count(settings->counters, DEDUP_COUNT_DUPLICATES, nkeys - nnew);
}

/* A batch's state, for the runs of its keys on a Citus cluster */
typedef struct ClaimBatch
{
	const text *scope;
	DedupScopeSettings *settings;
	const DedupFingerprint *fps;	/* its keys, in fingerprint order */
	int			nkeys;
	TimestampTz expires_at;
	bool		nowait;
	bool	   *claimed_key;	/* by key */
	Oid			elemtype;		/* of the keys given */
	int16		typlen;
	DedupFingerprint *run_fps;	/* room for a run */
	bool	   *run_claimed;
} ClaimBatch;

/* The keys of one shard of this node: claimed here. */
static void
claim_batch_local(const int *run, int n, void *arg)
{
	ClaimBatch *b = (ClaimBatch *) arg;

	for (int i = 0; i < n; i++)
		b->run_fps[i] = b->fps[run[i]];
	claim_keys(b->scope, b->settings, b->run_fps, n, b->expires_at, b->nowait, b->run_claimed);
	for (int i = 0; i < n; i++)
		b->claimed_key[run[i]] = b->run_claimed[i];
}

/* A key another node claimed, as text: found again by its fingerprint. */
static void
claim_batch_remote_row(const char *key, void *arg)
{
	ClaimBatch *b = (ClaimBatch *) arg;
	Oid			input;
	Oid			ioparam;
	DedupFingerprint fp;
	const DedupFingerprint *found;

	getTypeInputInfo(b->elemtype, &input, &ioparam);
	dedup_fingerprint_key_datum(OidInputFunctionCall(input, (char *) key, ioparam, -1), b->typlen, b->scope, &fp);
	found = bsearch(&fp, b->fps, b->nkeys, sizeof(DedupFingerprint), claim_fingerprint_cmp);
	if (found == NULL)
		elog(ERROR, "a batch sent to another node claimed a key it was not given");
	b->claimed_key[found - b->fps] = true;
}

PG_FUNCTION_INFO_V1(dedup_claim_batch);
Datum
dedup_claim_batch(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	DedupScopeSettings settings;
	text	   *scope = dedup_scope_of_call(fcinfo, "scope", "dedup_claim_batch", DEDUP_PRIV_USAGE,
											&settings);
	ArrayType  *keys;
	Oid			elemtype;
	int16		typlen;
	bool		typbyval;
	char		typalign;
	Datum	   *elems;
	bool	   *elemnulls;
	int			nelems;
	BatchEntry *entries;
	DedupFingerprint *fps;
	int		   *keypos;			/* the position of each fingerprint's key
								 * given */
	int			nkeys;
	bool	   *claimed_key;
	bool	   *claimed;
	bool		nowait;
	Interval   *ttl;
	TimestampTz expires_at;

	if (PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("keys must not be null")));
	keys = PG_GETARG_ARRAYTYPE_P(1);
	if (ARR_NDIM(keys) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("keys must be a one-dimensional array")));
	elemtype = ARR_ELEMTYPE(keys);
	get_typlenbyvalalign(elemtype, &typlen, &typbyval, &typalign);
	deconstruct_array(keys, elemtype, typlen, typbyval, typalign,
					  &elems, &elemnulls, &nelems);
	if (nelems > DEDUP_MAX_BATCH_KEYS)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("too many keys in one batch"),
				 errdetail("The batch has %d keys; the limit is %d.",
						   nelems, DEDUP_MAX_BATCH_KEYS),
				 errhint("Claim the keys in several batches.")));
	nowait = dedup_check_bool_arg(fcinfo, 3, "nowait");
	ttl = claim_ttl(fcinfo, 2, &settings);

	/* check and fingerprint every key before writing anything */
	entries = palloc(sizeof(BatchEntry) * Max(nelems, 1));
	for (int i = 0; i < nelems; i++)
	{
		if (elemnulls[i])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("keys must not contain null"),
					 errdetail("Element %d is null.", i + 1)));
		if (typlen == -1)
			elems[i] = PointerGetDatum(PG_DETOAST_DATUM_PACKED(elems[i]));
		dedup_fingerprint_key_datum(elems[i], typlen, scope, &entries[i].fp);
		entries[i].pos = i;
	}
	qsort(entries, nelems, sizeof(BatchEntry), claim_batch_entry_cmp);

	/*
	 * each key once, in fingerprint order: a key given twice is new at most
	 * once
	 */
	fps = palloc(sizeof(DedupFingerprint) * Max(nelems, 1));
	keypos = palloc(sizeof(int) * Max(nelems, 1));
	nkeys = 0;
	for (int i = 0; i < nelems; i++)
	{
		if (i > 0 && dedup_fingerprint_compare(&entries[i].fp, &entries[i - 1].fp) == 0)
			continue;
		keypos[nkeys] = entries[i].pos;
		fps[nkeys++] = entries[i].fp;
	}
	claimed_key = palloc(sizeof(bool) * Max(nkeys, 1));
	expires_at = dedup_check_timestamp_plus(GetCurrentTimestamp(), ttl);
	if (dedup_catalog_relation_hashed(DEDUP_REL_CLAIMS))
	{
		ClaimBatch	b = {scope, &settings, fps, nkeys, expires_at, nowait, claimed_key,
			elemtype, typlen, palloc(sizeof(DedupFingerprint) * Max(nkeys, 1)),
		palloc0(sizeof(bool) * Max(nkeys, 1))};

		memset(claimed_key, 0, sizeof(bool) * Max(nkeys, 1));
		dedup_routing_batch(fcinfo, DEDUP_REL_CLAIMS, fps, keypos, nkeys,
							claim_batch_local, claim_batch_remote_row, &b);
	}
	else if (nkeys > 0)
		claim_keys(scope, &settings, fps, nkeys, expires_at, nowait, claimed_key);

	claimed = palloc0(sizeof(bool) * Max(nelems, 1));
	for (int i = 0, k = -1; i < nelems; i++)
	{
		if (i == 0 || dedup_fingerprint_compare(&entries[i].fp, &entries[i - 1].fp) != 0)
			claimed[entries[i].pos] = claimed_key[++k];
	}

	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
	for (int i = 0; i < nelems; i++)
	{
		bool		isnull = false;

		if (claimed[i])
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc,
								 &elems[i], &isnull);
	}
	return (Datum) 0;
}
