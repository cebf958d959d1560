/*-------------------------------------------------------------------------
 *
 * store.c
 *	  The one place that reads and writes rows of dedup.claims for callers
 *	  (claims and idempotency records; the cleanup only deletes).
 *
 * A row is (key fingerprint, expires_at, record) under a unique btree on
 * the fingerprint; record is NULL for a plain claim.  The heap and index
 * are used directly, not through SPI: a look-up is one index probe that
 * writes nothing; a new row is one heap insert and one index insert, no
 * speculative-insertion record.  dedup.claims is kept in time buckets
 * (bucket.c), each a heap and index of its own: a call looks a key up in
 * them newest first (skipping a sealed bucket whose filter rules the key
 * out, filter.c) and writes into the current one.  A key with no live
 * row may still be seen by its scope's history (history.c, above the
 * store): the store asks it through key_store_history_hook, which module.c
 * installs, and knows nothing else of histories.
 *
 * Concurrency.  Every writer of a key first takes a short heavyweight lock
 * on the key (an advisory-class lock tag of our own, catalog.h), waiting for
 * it whatever its policy, then looks the key up with a dirty snapshot:
 *	- a row inserted or deleted by a transaction still in progress: release
 *	  the key lock and, by the caller's policy, wait for that transaction and
 *	  look again, report lock_not_available at once, or return "busy";
 *	- a committed row: live or expired by its expires_at, decided at the
 *	  time of the call; an expired row counts as absent and is replaced;
 *	- no row.
 * While it waits for a transaction, a call on the buckets of dedup.claims
 * holds no lock on them either (store_wait_for_writer): the cleanup waits
 * for the calls on a bucket, never for one that waits for another.
 * The key lock is released as soon as the caller's row is in the index:
 * from then on the index entry itself makes later writers wait for the
 * caller's transaction.  The lock only closes the window between look-up
 * and write, so no writer ever fails on a unique violation.  Nothing waits
 * for a transaction while holding a key lock.  A single call holds one key
 * lock at a time; a batch claim (key_store_claim_batch) holds those of up
 * to STORE_BATCH_ROWS keys whose new rows it writes together, taken in
 * fingerprint order, and may wait meanwhile for the next key's lock (held
 * by another call between its look-up and its write) or for a bucket being
 * dropped (an instant), never for a transaction: before anything that may
 * wait for one, it writes what it holds back and releases those locks.
 *
 * Under REPEATABLE READ and SERIALIZABLE, a committed row the transaction's
 * snapshot cannot see raises serialization_failure, as INSERT ... ON
 * CONFLICT does, because the caller could not see that transaction's other
 * writes.
 *
 * Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/heapam.h"
#include "access/detoast.h"
#include "access/htup_details.h"
#include "access/stratnum.h"
#include "access/subtrans.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/index.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"
#include "utils/typcache.h"

#include "catalog.h"
#include "compat.h"
#include "filter.h"
#include "shards.h"
#include "store.h"

/* Field numbers of dedup.record_state */
#define Anum_record_status			1
#define Anum_record_attempts		2
#define Anum_record_lease_until		3
#define Anum_record_request			4
#define Anum_record_response_code	5
#define Anum_record_response		6
#define Anum_record_first_seen		7
#define Anum_record_completed_at	8
#define Anum_record_taken_over		9	/* added in 1.1 */
#define Anum_record_ttl				10	/* added in 1.1 */
#define Natts_record				10

/* The equality function of the index's operator family, looked up once. */
static RegProcedure
store_eqproc(Relation index)
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

/* The scan key of a look-up of fp in any part. */
static void
store_scankey(KeyStore *ks, ScanKey skey, const DedupFingerprint *fp)
{
	ScanKeyEntryInitialize(skey, 0, 1, BTEqualStrategyNumber, InvalidOid,
						   ks->parts[ks->current].index->rd_indcollation[0], ks->eqproc,
						   PointerGetDatum(fp));
}

/*
 * Open one relation of a key table and its primary key, locked; false when
 * it was dropped before the lock was granted (a bucket the cleanup dropped
 * after this call read the list of buckets).
 */
static bool
store_part_open(KeyStore *ks, KeyStorePart *part)
{
	if (!dedup_bucket_lock(part->heap_oid, ks->lockmode))
		return false;
	part->heap = table_open(part->heap_oid, NoLock);
	part->index = index_open(part->index_oid, ks->lockmode);
	part->scan = dedup_index_beginscan(part->heap, part->index, &ks->dirty, 1, 0);
	part->indexinfo = NULL;
	part->opened = true;
	return true;
}

static void
store_part_close(KeyStore *ks, KeyStorePart *part)
{
	if (!part->opened)
		return;
	index_endscan(part->scan);
	index_close(part->index, ks->lockmode);
	table_close(part->heap, ks->lockmode);
	part->opened = false;
}

/*
 * Open the buckets of dedup.claims, newest first (bucket.c), once no change
 * of the list arrived while they were being locked.  A sealed bucket is
 * left to store_parts_for_key(): it gets no new row, so a switch does not
 * wait for the calls that read it, and its filter may spare opening it.
 */
static void
store_open_buckets(KeyStore *ks)
{
	for (;;)
	{
		uint64		generation;
		const DedupBucketList *list = dedup_bucket_list(&generation);
		bool		opened = true;

		ks->nparts = 0;
		ks->current = -1;
		for (int i = 0; i < list->nbuckets; i++)
		{
			KeyStorePart *part = &ks->parts[ks->nparts];

			part->heap_oid = list->buckets[i].heap;
			part->index_oid = list->buckets[i].index;
			part->number = list->buckets[i].number;
			part->sealed = list->buckets[i].sealed;
			part->closed_at = list->buckets[i].closed_at;
			part->opened = false;
			part->written = false;
			if (ks->cluster)
			{
				/*
				 * On a cluster, the key's shard of the bucket here
				 * (co-located with its shard of dedup.claims).  A bucket
				 * listed here is not retired on this node, and the
				 * coordinator drops a bucket's table only once every node
				 * retired it: a shard not found is a list that changed since
				 * it was read (read it again), or a table gone behind the
				 * cleanup's back, whose claims would be missed (an error, not
				 * a bucket left out).  No filter is kept of a bucket's
				 * shards: a sealed one is read too.
				 */
				char	   *name = part->number == 0 ? "claims" :
					psprintf("claims_%d", part->number);

				if (!dedup_shards_bucket_shard(list->buckets[i].heap, name, &ks->cluster_key,
											   &part->heap_oid, &part->index_oid))
				{
					if (dedup_bucket_list_changed(generation))
					{
						opened = false;
						break;
					}
					ereport(ERROR,
							(errcode(ERRCODE_UNDEFINED_TABLE),
							 errmsg("bucket %d of dedup.claims has no shard of the key on this node",
									part->number),
							 errdetail("This node's dedup.buckets lists it as %s, and table \"%s.%s\" or the key's shard of it is gone: the claims it holds would be missed.",
									   list->buckets[i].current ? "current" : "not retired",
									   DEDUP_INTERNAL_SCHEMA, name),
							 errhint("A bucket's table is dropped by the coordinator's cleanup only, once every node retired it; restore it, or remove its row from this node's dedup.buckets.")));
				}
				part->sealed = false;
			}
			if (list->buckets[i].current)
				ks->current = ks->nparts;
			ks->nparts++;
			if (!part->sealed && opened)
				opened = store_part_open(ks, part);
		}
		if (opened && ks->current < 0)
			dedup_bucket_no_current();
		if (opened && !dedup_bucket_list_changed(generation))
			return;
		for (int i = 0; i < ks->nparts; i++)
			store_part_close(ks, &ks->parts[i]);
	}
}

/*
 * Wait for a transaction in progress that wrote the key (its xid, and its
 * speculative insertion token if any), the key lock released.  On the
 * buckets of dedup.claims, the call holds none of their locks meanwhile: the
 * cleanup waits for the calls in progress on a bucket (bucket.c), and this
 * wait may be long (a redelivery that arrives while the first delivery is
 * still being processed), so the buckets are closed first and opened again
 * after, from the list as it is then; the caller looks the key up again in
 * them.  (The write locks of the buckets this transaction wrote into stay
 * held: they are held until it ends.)
 */
static void
store_wait_for_writer(KeyStore *ks, TransactionId xwait, uint32 spec_token, int part,
					  ItemPointer tid)
{
	if (!ks->bucketed)
	{
		if (spec_token)
			SpeculativeInsertionWait(xwait, spec_token);
		else
			XactLockTableWait(xwait, ks->parts[part].heap, tid, XLTW_InsertIndexUnique);
		return;
	}
	for (int i = 0; i < ks->nparts; i++)
		store_part_close(ks, &ks->parts[i]);
	if (spec_token)
		SpeculativeInsertionWait(xwait, spec_token);
	else
		XactLockTableWait(xwait, NULL, NULL, XLTW_None);
	store_open_buckets(ks);
	ks->heap = ks->parts[ks->current].heap;
}

/*
 * Which parts may hold a row of the key, in probe[]: every part but the
 * sealed buckets whose filter says the key is absent.  Those that may are
 * opened here, before the key lock is taken (nothing waits under it).  A
 * sealed bucket dropped meanwhile was retired first: every row in it had
 * expired, so it is left out.  The filters' blocks are all prefetched
 * first, so that a claim over thirty buckets waits for about one cache miss,
 * not thirty.
 */
static void
store_parts_for_key(KeyStore *ks, const DedupFingerprint *fp, bool *probe)
{
	for (int i = 0; i < ks->nparts; i++)
	{
		if (ks->parts[i].sealed)
			dedup_filter_prefetch(ks->parts[i].heap_oid, ks->parts[i].closed_at, fp);
	}
	for (int i = 0; i < ks->nparts; i++)
	{
		KeyStorePart *part = &ks->parts[i];

		probe[i] = !part->sealed ||
			dedup_filter_may_contain(part->heap_oid, part->closed_at, fp);
		if (probe[i] && !part->opened)
			probe[i] = store_part_open(ks, part);
	}
}

/*
 * Open a key table: dedup.claims (DEDUP_REL_CLAIMS), in its buckets,
 * dedup.outbox_keys (DEDUP_REL_OUTBOX_KEYS), which has the same columns,
 * or dedup.streams (DEDUP_REL_STREAMS); its primary key follows it in
 * DedupRelation.  A writer has been refused already where it may not write
 * (dedup_scope_of_call, the first thing every writer does).
 */
void
key_store_open(KeyStore *ks, DedupRelation table, const text *scope,
			   const DedupFingerprint *key, bool for_write)
{
	bool		sharded;

	Assert(table == DEDUP_REL_CLAIMS || table == DEDUP_REL_OUTBOX_KEYS ||
		   table == DEDUP_REL_STREAMS);
	ks->scope = scope;
	ks->table = table;
	ks->lockmode = for_write ? RowExclusiveLock : AccessShareLock;
	InitDirtySnapshot(ks->dirty);
	ks->current = 0;
	ks->bucketed = false;

	/*
	 * on a Citus cluster, the key's shard (without a key, catalog.c refuses:
	 * 0A000)
	 */
	sharded = key != NULL && dedup_catalog_relation_hashed(table);
	ks->cluster = false;
	if (table == DEDUP_REL_CLAIMS && (sharded || !dedup_catalog_relation_hashed(table)))
	{
		ks->bucketed = true;
		if (sharded)
		{
			/*
			 * On a cluster: the key's shards of the buckets here, once the
			 * shards' metadata is locked as Citus's writers lock it (a move
			 * waits for this transaction, or has switched and is seen)
			 */
			ks->cluster = true;
			ks->cluster_key = *key;
			dedup_shards_lock_key(DEDUP_REL_CLAIMS, key);
		}
		store_open_buckets(ks);
	}
	else
	{
		KeyStorePart *part = &ks->parts[0];

		if (sharded)
			dedup_shards_shard_open(table, key, ks->lockmode, &part->heap, &part->index);
		else
		{
			part->heap = dedup_catalog_relation_open(table, ks->lockmode);
			part->index = dedup_catalog_relation_open(table + 1, ks->lockmode);
		}
		part->heap_oid = RelationGetRelid(part->heap);
		part->index_oid = RelationGetRelid(part->index);
		part->scan = dedup_index_beginscan(part->heap, part->index, &ks->dirty, 1, 0);
		part->indexinfo = NULL;
		part->opened = true;
		part->sealed = false;
		part->written = false;
		ks->nparts = 1;
	}
	ks->heap = ks->parts[ks->current].heap;
	ks->eqproc = store_eqproc(ks->parts[ks->current].index);
	ks->slot = table_slot_create(ks->heap, NULL);
	ks->record_desc = NULL;
	ks->whole_records = false;
	ks->now = GetCurrentTimestamp();
	ks->wrote = false;
	ks->history_id = 0;
	ks->history_from = 0;
}

/*
 * Claims of a scope with a history (history.c): they carry its history_id,
 * so that the cleanup folds them into it when their bucket goes, and a key
 * whose claim expired less than a window ago, or that the history may hold,
 * is still seen.  A database whose dedup.claims has no history column
 * (still at 1.0's SQL) has no history.
 */
void
key_store_use_history(KeyStore *ks, const DedupScopeSettings *settings)
{
	if (settings->history_id == 0 || ks->table != DEDUP_REL_CLAIMS ||
		RelationGetDescr(ks->heap)->natts < Anum_claims_history)
		return;
	ks->history_id = settings->history_id;
	ks->history_from = DatumGetTimestampTz(DirectFunctionCall2(timestamptz_mi_interval,
															   TimestampTzGetDatum(ks->now),
															   IntervalPGetDatum(&settings->history)));
}

/*
 * The history tier's answer to whether a history may hold a key (history.c,
 * above the store): module.c installs it as the library loads.
 */
KeyStoreHistoryHook key_store_history_hook = NULL;

/*
 * Whether a key that has no live claim is seen by the scope's history: an
 * expired claim (not a record) within the window, not yet folded, or a
 * generation that may hold it (key_store_history_hook).
 */
bool
key_store_history_seen(KeyStore *ks, const DedupFingerprint *fp, const KeyRow *row)
{
	if (ks->history_id == 0)
		return false;
	if (row->state == KEY_EXPIRED && !row->has_record && row->expires_at > ks->history_from)
		return true;
	return key_store_history_hook(ks->history_id, fp);
}

void
key_store_close(KeyStore *ks)
{
	ExecDropSingleTupleTableSlot(ks->slot);
	if (ks->record_desc)
		ReleaseTupleDesc(ks->record_desc);
	for (int i = 0; i < ks->nparts; i++)
		store_part_close(ks, &ks->parts[i]);

	/*
	 * Make the writes visible to the rest of the statement, as SPI does after
	 * each command: a later write of the same key in the same statement
	 * (dedup_begin and dedup_complete in one SELECT, a claim of a key claimed
	 * a moment ago with a tiny ttl) must find the row as an earlier version.
	 * Within one call, every key is written at most once.
	 */
	if (ks->wrote)
		CommandCounterIncrement();
}

/*
 * The row type of the record column, and the length of its head: the
 * slice of the composite datum up to the end of response_code, the last of
 * the fixed-width fields before the response.
 */
static TupleDesc
store_record_desc(KeyStore *ks)
{
	if (ks->record_desc == NULL)
	{
		TupleDesc	desc;
		int32		off = 0;

		desc = lookup_rowtype_tupdesc(TupleDescAttr(RelationGetDescr(ks->heap),
													Anum_claims_record - 1)->atttypid,
									  -1);
		for (int i = 0; i < Anum_record_response_code; i++)
		{
			Form_pg_attribute att = TupleDescAttr(desc, i);

			if (att->attlen <= 0)
				elog(ERROR, "field %d of dedup.record_state is not of fixed width", i + 1);
			off = att_align_nominal(off, att->attalign) + att->attlen;
		}
		ks->record_head_len = MAXALIGN(SizeofHeapTupleHeader + BITMAPLEN(desc->natts)) +
			off - VARHDRSZ;
		ks->record_desc = desc;
	}
	return ks->record_desc;
}

/*
 * Read the record part of a row.  Unless the store reads whole records
 * (record.c), only its head is fetched: a claim decides on the record's
 * status alone, and a slice of a toasted value is all that TOAST fetches
 * and decompresses, so a claim of a key whose record stores a large
 * response never reads the response.  The fields after it (response,
 * first_seen, completed_at) are then left unset.
 */
static void
store_record_read(KeyStore *ks, Datum datum, DedupRecord *rec)
{
	TupleDesc	desc = store_record_desc(ks);
	HeapTupleHeader th;
	HeapTupleData tuple;
	Datum		values[Natts_record];
	bool		nulls[Natts_record];

	if (ks->whole_records)
		th = DatumGetHeapTupleHeader(datum);
	else
		th = (HeapTupleHeader) pg_detoast_datum_slice((struct varlena *) DatumGetPointer(datum),
													  0, ks->record_head_len);
	tuple.t_len = HeapTupleHeaderGetDatumLength(th);
	ItemPointerSetInvalid(&tuple.t_self);
	tuple.t_tableOid = InvalidOid;
	tuple.t_data = th;
	memset(nulls, true, sizeof(nulls));
	/* a database still at 1.0 has no taken_over or ttl */
	for (int i = 0; i < (ks->whole_records ? Min(Natts_record, desc->natts) : Anum_record_response_code); i++)
		values[i] = heap_getattr(&tuple, i + 1, desc, &nulls[i]);

	rec->status = DatumGetChar(values[Anum_record_status - 1]);
	rec->attempts = DatumGetInt32(values[Anum_record_attempts - 1]);
	rec->lease_until = DatumGetTimestampTz(values[Anum_record_lease_until - 1]);
	rec->has_request = !nulls[Anum_record_request - 1];
	if (rec->has_request)
		memcpy(&rec->request, DatumGetPointer(values[Anum_record_request - 1]),
			   sizeof(DedupFingerprint));
	rec->has_response_code = !nulls[Anum_record_response_code - 1];
	rec->response_code = rec->has_response_code ?
		DatumGetInt32(values[Anum_record_response_code - 1]) : 0;
	rec->response = nulls[Anum_record_response - 1] ? NULL :
		DatumGetJsonbPCopy(values[Anum_record_response - 1]);
	rec->first_seen = nulls[Anum_record_first_seen - 1] ? 0 :
		DatumGetTimestampTz(values[Anum_record_first_seen - 1]);
	rec->has_completed_at = !nulls[Anum_record_completed_at - 1];
	rec->completed_at = rec->has_completed_at ?
		DatumGetTimestampTz(values[Anum_record_completed_at - 1]) : 0;
	rec->taken_over = nulls[Anum_record_taken_over - 1] ? rec->attempts > 1 :
		DatumGetBool(values[Anum_record_taken_over - 1]);
	rec->has_ttl = !nulls[Anum_record_ttl - 1];
	if (rec->has_ttl)
		rec->ttl = *DatumGetIntervalP(values[Anum_record_ttl - 1]);
	if (!ks->whole_records)
		pfree(th);
}

static Datum
store_record_datum(KeyStore *ks, const DedupRecord *rec)
{
	Datum		values[Natts_record];
	bool		nulls[Natts_record] = {false};

	values[Anum_record_status - 1] = CharGetDatum(rec->status);
	values[Anum_record_attempts - 1] = Int32GetDatum(rec->attempts);
	values[Anum_record_lease_until - 1] = TimestampTzGetDatum(rec->lease_until);
	values[Anum_record_request - 1] = PointerGetDatum(&rec->request);
	nulls[Anum_record_request - 1] = !rec->has_request;
	values[Anum_record_response_code - 1] = Int32GetDatum(rec->response_code);
	nulls[Anum_record_response_code - 1] = !rec->has_response_code;
	values[Anum_record_response - 1] = PointerGetDatum(rec->response);
	nulls[Anum_record_response - 1] = rec->response == NULL;
	values[Anum_record_first_seen - 1] = TimestampTzGetDatum(rec->first_seen);
	values[Anum_record_completed_at - 1] = TimestampTzGetDatum(rec->completed_at);
	nulls[Anum_record_completed_at - 1] = !rec->has_completed_at;
	values[Anum_record_taken_over - 1] = BoolGetDatum(rec->taken_over);
	values[Anum_record_ttl - 1] = IntervalPGetDatum(&rec->ttl);
	nulls[Anum_record_ttl - 1] = !rec->has_ttl;
	return HeapTupleGetDatum(heap_form_tuple(store_record_desc(ks), values, nulls));
}

static void
key_store_report_busy(KeyStore *ks, const DedupFingerprint *fp)
{
	if (ks->table == DEDUP_REL_STREAMS)
		ereport(ERROR,
				(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
				 errmsg("stream of scope \"%s\" is being advanced by another transaction",
						text_to_cstring(ks->scope)),
				 errdetail("The stream's fingerprint is %s.", dedup_fingerprint_hex(fp)),
				 errhint("Deliver the message again later, or advance without nowait to wait for that transaction to end.")));
	ereport(ERROR,
			(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
			 errmsg("key of scope \"%s\" is being claimed by another transaction",
					text_to_cstring(ks->scope)),
			 errdetail("The key's fingerprint is %s.", dedup_fingerprint_hex(fp)),
			 errhint("Deliver the message again later, or claim without nowait to wait for that transaction to end.")));
}

static void
store_report_serialization_failure(void)
{
	ereport(ERROR,
			(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
			 errmsg("could not serialize access due to concurrent claim"),
			 errdetail("The key was written by a transaction that committed after this transaction's snapshot was taken."),
			 errhint("Retry the transaction.")));
}

/*
 * Under SERIALIZABLE, read the key once more with the transaction's MVCC
 * snapshot so that the index page and tuple carry predicate locks, as a
 * SELECT of the key would.
 */
static void
store_predicate_lock(KeyStore *ks, ScanKey skey, const bool *probe)
{
	for (int i = 0; i < ks->nparts; i++)
	{
		IndexScanDesc scan;
		bool		found;

		if (!probe[i])
			continue;
		scan = dedup_index_beginscan(ks->parts[i].heap, ks->parts[i].index,
									 GetTransactionSnapshot(), 1, 0);
		index_rescan(scan, skey, 1, NULL, 0);
		found = index_getnext_slot(scan, ForwardScanDirection, ks->slot);
		index_endscan(scan);
		ExecClearTuple(ks->slot);
		if (found)
			break;
	}
}

/* The stream part of a row of dedup.streams in a slot. */
void
key_store_stream_of(TupleTableSlot *slot, DedupStreamRow *stream)
{
	bool		isnull;
	Datum		d;

	d = slot_getattr(slot, Anum_streams_epoch, &isnull);
	stream->has_epoch = !isnull;
	stream->epoch = isnull ? 0 : DatumGetInt64(d);
	d = slot_getattr(slot, Anum_streams_mark, &isnull);
	stream->has_mark = !isnull;
	stream->mark = isnull ? 0 : DatumGetInt64(d);
}

/* Fill row from the tuple in ks->slot. */
static void
store_row_from_slot(KeyStore *ks, KeyRow *row)
{
	bool		isnull;
	Datum		record;

	row->tid = ks->slot->tts_tid;
	row->expires_at = DatumGetTimestampTz(slot_getattr(ks->slot, Anum_key_expires_at,
													   &isnull));
	if (ks->table == DEDUP_REL_STREAMS)
	{
		key_store_stream_of(ks->slot, &row->stream);
		return;
	}
	record = slot_getattr(ks->slot, Anum_claims_record, &isnull);
	row->has_record = !isnull;
	if (row->has_record)
		store_record_read(ks, record, &row->record);
}

/* Whether the tuple in ks->slot is the last version of its chain. */
static bool
store_slot_is_last_version(KeyStore *ks)
{
	bool		should_free;
	HeapTuple	tuple = ExecFetchSlotHeapTuple(ks->slot, false, &should_free);
	bool		last = ItemPointerEquals(&tuple->t_self, &tuple->t_data->t_ctid);

	if (should_free)
		heap_freetuple(tuple);
	return last;
}

/*
 * A key's row found busy (in ks->slot, already in row): fill row with the
 * version the writer in progress wrote last.  The version found first is
 * the writer's (its xmin), or the one it replaces (its xmax): the writer
 * may have written the key more than once (a begin then a complete), and
 * each version but its last points on to the next.  A dirty snapshot's scan
 * returns every version the writer wrote (the rest of the HOT chain, or the
 * index's other entries of the key), so read on to the writer's version that
 * points to no next one; none for a delete (row keeps the version found).
 */
static void
store_row_last_written(KeyStore *ks, KeyStorePart *part, TransactionId writer, KeyRow *row)
{
	/* the writer's versions may each be of a subtransaction of its own */
	writer = SubTransGetTopmostTransaction(writer);
	if (TransactionIdIsValid(ks->dirty.xmin) &&
		TransactionIdEquals(SubTransGetTopmostTransaction(ks->dirty.xmin), writer) &&
		store_slot_is_last_version(ks))
		return;
	while (index_getnext_slot(part->scan, ForwardScanDirection, ks->slot))
	{
		if (!TransactionIdIsValid(ks->dirty.xmin) ||
			!TransactionIdEquals(SubTransGetTopmostTransaction(ks->dirty.xmin), writer))
			continue;
		store_row_from_slot(ks, row);
		if (store_slot_is_last_version(ks))
			return;
	}
}

/*
 * Whether a row found counts: live until it expires, unless it is the
 * tombstone of a released record, which counts as absent like an expired
 * row (it stays only to keep the count of attempts; see record.c).
 */
static KeyState
store_row_state(const KeyStore *ks, const KeyRow *row)
{
	if (row->has_record && row->record.status == RECORD_RELEASED)
		return KEY_EXPIRED;
	return row->expires_at > ks->now ? KEY_LIVE : KEY_EXPIRED;
}

/*
 * Lock a key and find its row.  Returns the state, also in row->state.
 * Unless the state is KEY_BUSY, the key lock is held: release it with
 * key_store_unlock() or by writing with key_store_put().
 * With KEY_BUSY_RETURN, a busy row's contents are filled in as the
 * transaction in progress wrote them.
 */
KeyState
key_store_find(KeyStore *ks, const DedupFingerprint *fp, KeyBusyPolicy busy,
			   KeyRow *row)
{
	ScanKeyData skey;
	bool		probe[DEDUP_MAX_BUCKETS];

	memset(row, 0, sizeof(KeyRow));
	store_scankey(ks, &skey, fp);
	dedup_key_locktag(&row->tag, fp);
	store_parts_for_key(ks, fp, probe);

	if (IsolationIsSerializable())
		store_predicate_lock(ks, &skey, probe);

	for (;;)
	{
		TransactionId xwait = InvalidTransactionId;
		uint32		spec_token = 0;
		bool		visible = true;

		CHECK_FOR_INTERRUPTS();

		/*
		 * Always wait for the key lock, whatever the policy: its holder only
		 * looks the key up and writes it (a batch: up to STORE_BATCH_ROWS
		 * keys), never waiting for a transaction while holding it, so the
		 * wait is short; "busy" means a transaction in progress has written
		 * the key, never that another call is between its look-up and its
		 * write at this instant.
		 */
		(void) LockAcquire(&row->tag, ExclusiveLock, false, false);

		row->state = KEY_ABSENT;
		for (row->part = 0; row->part < ks->nparts; row->part++)
		{
			KeyStorePart *part = &ks->parts[row->part];

			if (!probe[row->part])
				continue;
			index_rescan(part->scan, &skey, 1, NULL, 0);
			if (!index_getnext_slot(part->scan, ForwardScanDirection, ks->slot))
				continue;
			/* the newest bucket that has a row holds the key's latest version */
			store_row_from_slot(ks, row);
			if (TransactionIdIsValid(ks->dirty.xmin) || TransactionIdIsValid(ks->dirty.xmax))
			{
				xwait = TransactionIdIsValid(ks->dirty.xmin) ? ks->dirty.xmin : ks->dirty.xmax;
				spec_token = ks->dirty.speculativeToken;

				/* a caller told what the writer wrote reads its last version */
				if (busy == KEY_BUSY_RETURN)
					store_row_last_written(ks, part, xwait, row);
			}
			else
			{
				row->state = store_row_state(ks, row);
				if (IsolationUsesXactSnapshot())
					visible = table_tuple_satisfies_snapshot(part->heap, ks->slot,
															 GetTransactionSnapshot());
			}
			break;
		}
		ExecClearTuple(ks->slot);

		if (TransactionIdIsValid(xwait))
		{
			/* another transaction is writing the key */
			LockRelease(&row->tag, ExclusiveLock, false);
			if (busy == KEY_BUSY_ERROR)
				key_store_report_busy(ks, fp);
			if (busy == KEY_BUSY_RETURN)
			{
				row->state = KEY_BUSY;
				return KEY_BUSY;
			}
			store_wait_for_writer(ks, xwait, spec_token, row->part, &row->tid);
			if (ks->bucketed)
			{
				/* the buckets as listed now */
				store_parts_for_key(ks, fp, probe);
				if (IsolationIsSerializable())
					store_predicate_lock(ks, &skey, probe);
			}
			continue;
		}
		if (!visible)
		{
			LockRelease(&row->tag, ExclusiveLock, false);
			store_report_serialization_failure();
		}
		return row->state;
	}
}

void
key_store_unlock(KeyRow *row)
{
	Assert(row->state != KEY_BUSY);
	LockRelease(&row->tag, ExclusiveLock, false);
}

/* Add the index entry of a heap tuple we just wrote into a part, at tid. */
static void
store_index_insert(KeyStore *ks, KeyStorePart *part, ItemPointer tid,
				   const DedupFingerprint *fp, bool unchanged)
{
	Datum		value = PointerGetDatum(fp);
	bool		isnull = false;

	if (part->indexinfo == NULL)
		part->indexinfo = BuildIndexInfo(part->index);
	index_insert(part->index, &value, &isnull, tid, part->heap,
				 UNIQUE_CHECK_YES, unchanged, part->indexinfo);
}

/*
 * Before a row goes into a bucket of dedup.claims: take its write lock, held
 * until the transaction ends, so that the cleanup neither seals, folds nor
 * drops the bucket while the row may still commit (bucket.c).
 */
static void
store_part_will_write(KeyStore *ks, KeyStorePart *part)
{
	if (!ks->bucketed || part->written)
		return;
	dedup_bucket_lock_written(part->heap_oid);
	part->written = true;
}

/*
 * After an update or delete found the row changed under us (the cleanup
 * deleted it, or is deleting it): release the key lock and wait for that
 * transaction if it is still running.  The caller looks the key up again.
 */
static void
store_changed_under_us(KeyStore *ks, const DedupFingerprint *fp, KeyRow *row,
					   TM_Result result, TM_FailureData *tmfd, KeyBusyPolicy busy)
{
	LockRelease(&row->tag, ExclusiveLock, false);
	if (result != TM_BeingModified && IsolationUsesXactSnapshot())
		store_report_serialization_failure();
	if (result == TM_BeingModified)
	{
		if (busy == KEY_BUSY_ERROR)
			key_store_report_busy(ks, fp);
		store_wait_for_writer(ks, tmfd->xmax, 0, row->part, &row->tid);
	}
}

/*
 * The part a key's new version goes into: the current bucket, or the bucket
 * of the latest version when that one is newer (a call that has not yet
 * seen the switch to it, bucket.c): never behind the latest version.
 */
static int
store_write_target(const KeyStore *ks, const KeyRow *row)
{
	return row->state == KEY_ABSENT ? ks->current : Min(ks->current, row->part);
}

/*
 * Write a claim or record (dedup.claims, dedup.outbox_keys) with
 * key_store_write().
 */
bool
key_store_put(KeyStore *ks, const DedupFingerprint *fp, KeyRow *row,
			  TimestampTz expires_at, const DedupRecord *record, KeyBusyPolicy busy)
{
	Datum		values[Natts_claims];
	bool		nulls[Natts_claims] = {false, false, false, true};
	int			target;

	Assert(ks->table != DEDUP_REL_STREAMS);
	values[Anum_key_key - 1] = PointerGetDatum(fp);
	values[Anum_key_expires_at - 1] = TimestampTzGetDatum(expires_at);
	values[Anum_claims_history - 1] = Int32GetDatum(ks->history_id);
	if (record)
		values[Anum_claims_record - 1] = store_record_datum(ks, record);
	else
	{
		nulls[Anum_claims_record - 1] = true;
		nulls[Anum_claims_history - 1] = (ks->history_id == 0);
	}
	target = store_write_target(ks, row);
	if (!key_store_write(ks, fp, row, heap_form_tuple(RelationGetDescr(ks->heap), values, nulls),
						 busy))
		return false;

	/*
	 * the ttls written into the current bucket set its interval, and their
	 * expiries when the cleanup reads it (bucket.c): noted for the bucket
	 * written into, which may be newer than the one this call knows current
	 */
	if (ks->bucketed)
		dedup_bucket_note_written(ks->parts[target].number, ks->now, expires_at);
	return true;
}

/*
 * Write the key's row, a tuple of the key table whose key is fp: insert it
 * when the key was absent, replace the row found otherwise.  Releases the
 * key lock and frees the tuple.  Returns false when the row was changed
 * under us (the caller looks the key up again).
 */
bool
key_store_write(KeyStore *ks, const DedupFingerprint *fp, KeyRow *row, HeapTuple tuple,
				KeyBusyPolicy busy)
{
	CommandId	cid = GetCurrentCommandId(true);
	TM_FailureData tmfd;
	TM_Result	result = TM_Ok;
	KeyStorePart *target;

	Assert(row->state != KEY_BUSY);

	target = &ks->parts[store_write_target(ks, row)];
	store_part_will_write(ks, target);
	if (row->state != KEY_ABSENT && target == &ks->parts[row->part])
	{
		LockTupleMode lockmode;

		result = dedup_heap_update(target->heap, &row->tid, tuple, cid,
								   InvalidSnapshot, false, &tmfd, &lockmode);
		if (result == TM_Ok && !HeapTupleIsHeapOnly(tuple))
			store_index_insert(ks, target, &tuple->t_self, fp, true);
	}
	else
	{
		/*
		 * A live row in an older bucket is deleted as its new version goes
		 * into a newer one: that bucket must be free to go once its rows have
		 * expired.  An expired row can stay: it never comes back.
		 */
		if (row->state != KEY_ABSENT && row->expires_at > ks->now)
			result = heap_delete(ks->parts[row->part].heap, &row->tid, cid,
								 InvalidSnapshot, false, &tmfd, false);
		if (result == TM_Ok)
		{
			heap_insert(target->heap, tuple, cid, 0, NULL);
			store_index_insert(ks, target, &tuple->t_self, fp, false);
		}
	}
	if (result == TM_BeingModified || result == TM_Updated || result == TM_Deleted)
	{
		heap_freetuple(tuple);
		store_changed_under_us(ks, fp, row, result, &tmfd, busy);
		return false;
	}
	if (result != TM_Ok)
		elog(ERROR, "unexpected status %u writing a dedup key", (unsigned) result);
	heap_freetuple(tuple);
	LockRelease(&row->tag, ExclusiveLock, false);
	ks->wrote = true;
	return true;
}

/*
 * Read the key's row as the active snapshot sees it, taking no lock and
 * writing nothing (for look-ups).
 */
KeyState
key_store_read(KeyStore *ks, const DedupFingerprint *fp, KeyRow *row)
{
	ScanKeyData skey;
	bool		probe[DEDUP_MAX_BUCKETS];

	memset(row, 0, sizeof(KeyRow));
	row->state = KEY_ABSENT;
	store_scankey(ks, &skey, fp);
	store_parts_for_key(ks, fp, probe);
	for (row->part = 0; row->part < ks->nparts; row->part++)
	{
		IndexScanDesc scan;
		bool		found;

		if (!probe[row->part])
			continue;
		scan = dedup_index_beginscan(ks->parts[row->part].heap, ks->parts[row->part].index,
									 GetActiveSnapshot(), 1, 0);
		index_rescan(scan, &skey, 1, NULL, 0);
		found = index_getnext_slot(scan, ForwardScanDirection, ks->slot);
		if (found)
		{
			store_row_from_slot(ks, row);
			row->state = store_row_state(ks, row);
		}
		index_endscan(scan);
		ExecClearTuple(ks->slot);
		if (found)
			break;
	}
	return row->state;
}

/*
 * Claim a key: true when it was absent or expired and is now claimed until
 * expires_at, false when a live row has it.  Waits for a transaction that
 * is writing the key, or with nowait reports it (55P03).
 */
bool
key_store_claim(KeyStore *ks, const DedupFingerprint *fp, TimestampTz expires_at,
				bool nowait)
{
	KeyBusyPolicy busy = nowait ? KEY_BUSY_ERROR : KEY_BUSY_WAIT;

	for (;;)
	{
		KeyRow		row;

		if (key_store_find(ks, fp, busy, &row) == KEY_LIVE ||
			key_store_history_seen(ks, fp, &row))
		{
			key_store_unlock(&row);
			return false;
		}
		Assert(row.state == KEY_ABSENT || row.state == KEY_EXPIRED);
		if (key_store_put(ks, fp, &row, expires_at, NULL, busy))
			return true;
	}
}

/*
 * Claim many keys, given sorted by fingerprint and each once: claimed[i]
 * says whether keys[i] was absent or expired and is now claimed until
 * expires_at.  The same protocol as key_store_claim(), key by key, except
 * that the new rows of up to STORE_BATCH_ROWS keys are written together
 * (32: few enough key locks held at once to stay within a backend's share
 * of the lock table, max_locks_per_transaction, 64 by default):
 * each such key's lock is held from its look-up until its row is written
 * (heap_multi_insert, then the index entries in key order).  Keys come in
 * fingerprint order, as every caller that holds several key locks takes
 * them, so two batches never wait for each other in a circle; and before
 * anything that may wait for a transaction (a key being written by one, a
 * row to replace in place) the rows held back are written and their locks
 * released, so that a key lock is still never held while its holder waits
 * for a transaction.
 */
#define STORE_BATCH_ROWS	32

typedef struct StoreBatch
{
	int			n;
	int			index[STORE_BATCH_ROWS];	/* into the caller's keys */
	LOCKTAG		tag[STORE_BATCH_ROWS];
	TupleTableSlot *slots[STORE_BATCH_ROWS];
} StoreBatch;

/* Write the rows held back by a batch claim, and release their key locks. */
static void
store_batch_flush(KeyStore *ks, StoreBatch *batch, const DedupFingerprint *keys)
{
	KeyStorePart *target = &ks->parts[ks->current];

	if (batch->n == 0)
		return;
	store_part_will_write(ks, target);
	heap_multi_insert(target->heap, batch->slots, batch->n, GetCurrentCommandId(true), 0, NULL);
	for (int i = 0; i < batch->n; i++)
		store_index_insert(ks, target, &batch->slots[i]->tts_tid, &keys[batch->index[i]], false);
	for (int i = 0; i < batch->n; i++)
	{
		LockRelease(&batch->tag[i], ExclusiveLock, false);
		ExecClearTuple(batch->slots[i]);
	}
	batch->n = 0;
	ks->wrote = true;
}

void
key_store_claim_batch(KeyStore *ks, const DedupFingerprint *keys, int nkeys,
					  TimestampTz expires_at, bool nowait, bool *claimed)
{
	StoreBatch	batch;

	Assert(ks->table != DEDUP_REL_STREAMS);
	batch.n = 0;
	for (int i = 0; i < STORE_BATCH_ROWS; i++)
		batch.slots[i] = MakeSingleTupleTableSlot(RelationGetDescr(ks->heap), &TTSOpsVirtual);

	for (int k = 0; k < nkeys; k++)
	{
		KeyRow		row;
		TupleTableSlot *slot;

		switch (key_store_find(ks, &keys[k], KEY_BUSY_RETURN, &row))
		{
			case KEY_LIVE:
				key_store_unlock(&row);
				claimed[k] = false;
				continue;
			case KEY_BUSY:
				/* may wait: as a single claim, with nothing held back */
				store_batch_flush(ks, &batch, keys);
				claimed[k] = key_store_claim(ks, &keys[k], expires_at, nowait);
				continue;
			case KEY_EXPIRED:
				if (key_store_history_seen(ks, &keys[k], &row))
				{
					key_store_unlock(&row);
					claimed[k] = false;
					continue;
				}
				if (row.part <= ks->current || row.expires_at > ks->now)
				{
					/*
					 * Replaced in place, or a released record's tombstone in
					 * an older bucket, deleted as its key moves on: writes
					 * that may wait, done as a single claim
					 */
					key_store_unlock(&row);
					store_batch_flush(ks, &batch, keys);
					claimed[k] = key_store_claim(ks, &keys[k], expires_at, nowait);
					continue;
				}

				/*
				 * an expired row in an older bucket stays: a new row, as when
				 * absent
				 */
				break;
			case KEY_ABSENT:
				if (key_store_history_seen(ks, &keys[k], &row))
				{
					key_store_unlock(&row);
					claimed[k] = false;
					continue;
				}
				break;
		}

		/* a new row in the current bucket, written with the next flush */
		slot = batch.slots[batch.n];
		slot->tts_values[Anum_key_key - 1] = PointerGetDatum(&keys[k]);
		slot->tts_isnull[Anum_key_key - 1] = false;
		slot->tts_values[Anum_key_expires_at - 1] = TimestampTzGetDatum(expires_at);
		slot->tts_isnull[Anum_key_expires_at - 1] = false;
		slot->tts_isnull[Anum_claims_record - 1] = true;
		if (slot->tts_tupleDescriptor->natts >= Anum_claims_history)
		{
			slot->tts_values[Anum_claims_history - 1] = Int32GetDatum(ks->history_id);
			slot->tts_isnull[Anum_claims_history - 1] = (ks->history_id == 0);
		}
		ExecStoreVirtualTuple(slot);
		batch.index[batch.n] = k;
		batch.tag[batch.n] = row.tag;
		batch.n++;
		claimed[k] = true;
		if (batch.n == STORE_BATCH_ROWS)
			store_batch_flush(ks, &batch, keys);
	}
	store_batch_flush(ks, &batch, keys);
	for (int i = 0; i < STORE_BATCH_ROWS; i++)
		ExecDropSingleTupleTableSlot(batch.slots[i]);
	if (ks->bucketed && ks->wrote)
		dedup_bucket_note_written(ks->parts[ks->current].number, ks->now, expires_at);
}
