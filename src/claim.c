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

#include "store.h"
#include "cluster.h"

/* ---------------------------------------------------------------------
 * Arguments
 * ---------------------------------------------------------------------
 */

/* The ttl argument, else the scope's. */
static Interval *
claim_ttl(FunctionCallInfo fcinfo, int argno, DedupScopeSettings *settings)
{
	Interval   *ttl = dedup_interval_arg(fcinfo, argno, "ttl");

	return ttl ? ttl : &settings->value[DEDUP_SCOPE_TTL];
}

/*
 * dedup_claim(scope text, key <text|bytea|uuid|dedup_fingerprint>,
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

	if (dedup_cluster_route(fcinfo, DEDUP_REL_CLAIMS, DEDUP_ROUTE_KEY, typlen, &route_result))
		return route_result;
	scope = dedup_scope_of_call(fcinfo, "scope", "dedup_claim", DEDUP_PRIV_USAGE, &settings);

	dedup_key_arg(fcinfo, 1, scope, typlen, &fp);
	nowait = dedup_bool_arg(fcinfo, 3, "nowait");
	ttl = claim_ttl(fcinfo, 2, &settings);

	key_store_open(&ks, DEDUP_REL_CLAIMS, scope, &fp, true);
	key_store_use_history(&ks, &settings);
	claimed = key_store_claim(&ks, &fp, dedup_timestamp_plus(ks.now, ttl), nowait);
	key_store_close(&ks);
	dedup_scope_count(settings.counters, claimed ? DEDUP_COUNT_CLAIMS : DEDUP_COUNT_DUPLICATES, 1);
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

	key_store_open(&ks, DEDUP_REL_CLAIMS, scope, dedup_relation_hashed(DEDUP_REL_CLAIMS) ? &fps[0] : NULL,
				   true);
	key_store_use_history(&ks, settings);
	key_store_claim_batch(&ks, fps, nkeys, expires_at, nowait, claimed_key);
	key_store_close(&ks);
	for (int k = 0; k < nkeys; k++)
		nnew += claimed_key[k];
	dedup_scope_count(settings->counters, DEDUP_COUNT_CLAIMS, nnew);
	dedup_scope_count(settings->counters, DEDUP_COUNT_DUPLICATES, nkeys - nnew);
}

/* Keys by the node, then the shard, of their place, then by fingerprint (their index) */
static int
claim_place_cmp(const void *a, const void *b, void *arg)
{
	const DedupKeyPlace *places = (const DedupKeyPlace *) arg;
	int			ka = *(const int *) a;
	int			kb = *(const int *) b;

	if (places[ka].group != places[kb].group)
		return places[ka].group < places[kb].group ? -1 : 1;
	if (places[ka].shardid != places[kb].shardid)
		return places[ka].shardid < places[kb].shardid ? -1 : 1;
	return (ka > kb) - (ka < kb);
}

/*
 * A batch on a Citus cluster, where its keys' shards may be on several
 * nodes: the keys of each shard of this node claimed as a batch of their
 * own, and those of each other node sent there as one (this function, with
 * those keys), nodes in the order of their groups and shards in turn, each
 * run in fingerprint order: two batches take their keys in the same order
 * and never deadlock.  keys[k] is the key of fingerprint fps[k], sorted.
 */
static void
claim_batch_on_cluster(FunctionCallInfo fcinfo, const text *scope, DedupScopeSettings *settings,
					   const DedupFingerprint *fps, const Datum *keys, int nkeys,
					   TimestampTz expires_at, bool nowait, bool *claimed_key)
{
	ArrayType  *given = PG_GETARG_ARRAYTYPE_P(1);
	Oid			elemtype = ARR_ELEMTYPE(given);
	int16		typlen;
	bool		typbyval;
	char		typalign;
	DedupKeyPlace *places = palloc(sizeof(DedupKeyPlace) * nkeys);
	int		   *order = palloc(sizeof(int) * nkeys);
	DedupFingerprint *run_fps = palloc(sizeof(DedupFingerprint) * nkeys);
	Datum	   *run_keys = palloc(sizeof(Datum) * nkeys);
	bool	   *run_claimed = palloc(sizeof(bool) * nkeys);

	get_typlenbyvalalign(elemtype, &typlen, &typbyval, &typalign);
	for (int k = 0; k < nkeys; k++)
	{
		dedup_cluster_place(DEDUP_REL_CLAIMS, &fps[k], &places[k]);
		order[k] = k;
		claimed_key[k] = false;
	}
	qsort_arg(order, nkeys, sizeof(int), claim_place_cmp, places);
	for (int start = 0; start < nkeys;)
	{
		const DedupKeyPlace *first = &places[order[start]];
		int			n = 0;

		/* a run: one shard of this node, or every key of another node */
		while (start + n < nkeys && places[order[start + n]].group == first->group &&
			   (!first->local || places[order[start + n]].shardid == first->shardid))
		{
			run_fps[n] = fps[order[start + n]];
			run_keys[n] = keys[order[start + n]];
			n++;
		}
		if (first->local)
		{
			claim_keys(scope, settings, run_fps, n, expires_at, nowait, run_claimed);
			for (int i = 0; i < n; i++)
				claimed_key[order[start + i]] = run_claimed[i];
		}
		else
		{
			Datum		args[4];
			bool		nulls[4] = {false, false, PG_ARGISNULL(2), PG_ARGISNULL(3)};
			ListCell   *lc;
			Oid			input;
			Oid			ioparam;

			args[0] = PointerGetDatum(scope);
			args[1] = PointerGetDatum(construct_array(run_keys, n, elemtype, typlen, typbyval, typalign));
			args[2] = nulls[2] ? (Datum) 0 : PG_GETARG_DATUM(2);
			args[3] = nulls[3] ? (Datum) 0 : PG_GETARG_DATUM(3);
			getTypeInputInfo(elemtype, &input, &ioparam);
			/* the keys the other node claimed, as text: found again by their fingerprint */
			foreach(lc, dedup_cluster_call(fcinfo->flinfo->fn_oid, args, nulls, &run_fps[0]))
			{
				Datum	   *cols;
				int			ncols;
				DedupFingerprint fp;
				DedupFingerprint *found;

				deconstruct_array(lfirst(lc), TEXTOID, -1, false, TYPALIGN_INT, &cols, NULL, &ncols);
				dedup_key_datum(OidInputFunctionCall(input, TextDatumGetCString(cols[0]), ioparam, -1),
								typlen, scope, &fp);
				found = bsearch(&fp, fps, nkeys, sizeof(DedupFingerprint), claim_fingerprint_cmp);
				if (found == NULL)
					elog(ERROR, "a batch sent to another node claimed a key it was not given");
				claimed_key[found - fps] = true;
			}
		}
		start += n;
	}
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
	Datum	   *keyof;			/* the key given of each fingerprint */
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
	nowait = dedup_bool_arg(fcinfo, 3, "nowait");
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
		dedup_key_datum(elems[i], typlen, scope, &entries[i].fp);
		entries[i].pos = i;
	}
	qsort(entries, nelems, sizeof(BatchEntry), claim_batch_entry_cmp);

	/* each key once, in fingerprint order: a key given twice is new at most once */
	fps = palloc(sizeof(DedupFingerprint) * Max(nelems, 1));
	keyof = palloc(sizeof(Datum) * Max(nelems, 1));
	nkeys = 0;
	for (int i = 0; i < nelems; i++)
	{
		if (i > 0 && dedup_fingerprint_compare(&entries[i].fp, &entries[i - 1].fp) == 0)
			continue;
		keyof[nkeys] = elems[entries[i].pos];
		fps[nkeys++] = entries[i].fp;
	}
	claimed_key = palloc(sizeof(bool) * Max(nkeys, 1));
	expires_at = dedup_timestamp_plus(GetCurrentTimestamp(), ttl);
	if (dedup_relation_hashed(DEDUP_REL_CLAIMS))
		claim_batch_on_cluster(fcinfo, scope, &settings, fps, keyof, nkeys, expires_at, nowait,
							   claimed_key);
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
