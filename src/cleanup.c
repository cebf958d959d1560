/*-------------------------------------------------------------------------
 *
 * cleanup.c
 *	  The one place that knows what expires and deletes it: a cleanup pass
 *	  is a sequence of batches, each in its own transaction, and
 *	  dedup_cleanup_run_batch() runs one of them.  The background worker
 *	  (worker.c), the SQL function dedup_cleanup_batch() and the procedure
 *	  dedup_cleanup() (here, for pg_cron and psql) all run passes through it.
 *
 * Kinds of rows: claims and idempotency records, both in dedup.claims (a
 * processing record expires when its lease has passed by the scope's ttl,
 * store.c sets expires_at so, so abandoned records go the same way), and
 * the keys of outbox events past their topic's retention, in
 * dedup.outbox_keys, and published events, in the outbox's log
 * dedup.outbox (both of kind outbox), and the marks of streams idle for
 * their scope's retention, in dedup.streams.  A pass cleans dedup.claims,
 * then dedup.outbox_keys, then dedup.streams, then works on the buckets of
 * dedup.claims, then trims the outbox's log: a position's high 32 bits say
 * which (its stage), its low 32 bits the block, or the bucket step.
 *
 * dedup.claims is kept in time buckets (bucket.c).  A closed bucket goes
 * whole once every row in it has expired, one step of that work a batch:
 * no row of it is deleted.  Rows of the current bucket that expire while
 * it is still current (a ttl shorter than dedup.bucket_interval) are
 * deleted as the other tables' rows are, so that they do not wait for
 * their bucket to close; with buckets shorter than the ttls there are few
 * (by default a bucket's interval follows the ttls written into it), the
 * pass does not read the bucket before the first of its rows may have
 * expired (bucket.c notes the earliest expiry written into it), and
 * deletes none while the current bucket is due for the switch the pass
 * makes and its ttls are close (bucket.c): it is dropped soon after.
 * Claims of a scope with a history are the exception: they stay until
 * their bucket retires, which folds them into the history first: the
 * cleanup drives a bucket's retire, fold and drop, giving the bucket steps
 * the history tier's fold and expiry (history.c), which bucket.c, below
 * it, does not call.
 * A database still at 1.0 has no buckets: its dedup.claims is the current
 * one.  A step of the buckets' work that cannot get a lock in time is
 * rolled back alone and left to the next pass (cleanup_bucket_step); the
 * pass goes on.
 *
 * The key tables have no index on expires_at: every write would pay for
 * one.  Instead a cleanup pass reads the heap in block order with a TID
 * range scan, a few thousand blocks per batch, and deletes the rows it sees
 * expired.  Deletes touch no index (vacuum removes the index entries), so
 * a batch is sequential heap work only.
 *
 * A row is deleted only in the version this batch saw expired, by the
 * clock of the batch: when a claimer has replaced it meanwhile (or is
 * replacing it now), heap_delete reports the row updated or being modified
 * and the batch leaves it alone.  A batch never waits for another
 * transaction.
 *
 * Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/heapam.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/pg_type_d.h"
#include "executor/spi.h"
#include "executor/tuptable.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "pgstat.h"
#include "utils/builtins.h"
#include "storage/bufmgr.h"
#include "storage/latch.h"
#include "utils/acl.h"
#include "utils/memutils.h"
#include "utils/resowner.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

#include "bucket.h"
#include "catalog.h"
#include "checks.h"
#include "cleanup.h"
#include "cleanup_stats.h"
#include "history.h"
#include "settings.h"
#include "shards.h"
#include "store.h"

/* A batch reads at most this many blocks (32 MB), however few it deletes. */
#define CLEANUP_MAX_BLOCKS_PER_BATCH 4096

/* The tables a pass cleans, in order: its stages */
static const DedupRelation cleanup_stages[] = {
	DEDUP_REL_CLAIMS, DEDUP_REL_OUTBOX_KEYS, DEDUP_REL_STREAMS, DEDUP_REL_BUCKETS, DEDUP_REL_OUTBOX
};

#define CLEANUP_NSTAGES lengthof(cleanup_stages)

/*
 * A position: the block in its low 32 bits, the stage in the next 8, and on
 * a Citus cluster the ordinal of the shard of the stage's table on this
 * node above them.
 */
#define CLEANUP_STAGE_MASK	0xFF
#define CLEANUP_SHARD_SHIFT 40

/* A shard read to its end: the next batch starts at the next one. */
static void
cleanup_next_shard(DedupRelation table, int *shard, BlockNumber *position)
{
	if (*position == InvalidBlockNumber && dedup_catalog_relation_hashed(table))
	{
		(*shard)++;
		*position = 0;
	}
}

/*
 * Delete up to batch_size expired rows of a key table (dedup.claims or
 * dedup.outbox_keys, which have the same columns), reading it from block
 * *position on, and count them by kind in deleted[].  Sets *position to
 * where the next batch starts, or to InvalidBlockNumber when this batch
 * reached the end of the table.  On a Citus cluster, the table is its
 * shards on this node, and *shard the ordinal of the one being read.
 */
static int64
cleanup_key_table(DedupRelation table, int *shard, BlockNumber *position, int batch_size,
				  int64 deleted_by_kind[DEDUP_NUM_KINDS])
{
	Relation	rel = NULL;
	BlockNumber nblocks;
	BlockNumber start = *position;
	BlockNumber end;
	Snapshot	snapshot;
	TableScanDesc scan;
	TupleTableSlot *slot;
	ItemPointerData mintid;
	ItemPointerData maxtid;
	TimestampTz now = GetCurrentTimestamp();
	CommandId	cid = GetCurrentCommandId(true);
	int64		deleted = 0;

	/*
	 * A database whose extension is still at 1.0 has no dedup.streams; a
	 * cleanup role of 1.0's, granted DELETE on the other two tables only,
	 * goes on cleaning them and leaves the streams alone.
	 */
	if (!OidIsValid(dedup_catalog_relation_lookup(table)) ||
		(table == DEDUP_REL_STREAMS &&
		 pg_class_aclcheck(dedup_catalog_relation_lookup(table), GetUserId(), ACL_DELETE) != ACLCHECK_OK) ||
		(dedup_catalog_is_citus_worker() && !dedup_catalog_relation_hashed(table)))
	{
		*position = InvalidBlockNumber;
		return 0;
	}
	if (dedup_catalog_relation_hashed(table))
	{
		/*
		 * On a Citus cluster: the table's shards on this node, one after the
		 * other (a shard moved away meanwhile is skipped), so that each node
		 * cleans the shards it holds, and only those.
		 */
		Oid		   *shards = palloc(sizeof(Oid) * DEDUP_CLUSTER_MAX_LOCAL_SHARDS);
		int			nshards = dedup_shards_local_shards(table, shards, DEDUP_CLUSTER_MAX_LOCAL_SHARDS);

		while (rel == NULL && *shard < nshards)
		{
			rel = try_relation_open(shards[*shard], RowExclusiveLock);
			if (rel == NULL)
			{
				(*shard)++;
				start = 0;
			}
		}
		pfree(shards);
		if (rel == NULL)
		{
			*position = InvalidBlockNumber;
			return 0;
		}
	}
	else if (table == DEDUP_REL_CLAIMS)
	{
		/* the current bucket, where rows with a ttl shorter than it expire */
		rel = dedup_catalog_relation_open(table, RowExclusiveLock);
		table_close(rel, RowExclusiveLock);

		/*
		 * unless none of its rows can have expired yet, or it is due for a
		 * switch, which this pass makes, and its ttls are close: its rows
		 * then go with it soon, dropped whole
		 */
		if (dedup_bucket_storage() && dedup_bucket_skip_current())
		{
			*position = InvalidBlockNumber;
			return 0;
		}
		rel = dedup_bucket_open_current(RowExclusiveLock);
	}
	else
		rel = dedup_catalog_relation_open(table, RowExclusiveLock);
	nblocks = RelationGetNumberOfBlocks(rel);
	end = Min(nblocks, start + CLEANUP_MAX_BLOCKS_PER_BATCH);
	*position = end < nblocks ? end : InvalidBlockNumber;
	if (start >= nblocks)
	{
		table_close(rel, RowExclusiveLock);
		cleanup_next_shard(table, shard, position);
		return 0;
	}

	snapshot = RegisterSnapshot(GetTransactionSnapshot());
	ItemPointerSet(&mintid, start, FirstOffsetNumber);
	ItemPointerSet(&maxtid, end - 1, MaxOffsetNumber);
	scan = table_beginscan_tidrange(rel, snapshot, &mintid, &maxtid);
	slot = table_slot_create(rel, NULL);

	while (table_scan_getnextslot_tidrange(scan, ForwardScanDirection, slot))
	{
		bool		isnull;
		ItemPointerData tid;
		TM_FailureData tmfd;

		CHECK_FOR_INTERRUPTS();
		if (DatumGetTimestampTz(slot_getattr(slot, Anum_key_expires_at, &isnull)) > now)
			continue;

		/*
		 * a claim of a scope with a history goes with its bucket, folded
		 * (history.c)
		 */
		if (table == DEDUP_REL_CLAIMS && slot->tts_tupleDescriptor->natts >= Anum_claims_history &&
			!slot_attisnull(slot, Anum_claims_history))
			continue;
		tid = slot->tts_tid;
		if (heap_delete(rel, &tid, cid, InvalidSnapshot, false, &tmfd, false) == TM_Ok)
		{
			deleted++;
			if (table == DEDUP_REL_OUTBOX_KEYS)
				deleted_by_kind[DEDUP_KIND_OUTBOX]++;
			else if (table == DEDUP_REL_STREAMS)
				deleted_by_kind[DEDUP_KIND_STREAM]++;
			else if (slot_attisnull(slot, Anum_claims_record))
				deleted_by_kind[DEDUP_KIND_CLAIM]++;
			else
				deleted_by_kind[DEDUP_KIND_RECORD]++;
		}
		/* else: re-claimed, being re-claimed, or deleted by another cleanup */

		if (deleted >= batch_size)
		{
			/* the rest of this block, and on, is the next batch's */
			*position = ItemPointerGetBlockNumber(&tid);
			break;
		}
	}

	ExecDropSingleTupleTableSlot(slot);
	table_endscan(scan);
	UnregisterSnapshot(snapshot);
	table_close(rel, RowExclusiveLock);
	if (deleted > 0)
		CommandCounterIncrement();	/* the rest of the statement sees the
									 * deletes */
	cleanup_next_shard(table, shard, position);
	return deleted;
}

/*
 * Published events out of the outbox's log: up to batch_size of them, of
 * its partitions here (one server has one; a Citus node those of the shards
 * it holds), by
 * dedup.outbox_trim() (sql/functions/outbox_admin.sql), run as the owner of the
 * outbox, as the relay's functions are (a cleanup role need not be allowed
 * to delete from it).  Sets *done when fewer went, or when the database's
 * extension is still at 1.0, whose acks deleted their events.
 */
static int64
cleanup_outbox_log(int batch_size, bool *done)
{
	Oid			owner;
	Oid			save_userid;
	int			save_sec_context;
	DedupFingerprint *parts;
	bool	   *local;
	int			nparts;
	Oid			argtypes[2];
	Datum		args[2];
	bool		isnull;
	int64		deleted = 0;

	if (!OidIsValid(dedup_catalog_relation_lookup(DEDUP_REL_OUTBOX_TOPICS)) ||
		(!dedup_catalog_relation_hashed(DEDUP_REL_OUTBOX) && dedup_catalog_is_citus_worker()))
	{
		*done = true;
		return 0;
	}
	if (dedup_catalog_relation_hashed(DEDUP_REL_OUTBOX))
		nparts = dedup_shards_partitions(&parts, &local);
	else
	{
		nparts = 1;
		parts = palloc(sizeof(DedupFingerprint));
		local = palloc(sizeof(bool));
		dedup_shards_outbox_part(0, parts);
		local[0] = true;
	}
	owner = dedup_catalog_relation_owner(DEDUP_REL_OUTBOX);
	argtypes[0] = dedup_catalog_fingerprint_type();
	argtypes[1] = INT4OID;
	GetUserIdAndSecContext(&save_userid, &save_sec_context);
	SetUserIdAndSecContext(owner, save_sec_context | SECURITY_LOCAL_USERID_CHANGE);
	SPI_connect();
	for (int i = 0; i < nparts && deleted < batch_size; i++)
	{
		if (!local[i])
			continue;
		args[0] = PointerGetDatum(&parts[i]);
		args[1] = Int32GetDatum(batch_size - (int32) deleted);
		if (SPI_execute_with_args("SELECT dedup.outbox_trim($1, $2)", 2, argtypes, args, NULL,
								  false, 1) != SPI_OK_SELECT || SPI_processed != 1)
			elog(ERROR, "could not trim the outbox's log");
		deleted += DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1,
											   &isnull));
	}
	SPI_finish();
	SetUserIdAndSecContext(save_userid, save_sec_context);
	*done = deleted < batch_size;
	return deleted;
}

/* The buckets' steps, by number, for messages (bucket.c). */
static const char *const cleanup_bucket_steps[DEDUP_BUCKET_NSTEPS] = {
	"open", "switch", "seal", "retire", "drop"
};

/*
 * One step of the work on buckets, in a subtransaction: a step that cannot
 * get a lock in time (lock_timeout: the worker's is 100 ms) is rolled back
 * alone, logged, counted as an error of the figures (cleanup_stats.c), and
 * left to the next pass (so is one that cannot reach a node of a Citus
 * cluster: bucket.c), and the pass goes on with the next step and the
 * next stages (the outbox's log, which would otherwise never be trimmed
 * while one call holds the step back).  Any other error is raised.
 */
static int64
cleanup_bucket_step(int step, int64 removed[DEDUP_NUM_KINDS])
{
	MemoryContext oldcontext = CurrentMemoryContext;
	ResourceOwner oldowner = CurrentResourceOwner;
	int64		step_removed[DEDUP_NUM_KINDS] = {0};
	int64		total = 0;

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(oldcontext);
	PG_TRY();
	{
		total = dedup_bucket_step(step, step_removed, dedup_history_fold,
								  dedup_history_expire);
		ReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(oldcontext);
		CurrentResourceOwner = oldowner;
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(oldcontext);
		edata = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(oldcontext);
		CurrentResourceOwner = oldowner;

		/*
		 * on a Citus cluster, a node that cannot be reached: the next pass
		 * too
		 */
		if (edata->sqlerrcode != ERRCODE_LOCK_NOT_AVAILABLE &&
			(edata->sqlerrcode & 0xFFF) != (ERRCODE_CONNECTION_FAILURE & 0xFFF))	/* class 08 */
			ReThrowError(edata);
		ereport(LOG,
				(errcode(edata->sqlerrcode),
				 errmsg("dedup cleanup leaves the %s step of the buckets of dedup.claims to its next pass",
						cleanup_bucket_steps[step]),
				 errdetail_internal("%s", edata->message)));
		FreeErrorData(edata);
		dedup_cleanup_stats_note_skipped();
		return 0;
	}
	PG_END_TRY();
	for (int k = 0; k < DEDUP_NUM_KINDS; k++)
		removed[k] += step_removed[k];
	return total;
}

/*
 * Where a pass goes on after a batch at position failed: the start of the
 * next stage, or DEDUP_CLEANUP_DONE after the last.  The stages are
 * independent: one that cannot go on (a lock not granted in time) does not
 * hold back the others.
 */
int64
dedup_cleanup_next_stage(int64 position)
{
	uint32		stage = (uint32) ((position >> 32) & CLEANUP_STAGE_MASK);

	return stage + 1 < CLEANUP_NSTAGES ? (int64) (stage + 1) << 32 : DEDUP_CLEANUP_DONE;
}

/* Whether a position is one a pass can be at. */
bool
dedup_cleanup_position_valid(int64 position)
{
	return position >= 0 && ((position >> 32) & CLEANUP_STAGE_MASK) < (int64) CLEANUP_NSTAGES &&
		(position >> CLEANUP_SHARD_SHIFT) < DEDUP_CLUSTER_MAX_LOCAL_SHARDS &&
		(position & 0xFFFFFFFF) <= MaxBlockNumber;
}

/*
 * One batch of a cleanup pass, in the current transaction, which must be
 * able to write (not read-only, not on a standby): deletes up to
 * batch_size expired rows from *position on, counts them in the figures
 * (cleanup_stats.c) and sets *position to where the next batch starts, or to
 * DEDUP_CLEANUP_DONE.  A batch stays within one stage.
 */
int64
dedup_cleanup_run_batch(int64 *position, int batch_size)
{
	int64		deleted_by_kind[DEDUP_NUM_KINDS] = {0};
	bool		pass_start = (*position == 0);
	uint32		stage = (uint32) ((*position >> 32) & CLEANUP_STAGE_MASK);
	int			shard = (int) (*position >> CLEANUP_SHARD_SHIFT);
	BlockNumber block = (BlockNumber) (*position & 0xFFFFFFFF);
	int64		deleted;

	Assert(dedup_cleanup_position_valid(*position));
	dedup_check_writable("dedup_cleanup_batch");
	dedup_cleanup_stats_begin_batch(pass_start);
	if (cleanup_stages[stage] == DEDUP_REL_BUCKETS)
	{
		/* the buckets of dedup.claims: a step of their work a batch */
		deleted = block < DEDUP_BUCKET_NSTEPS && dedup_bucket_storage() ?
			cleanup_bucket_step((int) block, deleted_by_kind) : 0;
		block = block + 1 < DEDUP_BUCKET_NSTEPS ? block + 1 : InvalidBlockNumber;
	}
	else if (cleanup_stages[stage] == DEDUP_REL_OUTBOX)
	{
		bool		done;

		deleted = cleanup_outbox_log(batch_size, &done);
		deleted_by_kind[DEDUP_KIND_OUTBOX] += deleted;
		block = done ? InvalidBlockNumber : 0;
	}
	else
		deleted = cleanup_key_table(cleanup_stages[stage], &shard, &block, batch_size, deleted_by_kind);
	if (block != InvalidBlockNumber)
		*position = ((int64) shard << CLEANUP_SHARD_SHIFT) | ((int64) stage << 32) | block;
	else if (stage + 1 < CLEANUP_NSTAGES)
		*position = (int64) (stage + 1) << 32;
	else
		*position = DEDUP_CLEANUP_DONE;
	dedup_cleanup_stats_end_batch(*position == DEDUP_CLEANUP_DONE, deleted_by_kind);
	return deleted;
}

/*
 * dedup_cleanup_batch(position bigint DEFAULT 0, batch_size integer DEFAULT NULL,
 *					   OUT deleted bigint, OUT next_position bigint)
 *
 * One batch of cleanup in the caller's transaction.  next_position is NULL
 * when the pass is complete; a NULL batch_size means dedup.cleanup_batch_size.
 */
PG_FUNCTION_INFO_V1(dedup_cleanup_batch);
Datum
dedup_cleanup_batch(PG_FUNCTION_ARGS)
{
	int64		position = PG_ARGISNULL(0) ? 0 : PG_GETARG_INT64(0);
	int32		batch_size;
	int64		deleted;
	TupleDesc	tupdesc;
	Datum		values[2];
	bool		nulls[2] = {false, false};

	if (!dedup_cleanup_position_valid(position))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%lld is not a cleanup position", (long long) position),
				 errhint("Start a pass at 0 and pass back the next_position each batch returns.")));
	batch_size = PG_ARGISNULL(1) ? dedup_cleanup_batch_size : PG_GETARG_INT32(1);
	if (batch_size < 1 || batch_size > DEDUP_MAX_CLEANUP_BATCH)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("batch_size must be between 1 and %d", DEDUP_MAX_CLEANUP_BATCH)));

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");

	deleted = dedup_cleanup_run_batch(&position, batch_size);
	values[0] = Int64GetDatum(deleted);
	if (position == DEDUP_CLEANUP_DONE)
		nulls[1] = true;
	else
		values[1] = Int64GetDatum(position);
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(tupdesc), values, nulls)));
}

/*
 * dedup_cleanup(batch_size integer DEFAULT NULL, INOUT deleted bigint DEFAULT NULL)
 *
 * The procedure: a whole pass, each batch committed, dedup.cleanup_pause
 * (read before each pause) between batches; deleted on output is the rows
 * the pass deleted.  Its commits need a non-atomic CALL (at top level
 * outside a transaction block, or from a procedure or DO block so called):
 * any other call is refused before anything is done, with the way to clean
 * up inside a transaction instead, rather than failing at the first commit
 * with PostgreSQL's bare "invalid transaction termination".  Batches
 * committed before an error stay committed.
 */
PG_FUNCTION_INFO_V1(dedup_cleanup_procedure);
Datum
dedup_cleanup_procedure(PG_FUNCTION_ARGS)
{
	CallContext *call = fcinfo->context && IsA(fcinfo->context, CallContext) ?
		(CallContext *) fcinfo->context : NULL;
	int32		batch_size;
	int64		position = 0;
	int64		deleted = 0;
	TupleDesc	tupdesc;
	Datum		values[1];
	bool		nulls[1] = {false};

	batch_size = PG_ARGISNULL(0) ? dedup_cleanup_batch_size : PG_GETARG_INT32(0);
	if (batch_size < 1 || batch_size > DEDUP_MAX_CLEANUP_BATCH)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("batch_size must be between 1 and %d", DEDUP_MAX_CLEANUP_BATCH)));
	if (call == NULL || call->atomic)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TRANSACTION_TERMINATION),
				 errmsg("dedup_cleanup() cannot run inside a transaction block or a function"),
				 errdetail("It commits after each batch of the pass."),
				 errhint("CALL dedup_cleanup() outside a transaction block, or clean up in the current "
						 "transaction with dedup_cleanup_batch(): start at position 0 and pass back "
						 "the next_position each batch returns until it is NULL.")));
	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	tupdesc = BlessTupleDesc(tupdesc);

	/* SPI only for its commit, which keeps the CALL's portal */
	if (SPI_connect_ext(SPI_OPT_NONATOMIC) != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect_ext failed");
	for (;;)
	{
		PushActiveSnapshot(GetTransactionSnapshot());
		deleted += dedup_cleanup_run_batch(&position, batch_size);
		PopActiveSnapshot();
		SPI_commit();
		if (position == DEDUP_CLEANUP_DONE)
			break;
		if (dedup_cleanup_pause > 0)
		{
			TimestampTz until = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
															dedup_cleanup_pause);

			for (;;)
			{
				long		ms = TimestampDifferenceMilliseconds(GetCurrentTimestamp(), until);

				CHECK_FOR_INTERRUPTS();
				if (ms <= 0)
					break;
				(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
								 ms, PG_WAIT_EXTENSION);
				ResetLatch(MyLatch);
			}
		}
	}
	SPI_finish();

	values[0] = Int64GetDatum(deleted);
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
}
