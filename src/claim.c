/*-------------------------------------------------------------------------
 *
 * claim.c
 *	  The transactional claim: dedup_claim() and dedup_claim_batch() write
 *	  a row of dedup.claims in the caller's transaction, so that the claim
 *	  commits or rolls back with the caller's business writes.
 *
 * A claim row is (key fingerprint, expires_at) under a unique btree on the
 * fingerprint.  The path is written against the heap and index directly,
 * not through SPI: a duplicate costs one index probe and writes nothing; a
 * new key costs one heap insert and one index insert, no speculative
 * insertion record.
 *
 * Concurrency.  Every claimer of a key first takes a short heavyweight lock
 * on the key (an advisory-class lock tag of our own), then looks the key up
 * with a dirty snapshot:
 *	- a row inserted or deleted by a transaction still in progress: release
 *	  the key lock, wait for that transaction to end (or, with nowait,
 *	  report at once that the key is in progress), and start again;
 *	- a committed row whose expires_at is in the future: a duplicate;
 *	- a committed row that has expired: replaced in place by our row;
 *	- no row: insert ours.
 * The key lock is released as soon as our row is in the index: from then
 * on the index entry itself makes later claimers wait for our transaction.
 * The lock only closes the window between look-up and insert, so a claim
 * never fails on a unique violation and never holds more than one key lock,
 * however large the batch.  No wait ever happens while the key lock is held.
 *
 * Under REPEATABLE READ and SERIALIZABLE, a conflicting row committed after
 * the transaction's snapshot raises serialization_failure, as INSERT ...
 * ON CONFLICT does, because the caller could not see that transaction's
 * other writes.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/relscan.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/index.h"
#include "catalog/pg_type_d.h"
#include "executor/tuptable.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "storage/lock.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"
#include "utils/uuid.h"

#include "dedup.h"

/* Column numbers of dedup.claims */
#define Anum_claims_key			1
#define Anum_claims_expires_at	2
#define Natts_claims			2

/* locktag_field4 of our key locks; user advisory locks use 1 and 2 */
#define CLAIM_LOCKTAG_CLASS		0x6464

/* Everything one call needs to claim keys of one scope. */
typedef struct ClaimStore
{
	const text *scope;			/* for messages */
	Relation	heap;
	Relation	index;
	IndexInfo  *indexinfo;
	RegProcedure eqproc;		/* fingerprint equality, for the scan key */
	TupleTableSlot *slot;
	SnapshotData dirty;			/* sees rows of transactions in progress */
	IndexScanDesc scan;			/* look-ups with the dirty snapshot */
	TimestampTz now;			/* the claim time: expiry is decided by it */
	TimestampTz expires;		/* expires_at of the rows we write */
	bool		nowait;
} ClaimStore;

/* The equality function of the index's operator family, looked up once. */
static RegProcedure
claim_eqproc(Relation index)
{
	static Oid	cached_index = InvalidOid;
	static RegProcedure cached_proc = InvalidOid;

	if (cached_index != RelationGetRelid(index))
	{
		Oid			eqop = get_opfamily_member(index->rd_opfamily[0],
											   index->rd_opcintype[0],
											   index->rd_opcintype[0],
											   BTEqualStrategyNumber);

		cached_proc = get_opcode(eqop);
		cached_index = RelationGetRelid(index);
	}
	return cached_proc;
}

static void
claim_store_open(ClaimStore *cs, const char *funcname, const text *scope,
				 const Interval *ttl, bool nowait)
{
	dedup_check_writable(funcname);
	cs->scope = scope;
	cs->nowait = nowait;
	cs->heap = table_open(dedup_relation_oid(DEDUP_REL_CLAIMS), RowExclusiveLock);
	cs->index = index_open(dedup_relation_oid(DEDUP_REL_CLAIMS_PKEY), RowExclusiveLock);
	cs->indexinfo = BuildIndexInfo(cs->index);
	cs->eqproc = claim_eqproc(cs->index);
	cs->slot = table_slot_create(cs->heap, NULL);
	InitDirtySnapshot(cs->dirty);
	cs->scan = index_beginscan(cs->heap, cs->index, &cs->dirty, 1, 0);
	cs->now = GetCurrentTimestamp();
	cs->expires = DatumGetTimestampTz(DirectFunctionCall2(timestamptz_pl_interval,
														  TimestampTzGetDatum(cs->now),
														  IntervalPGetDatum(ttl)));
}

static void
claim_store_close(ClaimStore *cs)
{
	index_endscan(cs->scan);
	ExecDropSingleTupleTableSlot(cs->slot);
	index_close(cs->index, RowExclusiveLock);
	table_close(cs->heap, RowExclusiveLock);
}

static void
claim_lock_tag(LOCKTAG *tag, const DedupFingerprint *fp)
{
	uint32		hi;
	uint32		lo;

	memcpy(&hi, fp->bytes, sizeof(hi));
	memcpy(&lo, fp->bytes + sizeof(hi), sizeof(lo));
	SET_LOCKTAG_ADVISORY(*tag, MyDatabaseId, hi, lo, CLAIM_LOCKTAG_CLASS);
}

static void
claim_report_in_progress(ClaimStore *cs, const DedupFingerprint *fp)
{
	ereport(ERROR,
			(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
			 errmsg("key of scope \"%s\" is being claimed by another transaction",
					text_to_cstring(cs->scope)),
			 errdetail("The key's fingerprint is %s.", dedup_fingerprint_hex(fp)),
			 errhint("Deliver the message again later, or claim without nowait to wait for that transaction to end.")));
}

static void
claim_report_serialization_failure(void)
{
	ereport(ERROR,
			(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
			 errmsg("could not serialize access due to concurrent claim"),
			 errdetail("The key was claimed by a transaction that committed after this transaction's snapshot was taken."),
			 errhint("Retry the transaction.")));
}

/* Add the index entry of a heap tuple we just wrote. */
static void
claim_index_insert(ClaimStore *cs, HeapTuple tuple, const DedupFingerprint *fp,
				   bool unchanged)
{
	Datum		value = PointerGetDatum(fp);
	bool		isnull = false;

	index_insert(cs->index, &value, &isnull, &tuple->t_self, cs->heap,
				 UNIQUE_CHECK_YES, unchanged, cs->indexinfo);
}

/*
 * Under SERIALIZABLE, read the key once more with the transaction's MVCC
 * snapshot so that the index page and tuple carry predicate locks, as a
 * SELECT of the key would.
 */
static void
claim_predicate_lock(ClaimStore *cs, ScanKey skey)
{
	IndexScanDesc scan;

	scan = index_beginscan(cs->heap, cs->index, GetTransactionSnapshot(), 1, 0);
	index_rescan(scan, skey, 1, NULL, 0);
	(void) index_getnext_slot(scan, ForwardScanDirection, cs->slot);
	index_endscan(scan);
	ExecClearTuple(cs->slot);
}

/*
 * Claim one key.  Returns true when the caller's transaction now holds the
 * key, false when a live claim of it exists.
 */
static bool
claim_store_claim(ClaimStore *cs, const DedupFingerprint *fp)
{
	LOCKTAG		tag;
	ScanKeyData skey;
	Datum		values[Natts_claims];
	bool		nulls[Natts_claims] = {false, false};

	ScanKeyEntryInitialize(&skey, 0, 1, BTEqualStrategyNumber, InvalidOid,
						   cs->index->rd_indcollation[0], cs->eqproc,
						   PointerGetDatum(fp));
	values[Anum_claims_key - 1] = PointerGetDatum(fp);
	values[Anum_claims_expires_at - 1] = TimestampTzGetDatum(cs->expires);
	claim_lock_tag(&tag, fp);

	if (IsolationIsSerializable())
		claim_predicate_lock(cs, &skey);

	for (;;)
	{
		TransactionId xwait = InvalidTransactionId;
		uint32		spec_token = 0;
		bool		found = false;
		bool		visible = true;
		TimestampTz found_expires = 0;
		ItemPointerData found_tid;
		HeapTuple	tuple;

		CHECK_FOR_INTERRUPTS();
		if (LockAcquire(&tag, ExclusiveLock, false, cs->nowait) == LOCKACQUIRE_NOT_AVAIL)
			claim_report_in_progress(cs, fp);

		index_rescan(cs->scan, &skey, 1, NULL, 0);
		if (index_getnext_slot(cs->scan, ForwardScanDirection, cs->slot))
		{
			found_tid = cs->slot->tts_tid;
			if (TransactionIdIsValid(cs->dirty.xmin) || TransactionIdIsValid(cs->dirty.xmax))
			{
				xwait = TransactionIdIsValid(cs->dirty.xmin) ? cs->dirty.xmin : cs->dirty.xmax;
				spec_token = cs->dirty.speculativeToken;
			}
			else
			{
				bool		isnull;

				found = true;
				found_expires = DatumGetTimestampTz(slot_getattr(cs->slot,
																 Anum_claims_expires_at,
																 &isnull));
				if (IsolationUsesXactSnapshot())
					visible = table_tuple_satisfies_snapshot(cs->heap, cs->slot,
															 GetTransactionSnapshot());
			}
		}
		ExecClearTuple(cs->slot);

		if (TransactionIdIsValid(xwait))
		{
			/* another transaction holds the key: wait for its outcome */
			LockRelease(&tag, ExclusiveLock, false);
			if (cs->nowait)
				claim_report_in_progress(cs, fp);
			if (spec_token)
				SpeculativeInsertionWait(xwait, spec_token);
			else
				XactLockTableWait(xwait, cs->heap, &found_tid, XLTW_InsertIndexUnique);
			continue;
		}

		if (found && !visible)
		{
			LockRelease(&tag, ExclusiveLock, false);
			claim_report_serialization_failure();
		}

		if (found && found_expires > cs->now)
		{
			LockRelease(&tag, ExclusiveLock, false);
			return false;		/* a live claim: duplicate */
		}

		tuple = heap_form_tuple(RelationGetDescr(cs->heap), values, nulls);
		if (found)
		{
			/* an expired claim still present counts as absent: replace it */
			TM_FailureData tmfd;
			LockTupleMode lockmode;
			TM_Result	result;

			result = heap_update(cs->heap, &found_tid, tuple,
								 GetCurrentCommandId(true), InvalidSnapshot,
								 false, &tmfd, &lockmode);
			if (result == TM_BeingModified || result == TM_Updated ||
				result == TM_Deleted)
			{
				/* cleanup got there first, or is deleting it right now */
				LockRelease(&tag, ExclusiveLock, false);
				heap_freetuple(tuple);
				if (result != TM_BeingModified && IsolationUsesXactSnapshot())
					claim_report_serialization_failure();
				if (result == TM_BeingModified)
				{
					if (cs->nowait)
						claim_report_in_progress(cs, fp);
					XactLockTableWait(tmfd.xmax, cs->heap, &found_tid,
									  XLTW_InsertIndexUnique);
				}
				continue;
			}
			if (result != TM_Ok)
				elog(ERROR, "unexpected heap_update status %u on a dedup claim",
					 (unsigned) result);
			if (!HeapTupleIsHeapOnly(tuple))
				claim_index_insert(cs, tuple, fp, true);
		}
		else
		{
			heap_insert(cs->heap, tuple, GetCurrentCommandId(true), 0, NULL);
			claim_index_insert(cs, tuple, fp, false);
		}
		heap_freetuple(tuple);
		LockRelease(&tag, ExclusiveLock, false);
		return true;
	}
}

/* ---------------------------------------------------------------------
 * Arguments
 * ---------------------------------------------------------------------
 */

/* The raw bytes of a key of type text, bytea, uuid or dedup_fingerprint. */
static void
claim_key_bytes(Datum key, int16 typlen, const char **data, Size *len)
{
	if (typlen == -1)
	{
		struct varlena *v = (struct varlena *) DatumGetPointer(key);

		*data = VARDATA_ANY(v);
		*len = VARSIZE_ANY_EXHDR(v);
		if (*len == 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("key must not be empty")));
	}
	else
	{
		Assert(typlen == UUID_LEN && typlen == DEDUP_FINGERPRINT_LEN);
		*data = DatumGetPointer(key);
		*len = typlen;
	}
}

static Interval *
claim_ttl(FunctionCallInfo fcinfo, int argno, const text *scope)
{
	Interval   *ttl = dedup_interval_arg(fcinfo, argno, "ttl");

	return ttl ? ttl : dedup_scope_ttl(scope);
}

static bool
claim_nowait_arg(FunctionCallInfo fcinfo, int argno)
{
	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("nowait must not be null")));
	return PG_GETARG_BOOL(argno);
}

/*
 * dedup_claim(scope text, key <text|bytea|uuid|dedup_fingerprint>,
 *			   ttl interval DEFAULT NULL, nowait boolean DEFAULT false)
 */
static Datum
claim_single(FunctionCallInfo fcinfo, int16 typlen)
{
	text	   *scope = dedup_scope_arg(fcinfo, 0);
	const char *data;
	Size		len;
	bool		nowait;
	Interval   *ttl;
	DedupFingerprint fp;
	ClaimStore	cs;
	bool		claimed;

	if (PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("key must not be null")));
	claim_key_bytes(typlen == -1 ? PointerGetDatum(PG_DETOAST_DATUM_PACKED(PG_GETARG_DATUM(1)))
					: PG_GETARG_DATUM(1),
					typlen, &data, &len);
	nowait = claim_nowait_arg(fcinfo, 3);
	ttl = claim_ttl(fcinfo, 2, scope);

	dedup_fingerprint_key(scope, data, len, &fp);
	claim_store_open(&cs, "dedup_claim", scope, ttl, nowait);
	claimed = claim_store_claim(&cs, &fp);
	claim_store_close(&cs);
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
claim_batch_entry_cmp(const void *a, const void *b)
{
	const BatchEntry *ea = (const BatchEntry *) a;
	const BatchEntry *eb = (const BatchEntry *) b;
	int			c = dedup_fingerprint_compare(&ea->fp, &eb->fp);

	if (c != 0)
		return c;
	return (ea->pos > eb->pos) - (ea->pos < eb->pos);
}

PG_FUNCTION_INFO_V1(dedup_claim_batch);
Datum
dedup_claim_batch(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	text	   *scope = dedup_scope_arg(fcinfo, 0);
	ArrayType  *keys;
	Oid			elemtype;
	int16		typlen;
	bool		typbyval;
	char		typalign;
	Datum	   *elems;
	bool	   *elemnulls;
	int			nelems;
	BatchEntry *entries;
	bool	   *claimed;
	bool		nowait;
	Interval   *ttl;
	ClaimStore	cs;

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
	nowait = claim_nowait_arg(fcinfo, 3);
	ttl = claim_ttl(fcinfo, 2, scope);

	/* check and fingerprint every key before writing anything */
	entries = palloc(sizeof(BatchEntry) * Max(nelems, 1));
	for (int i = 0; i < nelems; i++)
	{
		const char *data;
		Size		len;

		if (elemnulls[i])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("keys must not contain null"),
					 errdetail("Element %d is null.", i + 1)));
		if (typlen == -1)
			elems[i] = PointerGetDatum(PG_DETOAST_DATUM_PACKED(elems[i]));
		claim_key_bytes(elems[i], typlen, &data, &len);
		dedup_fingerprint_key(scope, data, len, &entries[i].fp);
		entries[i].pos = i;
	}
	qsort(entries, nelems, sizeof(BatchEntry), claim_batch_entry_cmp);

	claimed = palloc0(sizeof(bool) * Max(nelems, 1));
	claim_store_open(&cs, "dedup_claim_batch", scope, ttl, nowait);
	for (int i = 0; i < nelems; i++)
	{
		if (i > 0 && dedup_fingerprint_compare(&entries[i].fp, &entries[i - 1].fp) == 0)
			continue;			/* the same key earlier in this batch */
		claimed[entries[i].pos] = claim_store_claim(&cs, &entries[i].fp);
	}
	claim_store_close(&cs);

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
