/*-------------------------------------------------------------------------
 *
 * outbox.c
 *	  dedup_outbox_put(): an event into the transactional outbox, inside the
 *	  caller's business transaction; and dedup_outbox_relay(), the C entry
 *	  of the relay's functions (take, ack, nack, redrive, figures), whose
 *	  work is PL/pgSQL in schema dedup (sql/functions/outbox.sql).
 *
 * The event's id is the fingerprint of (topic, key) made a UUID (version 8:
 * 122 of its 128 bits), so a put returns it either way without a look-up.
 * The log's primary key on the id is the outbox's idempotency: the row
 * stays in the log for the topic's retention (the cleanup deletes an event
 * only once it is published and older than that), so the same key within
 * retention yields one event and a retried producer transaction never
 * publishes twice; an event held in dedup.outbox_retry, or dead, counts as
 * there too.  Keys put by 1.0 are in dedup.outbox_keys until their
 * retention passes, and are looked up there while it has any; a database
 * whose extension is still at 1.0 (the library updated first) keeps its
 * new keys there too, as 1.0 did.
 *
 * The event row is written into the log and its indexes directly, without
 * SPI or the executor (outbox_insert_direct(), as store.c writes claims):
 * the put's look-ups, its locks and its insert are all C.  Where the log
 * has something the direct path does not know (a trigger, row security, a
 * column of its own, an index on an expression or with a predicate), on a
 * Citus cluster (where the row goes to the partition's shard) and in a
 * database still at 1.0, the row is inserted through SPI as the owner of
 * dedup.outbox.  Either way producers need EXECUTE on this function and no
 * table privilege.
 *
 * Producers of one aggregate are serialized until they commit by a lock
 * taken before the event gets its sequence number: within an aggregate,
 * sequence order is commit order, which is the order the relay hands
 * events out in.  Every producer of a topic also holds a lock of the topic
 * (RowExclusiveLock, which producers share) from before its event gets its
 * sequence number until it commits: dedup_outbox_stable_seq() reads the
 * sequence, then waits for the holders of that lock, after which every
 * number up to what it read is settled (committed or rolled back), and a
 * relay may read the log up to it without passing an event that could
 * still commit.  The lock is one of OUTBOX_LOCK_STRIPES, chosen by a hash
 * of (topic, aggregate id), so that a transaction that puts events of
 * thousands of aggregates holds at most that many locks (a lock per
 * aggregate would exhaust the lock table); two producers of different
 * aggregates on one stripe wait for each other (and two transactions that
 * put events of several aggregates can deadlock, 40P01, as with row locks).
 * A put without an aggregate id is the aggregate of its key, and locks it
 * too: another put may name that key as its aggregate.
 *
 * The relay's functions run their PL/pgSQL counterparts as the owner of
 * dedup.outbox, as SECURITY DEFINER would, but pass them the role that
 * called, so that they check its relay privilege on every topic they touch
 * (a SECURITY DEFINER function cannot know its caller).  A batch's id
 * names no topic and is easily guessed: an ack or nack of a batch of a
 * topic the caller may not relay answers as one of a batch not handed out,
 * checked before anything is written, naming nothing.
 *
 * The outbox is kept in partitions (sql/tables/outbox.sql): every row of
 * the relay's tables names its partition, part, and an event goes to the
 * partition of its aggregate, outbox_partition().  On one server there is
 * one, number 0.  A batch's id carries its partition's number.
 *
 * A new event notifies channel dedup_outbox with the topic as payload;
 * PostgreSQL folds a transaction's identical notifications into one, so
 * relays are woken once per committing transaction and topic.
 *
 * Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "common/hashfn.h"
#include "funcapi.h"
#include "catalog/pg_proc_d.h"
#include "catalog/pg_type_d.h"
#include "commands/async.h"
#include "commands/sequence.h"
#include "catalog/index.h"
#include "access/heapam.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "access/stratnum.h"
#include "storage/bufmgr.h"
#include "storage/lmgr.h"
#include "storage/lock.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/snapmgr.h"
#include "utils/fmgrprotos.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/timestamp.h"
#include "utils/memutils.h"
#include "utils/uuid.h"

#include "catalog.h"
#include "checks.h"
#include "fingerprint.h"
#include "routing.h"
#include "scope.h"
#include "scope_counters.h"
#include "shards.h"
#include "store.h"

/* The channel relays LISTEN on. */
#define OUTBOX_CHANNEL "dedup_outbox"

/* The number of producer locks (their lock tag class is in store.h) */
#define OUTBOX_LOCK_STRIPES 1024

#define OUTBOX_INSERT_NARGS 8

/* A batch's id: partition number, slot and generation (outbox_batch_id) */
#define OUTBOX_BATCH_PART_SHIFT 47
#define OUTBOX_BATCH_SLOT_SHIFT 31
#define OUTBOX_BATCH_MAX_PART DEDUP_OUTBOX_MAX_PARTITION
#define OUTBOX_BATCH_MAX_SLOT 65535

/* The insert's kept plans: for a 1.1 database, and for one still at 1.0 */
static SPIPlanPtr outbox_insert_plans[2];
/* The kept plan of the sequence check on a cluster */
static SPIPlanPtr outbox_last_seq_plan = NULL;
/* The fingerprint type the kept plans were made with (outbox_plans_check) */
static Oid	outbox_plans_type = InvalidOid;

/*
 * Make a fingerprint an RFC 9562 version 8 UUID in place: it is then both
 * the event's id and its key in dedup.outbox_keys.
 */
static void
outbox_event_key(DedupFingerprint *fp)
{
	StaticAssertStmt(sizeof(pg_uuid_t) == DEDUP_FINGERPRINT_LEN,
					 "a fingerprint is as long as a uuid");
	fp->bytes[6] = (fp->bytes[6] & 0x0f) | 0x80;	/* version 8 */
	fp->bytes[8] = (fp->bytes[8] & 0x3f) | 0x80;	/* variant 10 */
}

/* The number of a partition, from its part. */
static uint32
outbox_part_number(const DedupFingerprint *part)
{
	return ((uint32) part->bytes[0] << 24) | ((uint32) part->bytes[1] << 16) |
		((uint32) part->bytes[2] << 8) | (uint32) part->bytes[3];
}

/* Whether the outbox is distributed by Citus (dedup_distribute()). */
static bool
outbox_distributed(void)
{
	return dedup_relation_hashed(DEDUP_REL_OUTBOX);
}

/*
 * The partition the events of an aggregate go to: on one server, the one
 * there is; on a Citus cluster, that of the shard of dedup.claims that
 * holds the aggregate's key, the fingerprint of (topic, aggregate id), so
 * that a business table distributed by dedup_key(topic, aggregate id) has
 * its rows in the same shard as the aggregate's events.
 */
static void
outbox_partition(const text *topic, text *aggregate_id, DedupFingerprint *part)
{
	if (outbox_distributed())
	{
		DedupFingerprint afp;

		dedup_key_datum(PointerGetDatum(aggregate_id), -1, topic, &afp);
		dedup_cluster_partition(&afp, part);
	}
	else
		dedup_outbox_part(0, part);
}

/*
 * dedup.outbox_batch_id(in_part dedup_fingerprint, slot integer,
 *						 generation integer) RETURNS bigint
 *
 * A batch's id: its partition's number times 2^47, plus its slot's times
 * 2^31, plus the slot's generation (below 2^31).
 */
PG_FUNCTION_INFO_V1(dedup_outbox_batch_id);
Datum
dedup_outbox_batch_id(PG_FUNCTION_ARGS)
{
	uint32		number = outbox_part_number(PG_GETARG_DEDUP_FINGERPRINT_P(0));
	int32		slot = PG_GETARG_INT32(1);
	int32		generation = PG_GETARG_INT32(2);

	if (number > OUTBOX_BATCH_MAX_PART || slot < 0 || slot > OUTBOX_BATCH_MAX_SLOT ||
		generation < 0)
		elog(ERROR, "an outbox batch of partition %u, slot %d and generation %d has no id",
			 number, slot, generation);
	PG_RETURN_INT64(((int64) number << OUTBOX_BATCH_PART_SHIFT) |
					((int64) slot << OUTBOX_BATCH_SLOT_SHIFT) | generation);
}

/* The partition of a batch's id: false if no batch can have that id. */
static bool
outbox_batch_part(int64 batch_id, DedupFingerprint *part)
{
	if (batch_id < 0)
		return false;
	dedup_outbox_part((uint32) (batch_id >> OUTBOX_BATCH_PART_SHIFT), part);
	return true;
}

/*
 * Serialize the producers of one aggregate until the end of the
 * transaction: the lock of the aggregate's stripe.
 */
static void
outbox_lock_aggregate(const text *topic, text *aggregate_id)
{
	DedupFingerprint afp;
	LOCKTAG		tag;
	uint32		stripe;

	dedup_key_datum(PointerGetDatum(aggregate_id), -1, topic, &afp);
	memcpy(&stripe, afp.bytes, sizeof(stripe));
	SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, stripe % OUTBOX_LOCK_STRIPES, 0,
						 DEDUP_LOCKTAG_AGGREGATE);
	(void) LockAcquire(&tag, ExclusiveLock, false, false);
}

/* An optional text argument: NULL when not given, an error when empty. */
static text *
outbox_text_arg(FunctionCallInfo fcinfo, int argno, const char *what)
{
	text	   *value;

	if (PG_ARGISNULL(argno))
		return NULL;
	value = PG_GETARG_TEXT_PP(argno);
	if (VARSIZE_ANY_EXHDR(value) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must not be empty", what)));
	return value;
}

/* The lock of a topic its producers hold (see the header comment). */
static void
outbox_topic_locktag(LOCKTAG *tag, const text *topic)
{
	uint32		h = hash_bytes((const unsigned char *) VARDATA_ANY(topic),
							   VARSIZE_ANY_EXHDR(topic));

	SET_LOCKTAG_ADVISORY(*tag, MyDatabaseId, h, 0, DEDUP_LOCKTAG_TOPIC);
}

/*
 * Whether a key put by 1.0 is still kept, in dedup.outbox_keys (which a
 * database created at 1.1 never fills): read only while the table has
 * pages.
 */
static bool
outbox_legacy_key(const text *topic, const DedupFingerprint *fp)
{
	Relation	keys = dedup_relation_open(DEDUP_REL_OUTBOX_KEYS, AccessShareLock);
	bool		empty = RelationGetNumberOfBlocks(keys) == 0;
	KeyStore	ks;
	KeyRow		row;
	KeyState	state;

	table_close(keys, NoLock);
	if (empty)
		return false;
	key_store_open(&ks, DEDUP_REL_OUTBOX_KEYS, topic, NULL, false);
	state = key_store_read(&ks, fp, &row);
	key_store_close(&ks);
	return state == KEY_LIVE;
}

/*
 * Whether the log has the event of this id, committed or written by a
 * transaction in progress (waited for, then looked up again), with the
 * event's lock taken, which the caller holds until it has inserted the
 * event or found it: so two puts of one id never both insert it, without
 * the speculative insertion of ON CONFLICT and its WAL record.  A row
 * inserted by this transaction counts; one a REPEATABLE READ or
 * SERIALIZABLE snapshot cannot see is 40001, as for a claim.
 */
/*
 * Open a table of the outbox keyed by event id (the log, outbox_retry,
 * outbox_dead) and its primary key: on a cluster, the partition's shard
 * here, under Citus's lock of it.
 */
static void
outbox_open(DedupRelation table, const DedupFingerprint *part, Relation *heap, Relation *index)
{
	if (outbox_distributed())
		dedup_cluster_shard_open(table, part, AccessShareLock, heap, index);
	else
	{
		*heap = dedup_relation_open(table, AccessShareLock);
		*index = index_open(dedup_relation_oid(table == DEDUP_REL_OUTBOX ?
											   DEDUP_REL_OUTBOX_PKEY : table + 1),
							AccessShareLock);
	}
}

/*
 * The scan keys of an event's id in such a primary key, (id) on one server,
 * (part, id) where distributed (dedup_distribute()); returns how many.
 */
static int
outbox_id_scankeys(Relation index, const DedupFingerprint *part, const pg_uuid_t *id,
				   ScanKey skey)
{
	int			nkeys = IndexRelationGetNumberOfKeyAttributes(index);

	if (nkeys == 2)
	{
		Oid			part_eq = get_opfamily_member(index->rd_opfamily[0], index->rd_opcintype[0],
												  index->rd_opcintype[0], BTEqualStrategyNumber);

		ScanKeyEntryInitialize(&skey[0], 0, 1, BTEqualStrategyNumber, InvalidOid,
							   index->rd_indcollation[0], get_opcode(part_eq),
							   PointerGetDatum(part));
	}
	ScanKeyInit(&skey[nkeys - 1], nkeys, BTEqualStrategyNumber, F_UUID_EQ, UUIDPGetDatum(id));
	return nkeys;
}

/*
 * Whether outbox_retry or outbox_dead (table) holds the event of this id,
 * as the statement's snapshot sees it: such an event is not put again.
 */
static bool
outbox_event_held(DedupRelation table, const DedupFingerprint *part, const pg_uuid_t *id)
{
	Relation	heap;
	Relation	index;
	ScanKeyData skey[2];
	int			nkeys;
	TupleTableSlot *slot;
	IndexScanDesc scan;
	bool		found;

	outbox_open(table, part, &heap, &index);
	nkeys = outbox_id_scankeys(index, part, id, skey);
	slot = table_slot_create(heap, NULL);
	scan = index_beginscan(heap, index, GetActiveSnapshot(), nkeys, 0);
	index_rescan(scan, skey, nkeys, NULL, 0);
	found = index_getnext_slot(scan, ForwardScanDirection, slot);
	index_endscan(scan);
	ExecDropSingleTupleTableSlot(slot);
	index_close(index, NoLock);
	table_close(heap, NoLock);
	return found;
}

static bool
outbox_event_exists(const DedupFingerprint *part, const pg_uuid_t *id, LOCKTAG *tag)
{
	Relation	heap;
	Relation	index;
	TupleTableSlot *slot;
	SnapshotData dirty;
	ScanKeyData skey[2];
	int			nkeys;
	IndexScanDesc scan;
	bool		found;
	uint32		hi;
	uint32		lo;

	outbox_open(DEDUP_REL_OUTBOX, part, &heap, &index);
	slot = table_slot_create(heap, NULL);
	memcpy(&hi, id->data, sizeof(hi));
	memcpy(&lo, id->data + sizeof(hi), sizeof(lo));
	SET_LOCKTAG_ADVISORY(*tag, MyDatabaseId, hi, lo, DEDUP_LOCKTAG_EVENT);
	InitDirtySnapshot(dirty);
	nkeys = outbox_id_scankeys(index, part, id, skey);
	scan = index_beginscan(heap, index, &dirty, nkeys, 0);
	for (;;)
	{
		TransactionId xwait = InvalidTransactionId;
		uint32		spec_token = 0;

		CHECK_FOR_INTERRUPTS();
		(void) LockAcquire(tag, ExclusiveLock, false, false);
		index_rescan(scan, skey, nkeys, NULL, 0);
		found = index_getnext_slot(scan, ForwardScanDirection, slot);
		if (found && (TransactionIdIsValid(dirty.xmin) || TransactionIdIsValid(dirty.xmax)))
		{
			xwait = TransactionIdIsValid(dirty.xmin) ? dirty.xmin : dirty.xmax;
			spec_token = dirty.speculativeToken;
		}
		if (!TransactionIdIsValid(xwait))
			break;
		/* a transaction in progress inserts (or deletes) it: wait, look again */
		LockRelease(tag, ExclusiveLock, false);
		if (spec_token)
			SpeculativeInsertionWait(xwait, spec_token);
		else
			XactLockTableWait(xwait, heap, &slot->tts_tid, XLTW_InsertIndexUnique);
	}
	if (found && IsolationUsesXactSnapshot() &&
		!table_tuple_satisfies_snapshot(heap, slot, GetTransactionSnapshot()))
		ereport(ERROR,
				(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
				 errmsg("could not serialize access due to concurrent put")));
	index_endscan(scan);
	ExecDropSingleTupleTableSlot(slot);
	index_close(index, NoLock);
	table_close(heap, NoLock);
	return found;
}

static bool outbox_partition_last_seq(const DedupFingerprint *part, text *topic, int64 *last);
static void outbox_plans_check(void);
static bool outbox_insert_direct(const DedupFingerprint *part, pg_uuid_t *id, text *topic,
								 text *aggregate_type, text *aggregate_id, text *type,
								 Jsonb *payload, Jsonb *headers);

/*
 * On a Citus cluster, the outbox's sequence is this node's (Citus gives each
 * node a range of it), and a partition may have come here from a node whose
 * range is higher: before an event of the partition gets its number, the
 * sequence is moved past every number the topic's log in the partition has
 * used or passed, so that the log's order, and the topic's position in it,
 * hold.  Backends catching up at once take turns on the sequence's
 * ShareUpdateExclusiveLock (which conflicts with itself, not with nextval's
 * RowExclusiveLock) and read its last value again under it, so a later one
 * never moves it back below numbers already taken after an earlier one's
 * setval().  It is moved OUTBOX_SEQ_CATCH_UP_GAP further still: a put's
 * nextval() is not atomic with the check, and the numbers other puts take
 * meanwhile (fewer than that) stay below the new ones.  The lock is let go
 * at once, as setval() itself is not transactional.  Inside SPI, as the
 * owner of the outbox.
 */
#define OUTBOX_SEQ_CATCH_UP_GAP INT64CONST(1048576)

static void
outbox_sequence_catch_up(const DedupFingerprint *part, text *topic)
{
	static uint64 checked_generation = 0;
	static List *checked = NIL;		/* "number/topic" caught up, in TopMemoryContext */
	Oid			seq = dedup_relation_lookup(DEDUP_REL_OUTBOX_SEQ);
	int64		used;
	LOCAL_FCINFO(seqinfo, 1);
	Datum		last;
	char	   *name = psprintf("%u/%s", outbox_part_number(part), text_to_cstring(topic));
	ListCell   *lc;
	MemoryContext old;

	/*
	 * Once per backend, partition and topic while the shard maps stand: a
	 * partition comes here only with a shard move, which resets them
	 */
	if (checked_generation != dedup_cluster_generation() || list_length(checked) > 1000)
	{
		list_free_deep(checked);
		checked = NIL;
		checked_generation = dedup_cluster_generation();
	}
	foreach(lc, checked)
		if (strcmp((char *) lfirst(lc), name) == 0)
			return;
	if (outbox_partition_last_seq(part, topic, &used))
	{
		InitFunctionCallInfoData(*seqinfo, NULL, 1, InvalidOid, NULL, NULL);
		seqinfo->args[0].value = ObjectIdGetDatum(seq);
		seqinfo->args[0].isnull = false;
		last = pg_sequence_last_value(seqinfo);
		if (seqinfo->isnull || DatumGetInt64(last) < used)
		{
			LockRelationOid(seq, ShareUpdateExclusiveLock);
			seqinfo->isnull = false;
			last = pg_sequence_last_value(seqinfo);
			if (seqinfo->isnull || DatumGetInt64(last) < used)
				(void) DirectFunctionCall2(setval_oid, ObjectIdGetDatum(seq),
										   Int64GetDatum(used + OUTBOX_SEQ_CATCH_UP_GAP));
			UnlockRelationOid(seq, ShareUpdateExclusiveLock);
		}
	}
	old = MemoryContextSwitchTo(TopMemoryContext);
	checked = lappend(checked, pstrdup(name));
	MemoryContextSwitchTo(old);
}

/*
 * On a cluster, the last number the log of a topic in a partition used, or
 * its relays' position passed; false if neither.  Runs its own SPI.
 */
static bool
outbox_partition_last_seq(const DedupFingerprint *part, text *topic, int64 *last)
{
	Datum		args[2] = {PointerGetDatum(part), PointerGetDatum(topic)};
	bool		isnull;
	SPIPlanPtr	plan;

	SPI_connect();
	if (outbox_last_seq_plan == NULL)
	{
		char	   *eq = dedup_fingerprint_eq_sql();
		Oid			argtypes[2] = {dedup_fingerprint_type(), TEXTOID};

		plan = SPI_prepare(psprintf("SELECT GREATEST("
									" (SELECT o.seq FROM dedup.outbox AS o WHERE o.part %s $1"
									"  AND o.topic OPERATOR(pg_catalog.=) $2 ORDER BY o.seq DESC LIMIT 1),"
									" (SELECT t.next_seq OPERATOR(pg_catalog.-) 1 FROM dedup.outbox_topics AS t"
									"  WHERE t.part %s $1 AND t.topic OPERATOR(pg_catalog.=) $2))",
									eq, eq),
						   2, argtypes);
		if (plan == NULL)
			elog(ERROR, "could not prepare the outbox's sequence check: %s",
				 SPI_result_code_string(SPI_result));
		SPI_keepplan(plan);
		outbox_last_seq_plan = plan;
	}
	plan = outbox_last_seq_plan;
	if (SPI_execute_plan(plan, args, NULL, true, 1) != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "could not read the outbox partition's last number");
	*last = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	SPI_finish();
	return !isnull;
}

/*
 * Insert the event row, directly (outbox_insert_direct()) or through a
 * kept plan, as the owner of dedup.outbox; true if it was inserted.  The caller found no event of that id in the
 * log, outbox_retry or the dead letters.  The topic's producer lock is
 * taken first, before the row gets its seq.  A database whose extension is
 * still at 1.0 (the library updated, ALTER EXTENSION UPDATE not yet run)
 * has no outbox_retry, and its insert looks its dead letters and its keys
 * up itself.
 */
static bool
outbox_insert(bool at_1_0, const DedupFingerprint *part, pg_uuid_t *id, text *topic,
			  text *aggregate_type, text *aggregate_id, text *type, Jsonb *payload,
			  Jsonb *headers)
{
	Datum		values[OUTBOX_INSERT_NARGS];
	char		nulls[OUTBOX_INSERT_NARGS] = {' ', ' ', ' ', ' ', ' ', ' ', ' ', ' '};
	Oid			owner = dedup_relation_owner(DEDUP_REL_OUTBOX);
	Oid			save_userid;
	int			save_sec_context;
	bool		inserted;
	LOCKTAG		tag;

	outbox_topic_locktag(&tag, topic);
	(void) LockAcquire(&tag, RowExclusiveLock, false, false);
	if (!at_1_0 && !outbox_distributed() &&
		outbox_insert_direct(part, id, topic, aggregate_type, aggregate_id, type, payload,
							 headers))
		return true;
	GetUserIdAndSecContext(&save_userid, &save_sec_context);
	SetUserIdAndSecContext(owner, save_sec_context | SECURITY_LOCAL_USERID_CHANGE);
	SPI_connect();
	if (outbox_insert_plans[at_1_0] == NULL)
	{
		Oid			argtypes[OUTBOX_INSERT_NARGS] = {
			UUIDOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID, JSONBOID, JSONBOID,
			dedup_fingerprint_type()
		};
		SPIPlanPtr	plan;

		/*
		 * A database still at 1.0 has one outbox, with no partitions.  At
		 * 1.1 a plain VALUES: on a Citus cluster, a statement Citus routes
		 * without planning a query (about a fifth of the cost of the
		 * INSERT ... SELECT with its look-ups, measured)
		 */
		plan = SPI_prepare(at_1_0 ?
						   "INSERT INTO dedup.outbox"
						   " (id, topic, aggregatetype, aggregateid, type, payload, headers)"
						   " SELECT $1, $2, $3, $4, $5, $6, COALESCE($7, '{}'::pg_catalog.jsonb)"
						   " WHERE NOT EXISTS (SELECT FROM dedup.outbox_dead AS d"
						   "  WHERE d.id OPERATOR(pg_catalog.=) $1)"
						   " ON CONFLICT ON CONSTRAINT outbox_pkey DO NOTHING" :
						   "INSERT INTO dedup.outbox"
						   " (id, topic, aggregatetype, aggregateid, type, payload, headers, part)"
						   " VALUES ($1, $2, $3, $4, $5, $6, COALESCE($7, '{}'::pg_catalog.jsonb), $8)",
						   OUTBOX_INSERT_NARGS, argtypes);

		if (plan == NULL)
			elog(ERROR, "could not prepare the outbox insert: %s",
				 SPI_result_code_string(SPI_result));
		SPI_keepplan(plan);
		outbox_insert_plans[at_1_0] = plan;
	}
	values[0] = UUIDPGetDatum(id);
	values[1] = PointerGetDatum(topic);
	values[2] = PointerGetDatum(aggregate_type);
	values[3] = PointerGetDatum(aggregate_id);
	values[4] = PointerGetDatum(type);
	values[5] = PointerGetDatum(payload);
	values[6] = PointerGetDatum(headers);
	if (headers == NULL)
		nulls[6] = 'n';
	values[7] = PointerGetDatum(part);
	if (!at_1_0 && outbox_distributed())
		outbox_sequence_catch_up(part, topic);
	if (SPI_execute_plan(outbox_insert_plans[at_1_0], values, nulls, false, 0) != SPI_OK_INSERT)
		elog(ERROR, "could not insert an outbox event");
	inserted = (SPI_processed > 0);
	SPI_finish();
	SetUserIdAndSecContext(save_userid, save_sec_context);
	return inserted;
}

/* The columns of the log the direct insert fills, by name */
enum
{
	OUTBOX_COL_SEQ,
	OUTBOX_COL_ID,
	OUTBOX_COL_TOPIC,
	OUTBOX_COL_AGGREGATETYPE,
	OUTBOX_COL_AGGREGATEID,
	OUTBOX_COL_TYPE,
	OUTBOX_COL_PAYLOAD,
	OUTBOX_COL_HEADERS,
	OUTBOX_COL_CREATED_AT,
	OUTBOX_COL_PART,
	OUTBOX_NCOLS
};

static const char *const outbox_columns[OUTBOX_NCOLS] = {
	"seq", "id", "topic", "aggregatetype", "aggregateid", "type", "payload", "headers",
	"created_at", "part"
};

/*
 * Insert the event row into the log (dedup.outbox on one server, at 1.1)
 * and its indexes directly: heap_insert() and index_insert(), as a plain
 * INSERT would, with the defaults of the columns (seq from the identity
 * sequence, created_at the transaction's start, headers {}), then a
 * command counter increment so that the next put of this statement sees
 * it.  Returns false, having written nothing, when the log has anything
 * this path does not know (a trigger, row security, another column, an
 * index on an expression or with a predicate): the caller inserts through
 * SPI then.  The topic's producer lock is the caller's.
 */
static bool
outbox_insert_direct(const DedupFingerprint *part, pg_uuid_t *id, text *topic,
					 text *aggregate_type, text *aggregate_id, text *type, Jsonb *payload,
					 Jsonb *headers)
{
	Relation	heap = dedup_relation_open(DEDUP_REL_OUTBOX, RowExclusiveLock);
	TupleDesc	desc = RelationGetDescr(heap);
	int			attnum[OUTBOX_NCOLS];
	Datum	   *values;
	bool	   *nulls;
	HeapTuple	tuple;
	List	   *indexes;
	ListCell   *lc;
	static Jsonb *empty_headers = NULL;

	if (heap->trigdesc != NULL || heap->rd_rel->relrowsecurity)
	{
		table_close(heap, NoLock);
		return false;
	}
	for (int c = 0; c < OUTBOX_NCOLS; c++)
		attnum[c] = 0;
	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);
		int			c;

		if (att->attisdropped)
			continue;
		for (c = 0; c < OUTBOX_NCOLS; c++)
			if (strcmp(NameStr(att->attname), outbox_columns[c]) == 0)
				break;
		if (c == OUTBOX_NCOLS || att->attgenerated)
		{
			table_close(heap, NoLock);
			return false;
		}
		attnum[c] = i + 1;
	}
	for (int c = 0; c < OUTBOX_NCOLS; c++)
		if (attnum[c] == 0)
		{
			table_close(heap, NoLock);
			return false;
		}
	indexes = RelationGetIndexList(heap);
	foreach(lc, indexes)
	{
		Relation	index = index_open(lfirst_oid(lc), RowExclusiveLock);
		bool		plain = RelationGetIndexExpressions(index) == NIL &&
			RelationGetIndexPredicate(index) == NIL && index->rd_index->indisready;

		index_close(index, NoLock);
		if (!plain)
		{
			table_close(heap, NoLock);
			return false;
		}
	}

	if (empty_headers == NULL)
	{
		MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);

		empty_headers = DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum("{}")));
		MemoryContextSwitchTo(old);
	}
	values = palloc0(sizeof(Datum) * desc->natts);
	nulls = palloc(sizeof(bool) * desc->natts);
	for (int i = 0; i < desc->natts; i++)
		nulls[i] = true;
#define OUTBOX_SET(c, v) (values[attnum[c] - 1] = (v), nulls[attnum[c] - 1] = false)
	OUTBOX_SET(OUTBOX_COL_SEQ,
			   Int64GetDatum(nextval_internal(dedup_relation_oid(DEDUP_REL_OUTBOX_SEQ), false)));
	OUTBOX_SET(OUTBOX_COL_ID, UUIDPGetDatum(id));
	OUTBOX_SET(OUTBOX_COL_TOPIC, PointerGetDatum(topic));
	OUTBOX_SET(OUTBOX_COL_AGGREGATETYPE, PointerGetDatum(aggregate_type));
	OUTBOX_SET(OUTBOX_COL_AGGREGATEID, PointerGetDatum(aggregate_id));
	OUTBOX_SET(OUTBOX_COL_TYPE, PointerGetDatum(type));
	OUTBOX_SET(OUTBOX_COL_PAYLOAD, PointerGetDatum(payload));
	OUTBOX_SET(OUTBOX_COL_HEADERS, PointerGetDatum(headers ? headers : empty_headers));
	OUTBOX_SET(OUTBOX_COL_CREATED_AT, TimestampTzGetDatum(GetCurrentTransactionStartTimestamp()));
	OUTBOX_SET(OUTBOX_COL_PART, PointerGetDatum(part));
#undef OUTBOX_SET
	tuple = heap_form_tuple(desc, values, nulls);
	heap_insert(heap, tuple, GetCurrentCommandId(true), 0, NULL);
	foreach(lc, indexes)
	{
		Relation	index = index_open(lfirst_oid(lc), RowExclusiveLock);
		IndexInfo  *info = BuildIndexInfo(index);
		Datum		ivalues[INDEX_MAX_KEYS];
		bool		inulls[INDEX_MAX_KEYS];

		for (int k = 0; k < info->ii_NumIndexAttrs; k++)
		{
			AttrNumber a = info->ii_IndexAttrNumbers[k];

			ivalues[k] = values[a - 1];
			inulls[k] = nulls[a - 1];
		}
		index_insert(index, ivalues, inulls, &tuple->t_self, heap,
					 index->rd_index->indisunique ? UNIQUE_CHECK_YES : UNIQUE_CHECK_NO,
					 false, info);
		index_close(index, NoLock);
	}
	list_free(indexes);
	heap_freetuple(tuple);
	table_close(heap, NoLock);
	/* the next put of this statement looks the event up after this one */
	CommandCounterIncrement();
	return true;
}

/*
 * dedup_outbox_put(topic text, key text, payload jsonb,
 *					aggregate_id text DEFAULT NULL, type text DEFAULT NULL,
 *					headers jsonb DEFAULT NULL, aggregate_type text DEFAULT NULL)
 *	  RETURNS uuid
 *
 * aggregate_id defaults to the key (no ordering between events), type and
 * aggregate_type to the topic, headers to {}.
 */
PG_FUNCTION_INFO_V1(dedup_outbox_put);
Datum
dedup_outbox_put(PG_FUNCTION_ARGS)
{
	text	   *topic;
	DedupScopeSettings settings;
	text	   *key;
	Jsonb	   *payload;
	text	   *aggregate_id;
	text	   *type;
	Jsonb	   *headers;
	text	   *aggregate_type;
	DedupFingerprint fp;
	DedupFingerprint part;
	pg_uuid_t  *id;
	bool		at_1_0;
	bool		is_new;
	LOCKTAG		event_lock;
	bool		event_locked = false;

	topic = dedup_scope_of_call(fcinfo, "topic", "dedup_outbox_put", DEDUP_PRIV_USAGE, &settings);
	outbox_plans_check();
	aggregate_id = outbox_text_arg(fcinfo, 3, "aggregate_id");
	type = outbox_text_arg(fcinfo, 4, "type");
	headers = PG_ARGISNULL(5) ? NULL : PG_GETARG_JSONB_P(5);
	aggregate_type = outbox_text_arg(fcinfo, 6, "aggregate_type");

	dedup_key_arg(fcinfo, 1, topic, -1, &fp);
	outbox_event_key(&fp);
	key = PG_GETARG_TEXT_PP(1);
	if (PG_ARGISNULL(2))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("payload must not be null")));
	payload = PG_GETARG_JSONB_P(2);
	if (headers != NULL && !JB_ROOT_IS_OBJECT(headers))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("headers must be a JSON object")));

	outbox_partition(topic, aggregate_id ? aggregate_id : key, &part);
	if (outbox_distributed())
	{
		Datum		result;

		/* on a cluster, put on the node of the partition's shard */
		if (dedup_cluster_route_key(fcinfo, DEDUP_REL_OUTBOX, &part, &result))
			return result;
	}
	outbox_lock_aggregate(topic, aggregate_id ? aggregate_id : key);
	at_1_0 = !OidIsValid(dedup_relation_lookup(DEDUP_REL_OUTBOX_TOPICS));
	if (at_1_0)
	{
		/* 1.0's relay deletes what it acks: the key is kept on its own */
		KeyStore	ks;

		key_store_open(&ks, DEDUP_REL_OUTBOX_KEYS, topic, NULL, true);
		is_new = key_store_claim(&ks, &fp,
								 dedup_timestamp_plus(ks.now, &settings.value[DEDUP_SCOPE_RETENTION]),
								 false);
		key_store_close(&ks);
	}
	else if (!outbox_distributed() && outbox_legacy_key(topic, &fp))
		is_new = false;		/* (a cluster has none: dedup_distribute() wants none) */
	else
	{
		is_new = !outbox_event_exists(&part, (pg_uuid_t *) fp.bytes, &event_lock);
		event_locked = true;
		/* nor an event held back, nacked, redriven, or dead */
		is_new = is_new &&
			!outbox_event_held(DEDUP_REL_OUTBOX_RETRY, &part, (pg_uuid_t *) fp.bytes) &&
			!outbox_event_held(DEDUP_REL_OUTBOX_DEAD, &part, (pg_uuid_t *) fp.bytes);
	}
	if (is_new && outbox_insert(at_1_0, &part, (pg_uuid_t *) fp.bytes, topic,
								aggregate_type ? aggregate_type : topic,
								aggregate_id ? aggregate_id : key,
								type ? type : topic,
								payload, headers))
	{
		/*
		 * No wake-up on a cluster: a node's relays are not woken by another
		 * node's events, and a transaction that notified cannot be prepared
		 * for Citus's two-phase commit
		 */
		if (!outbox_distributed())
			Async_Notify(OUTBOX_CHANNEL, text_to_cstring(topic));
		dedup_scope_count(settings.counters, DEDUP_COUNT_EVENTS_PUT, 1);
	}
	/* the event is in the log (or not to be put): other puts of it may look */
	if (event_locked)
		LockRelease(&event_lock, ExclusiveLock, false);
	id = palloc(sizeof(pg_uuid_t));
	memcpy(id->data, fp.bytes, UUID_LEN);
	PG_RETURN_UUID_P(id);
}

/* ---------------------------------------------------------------------
 * The relay's functions
 * ---------------------------------------------------------------------
 */

/*
 * The relay lock of a topic in a partition: a take holds it until its
 * transaction ends, so that the takes of a topic in a partition go one
 * after another, each seeing what the one before committed (a heavyweight
 * lock, not a row lock: no WAL).
 */
static bool
outbox_lock_relay(const DedupFingerprint *part, const text *topic, bool dont_wait)
{
	uint64		h = hash_bytes_extended((const unsigned char *) VARDATA_ANY(topic),
										VARSIZE_ANY_EXHDR(topic),
										outbox_part_number(part));
	LOCKTAG		tag;

	SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, (uint32) (h >> 32), (uint32) h,
						 DEDUP_LOCKTAG_RELAY);
	return LockAcquire(&tag, ExclusiveLock, false, dont_wait) != LOCKACQUIRE_NOT_AVAIL;
}

/*
 * dedup.outbox_lock_relay(in_part dedup_fingerprint, topic text): the relay
 * lock of the topic in the partition, for the PL/pgSQL take.
 */
PG_FUNCTION_INFO_V1(dedup_outbox_lock_relay);
Datum
dedup_outbox_lock_relay(PG_FUNCTION_ARGS)
{
	(void) outbox_lock_relay(PG_GETARG_DEDUP_FINGERPRINT_P(0), PG_GETARG_TEXT_PP(1), false);
	PG_RETURN_VOID();
}

/*
 * dedup.outbox_lock_slot(in_part dedup_fingerprint, slot integer) RETURNS
 *	boolean
 *
 * The lock of a slot number in a partition, held until the transaction
 * ends, if no other transaction holds it (true); false at once otherwise.
 * A take that numbers a new slot holds it while it inserts the slot, so a
 * take never waits for another's insert of the same number (it tries the
 * next), and takes of different topics, each holding its topic's relay
 * lock, never wait for one another.
 */
PG_FUNCTION_INFO_V1(dedup_outbox_lock_slot);
Datum
dedup_outbox_lock_slot(PG_FUNCTION_ARGS)
{
	int32		slot = PG_GETARG_INT32(1);
	LOCKTAG		tag;

	SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, outbox_part_number(PG_GETARG_DEDUP_FINGERPRINT_P(0)),
						 (uint32) slot, DEDUP_LOCKTAG_SLOT);
	PG_RETURN_BOOL(LockAcquire(&tag, ExclusiveLock, false, true) != LOCKACQUIRE_NOT_AVAIL);
}

/*
 * A take reads, in each statement, the events that committed before it: a
 * snapshot taken once for the transaction may not show them (0A000).
 */
static void
outbox_check_isolation(void)
{
	if (IsolationUsesXactSnapshot())
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("an outbox take cannot run in a repeatable read or serializable transaction"),
				 errdetail("A take reads the events that committed before it, which a snapshot taken at the start of the transaction may not show."),
				 errhint("Take in a READ COMMITTED transaction.")));
}

/*
 * dedup.outbox_stable_seq(in_part dedup_fingerprint, topic text) RETURNS bigint
 *
 * A seq up to which every put of the topic in the partition has settled:
 * the last number the outbox's sequence gave, once every producer of the
 * topic that may hold a number up to it has ended (never waiting for the
 * caller's own transaction).  The caller's next statement, with a snapshot
 * taken after this returned, sees every event of the topic up to it that
 * committed; a transaction snapshot taken before could not, so the take
 * refuses to run in one.  On a cluster, where the sequence is this node's,
 * at least the last number the partition's log of the topic has: its
 * events of numbers above the sequence's came from another node, committed
 * (dedup_distribute(), a shard move), and a put here first moves the
 * sequence past them (outbox_sequence_catch_up()).
 */
PG_FUNCTION_INFO_V1(dedup_outbox_stable_seq);
Datum
dedup_outbox_stable_seq(PG_FUNCTION_ARGS)
{
	DedupFingerprint *part = PG_GETARG_DEDUP_FINGERPRINT_P(0);
	text	   *topic = PG_GETARG_TEXT_PP(1);
	LOCAL_FCINFO(seqinfo, 1);
	Datum		last;
	LOCKTAG		tag;
	int64		stable;
	int64		in_log;

	outbox_check_isolation();
	/*
	 * No outbox_plans_check() here: this runs inside the relay's kept plan,
	 * which the entry point checked, and freeing it now would free a plan
	 * in use
	 */
	InitFunctionCallInfoData(*seqinfo, NULL, 1, InvalidOid, NULL, NULL);
	/* on a cluster, this node's (the sequence is every node's own) */
	seqinfo->args[0].value = ObjectIdGetDatum(dedup_relation_hashed(DEDUP_REL_OUTBOX) ?
											  dedup_relation_lookup(DEDUP_REL_OUTBOX_SEQ) :
											  dedup_relation_oid(DEDUP_REL_OUTBOX_SEQ));
	seqinfo->args[0].isnull = false;
	last = pg_sequence_last_value(seqinfo);
	stable = seqinfo->isnull ? 0 : DatumGetInt64(last);
	if (dedup_relation_hashed(DEDUP_REL_OUTBOX) &&
		outbox_partition_last_seq(part, topic, &in_log) && in_log > stable)
		stable = in_log;
	outbox_topic_locktag(&tag, topic);
	WaitForLockers(tag, ShareLock, false);
	PG_RETURN_INT64(stable);
}

/*
 * What a relay call needs of its public function, looked up once per
 * backend and function: its name, arguments, volatility, and the kept plan
 * of "SELECT * FROM dedup.outbox_<op>($1, $2, ...)" (the calling role's
 * OID, the partition, then the function's own arguments), prepared at its
 * first call.
 */
#define RELAY_MAX_FUNCTIONS 16
#define RELAY_MAX_ARGS 8
#define RELAY_PUBLIC_PREFIX "dedup_outbox_"

typedef struct RelayFunction
{
	Oid			fn;
	char		name[NAMEDATALEN];
	int			nargs;
	Oid			argtypes[RELAY_MAX_ARGS + 2];
	bool		read_only;
	SPIPlanPtr	plan;
} RelayFunction;


static RelayFunction relay_functions[RELAY_MAX_FUNCTIONS];

static RelayFunction *
relay_function(Oid fn)
{
	RelayFunction *rf;
	char	   *name;
	Oid		   *argtypes;
	int			nargs;
	int			slot;

	for (slot = 0; slot < RELAY_MAX_FUNCTIONS && relay_functions[slot].fn != InvalidOid; slot++)
		if (relay_functions[slot].fn == fn)
			return &relay_functions[slot];
	name = get_func_name(fn);
	get_func_signature(fn, &argtypes, &nargs);
	if (name == NULL || strncmp(name, RELAY_PUBLIC_PREFIX, strlen(RELAY_PUBLIC_PREFIX)) != 0 ||
		nargs > RELAY_MAX_ARGS)
		elog(ERROR, "dedup_outbox_relay() serves only the outbox relay's functions");
	if (slot == RELAY_MAX_FUNCTIONS)
	{
		/* the extension was created again several times: start over */
		for (int i = 0; i < RELAY_MAX_FUNCTIONS; i++)
			if (relay_functions[i].plan)
				SPI_freeplan(relay_functions[i].plan);
		memset(relay_functions, 0, sizeof(relay_functions));
		slot = 0;
	}
	rf = &relay_functions[slot];
	rf->fn = fn;
	strlcpy(rf->name, name, NAMEDATALEN);
	rf->nargs = nargs;
	rf->argtypes[0] = OIDOID;
	rf->argtypes[1] = dedup_fingerprint_type();
	memcpy(rf->argtypes + 2, argtypes, nargs * sizeof(Oid));
	rf->read_only = func_volatile(fn) != PROVOLATILE_VOLATILE;
	rf->plan = NULL;
	return rf;
}

/* Its plan, prepared inside SPI at the first call. */
static SPIPlanPtr
relay_plan(RelayFunction *rf)
{
	StringInfoData sql;

	if (rf->plan)
		return rf->plan;
	initStringInfo(&sql);
	appendStringInfo(&sql, "SELECT * FROM %s.%s($1, $2", DEDUP_INTERNAL_SCHEMA,
					 quote_identifier(psprintf("outbox_%s", rf->name + strlen(RELAY_PUBLIC_PREFIX))));
	for (int i = 0; i < rf->nargs; i++)
		appendStringInfo(&sql, ", $%d", i + 3);
	appendStringInfoChar(&sql, ')');
	rf->plan = SPI_prepare(sql.data, rf->nargs + 2, rf->argtypes);
	if (rf->plan == NULL)
		elog(ERROR, "could not prepare \"%s\": %s", sql.data, SPI_result_code_string(SPI_result));
	SPI_keepplan(rf->plan);
	return rf->plan;
}


/* ---------------------------------------------------------------------
 * The relay's fast path
 *
 * A take of a topic with no batch whose lease passed, nothing in
 * dedup.outbox_retry nor dedup.outbox_held, a free slot of its own that no
 * other take holds, and next events of which none needs holding back (no
 * aggregate a batch holds; for the 1.0 take, none twice), or with nothing
 * to hand out; and an ack of a
 * batch whole with no event of outbox_retry.  That is every take and ack
 * of a relay keeping up; both follow the rules of the PL/pgSQL functions
 * (sql/functions/outbox.sql), in a few kept statements, and give way to
 * them, before writing anything, in every other case.  Run as the owner
 * of the outbox, inside SPI.
 * ---------------------------------------------------------------------
 */
enum
{
	FAST_STATE,
	FAST_SCAN,
	FAST_WRITE,
	FAST_TOPIC_UPDATE,
	FAST_ACK_TOPIC,
	FAST_ACK,
	FAST_NPLANS
};

/*
 * Each statement's $1 is the partition; %1$s in its text stands for the
 * fingerprint's equality operator, and InvalidOid in its argument types
 * for the fingerprint's type.
 *
 * FAST_STATE runs once the take holds its topic's relay lock, so that its
 * snapshot sees what the take that held it before committed: the topic's
 * position, whether outbox_retry or outbox_held has events of the topic
 * (one flag), whether the log
 * has any past the position, and the topic's slots (one row with no slot
 * when it has none; no row when the topic has no position yet).  Its
 * look-ups are scalar subqueries with ORDER BY and LIMIT, not EXISTS,
 * which the planner would strip of them and, in the kept generic plan,
 * read the whole log.
 */
static const struct
{
	const char *sql;
	int			nargs;
	Oid			argtypes[11];
}			fast_queries[FAST_NPLANS] = {
	[FAST_STATE] = {"SELECT t.next_seq,"
		" (SELECT r.seq FROM dedup.outbox_retry AS r"
		"  WHERE r.part %1$s $1 AND r.topic OPERATOR(pg_catalog.=) $2"
		"  ORDER BY r.seq LIMIT 1) IS NOT NULL"
		" OR (SELECT h.from_seq FROM dedup.outbox_held AS h"
		"  WHERE h.part %1$s $1 AND h.topic OPERATOR(pg_catalog.=) $2"
		"  ORDER BY h.aggregateid LIMIT 1) IS NOT NULL,"
		" (SELECT o.seq FROM dedup.outbox AS o"
		"  WHERE o.part %1$s $1 AND o.topic OPERATOR(pg_catalog.=) $2"
		"  AND o.seq OPERATOR(pg_catalog.>=) t.next_seq ORDER BY o.seq LIMIT 1) IS NOT NULL,"
		" x.slot, x.generation, x.busy,"
		" x.lease_until OPERATOR(pg_catalog.<=) pg_catalog.statement_timestamp(), x.aggregates"
		" FROM dedup.outbox_topics AS t LEFT JOIN dedup.outbox_batches AS x"
		"  ON x.part %1$s t.part AND x.topic OPERATOR(pg_catalog.=) t.topic"
		" WHERE t.part %1$s $1 AND t.topic OPERATOR(pg_catalog.=) $2"
		" ORDER BY x.slot", 2, {InvalidOid, TEXTOID}},
	[FAST_SCAN] = {"SELECT o.seq, o.id, o.aggregatetype, o.aggregateid, o.type, o.payload,"
		" o.headers, o.created_at, pg_catalog.hashtext(o.aggregateid)"
		" FROM dedup.outbox AS o WHERE o.part %1$s $1 AND o.topic OPERATOR(pg_catalog.=) $2"
		" AND o.seq OPERATOR(pg_catalog.>=) $3 AND o.seq OPERATOR(pg_catalog.<=) $4"
		" ORDER BY o.seq LIMIT $5", 5, {InvalidOid, TEXTOID, INT8OID, INT8OID, INT4OID}},
	[FAST_WRITE] = {"WITH free AS (SELECT x.slot FROM dedup.outbox_batches AS x"
		"  WHERE x.part %1$s $1 AND x.slot OPERATOR(pg_catalog.=) $2 AND NOT x.busy"
		"  AND x.generation OPERATOR(pg_catalog.=) $11 AND x.topic OPERATOR(pg_catalog.=) $9"
		"  FOR UPDATE SKIP LOCKED),"
		" batch AS (UPDATE dedup.outbox_batches AS x SET generation = $3, busy = true,"
		"  attempt = 1, lease_until = $4, first_seq = $5, last_seq = $6, settled = '{}', extra = '{}',"
		"  retried = 0, events = $7, aggregates = $8"
		"  FROM free WHERE x.part %1$s $1 AND x.slot OPERATOR(pg_catalog.=) free.slot"
		"  RETURNING x.slot),"
		" position AS (UPDATE dedup.outbox_topics AS t SET next_seq = $10"
		"  WHERE t.part %1$s $1 AND t.topic OPERATOR(pg_catalog.=) $9"
		"  AND EXISTS (SELECT FROM batch))"
		" SELECT pg_catalog.count(*) FROM batch",
		11, {InvalidOid, INT4OID, INT4OID, TIMESTAMPTZOID, INT8OID, INT8OID, INT4OID,
		INT4ARRAYOID, TEXTOID, INT8OID, INT4OID}},
	[FAST_TOPIC_UPDATE] = {"UPDATE dedup.outbox_topics AS t SET next_seq = $3"
		" WHERE t.part %1$s $1 AND t.topic OPERATOR(pg_catalog.=) $2", 3,
	{InvalidOid, TEXTOID, INT8OID}},
	[FAST_ACK_TOPIC] = {"SELECT x.topic FROM dedup.outbox_batches AS x"
		" WHERE x.part %1$s $1 AND x.slot OPERATOR(pg_catalog.=) $2"
		" AND x.generation OPERATOR(pg_catalog.=) $3"
		" AND x.busy AND x.retried OPERATOR(pg_catalog.=) 0",
		3, {InvalidOid, INT4OID, INT4OID}},
	[FAST_ACK] = {"UPDATE dedup.outbox_batches AS x SET busy = false"
		" WHERE x.part %1$s $1 AND x.slot OPERATOR(pg_catalog.=) $2"
		" AND x.generation OPERATOR(pg_catalog.=) $3"
		" AND x.busy AND x.retried OPERATOR(pg_catalog.=) 0"
		" AND x.topic OPERATOR(pg_catalog.=) $4 RETURNING x.events",
		4, {InvalidOid, INT4OID, INT4OID, TEXTOID}},
};

static SPIPlanPtr fast_plans[FAST_NPLANS];

/*
 * The kept plans name the fingerprint's type by OID among their parameters,
 * and the plan cache never looks a parameter's type up again: once the
 * extension is dropped and created again, in any session, a plan kept
 * before fails with "cache lookup failed for type".  Each entry point that
 * runs kept plans calls this first: when the fingerprint's type is not the
 * one the plans were made with, every kept plan is freed, to be prepared
 * again at its next use (and the relay's functions, known by their old
 * OIDs, are forgotten).
 */
static void
outbox_plans_check(void)
{
	Oid			type = dedup_fingerprint_type();

	if (type == outbox_plans_type)
		return;
	for (int i = 0; i < lengthof(outbox_insert_plans); i++)
	{
		if (outbox_insert_plans[i])
			SPI_freeplan(outbox_insert_plans[i]);
		outbox_insert_plans[i] = NULL;
	}
	if (outbox_last_seq_plan)
		SPI_freeplan(outbox_last_seq_plan);
	outbox_last_seq_plan = NULL;
	for (int i = 0; i < FAST_NPLANS; i++)
	{
		if (fast_plans[i])
			SPI_freeplan(fast_plans[i]);
		fast_plans[i] = NULL;
	}
	for (int i = 0; i < RELAY_MAX_FUNCTIONS; i++)
		if (relay_functions[i].plan)
			SPI_freeplan(relay_functions[i].plan);
	memset(relay_functions, 0, sizeof(relay_functions));
	outbox_plans_type = type;
}

/* Run a kept statement of the fast path; its result is in SPI_tuptable. */
static int
fast_run(int which, Datum *values, int limit)
{
	int			rc;

	if (fast_plans[which] == NULL)
	{
		char	   *sql = psprintf(fast_queries[which].sql, dedup_fingerprint_eq_sql());
		Oid			argtypes[lengthof(fast_queries[which].argtypes)];
		SPIPlanPtr	plan;

		for (int i = 0; i < fast_queries[which].nargs; i++)
			argtypes[i] = OidIsValid(fast_queries[which].argtypes[i]) ?
				fast_queries[which].argtypes[i] : dedup_fingerprint_type();
		plan = SPI_prepare(sql, fast_queries[which].nargs, argtypes);
		if (plan == NULL)
			elog(ERROR, "could not prepare \"%s\": %s", sql, SPI_result_code_string(SPI_result));
		SPI_keepplan(plan);
		fast_plans[which] = plan;
	}
	rc = SPI_execute_plan(fast_plans[which], values, NULL, false, limit);
	if (rc < 0)
		elog(ERROR, "could not run \"%s\": %s", fast_queries[which].sql,
			 SPI_result_code_string(rc));
	return rc;
}

static int
fast_int4_cmp(const void *a, const void *b)
{
	int32		x = *(const int32 *) a;
	int32		y = *(const int32 *) b;

	return x < y ? -1 : x > y;
}

/* A batch's id from its partition, slot and generation (dedup.outbox_batch_id()). */
static int64
relay_batch_id(const DedupFingerprint *part, int32 slot, int32 generation)
{
	return DatumGetInt64(DirectFunctionCall3(dedup_outbox_batch_id, PointerGetDatum(part),
											 Int32GetDatum(slot), Int32GetDatum(generation)));
}

/*
 * Take a batch of topic on the fast path, into the result set of a take
 * (with the batch's id first when with_id); false, having written
 * nothing, when the case is not one of the fast path's.
 */
static bool
fast_take(ReturnSetInfo *rsinfo, bool with_id, DedupFingerprint *part, text *topic,
		  int32 batch_size, DedupScopeSettings *settings)
{
	Datum		args[11];
	bool		has_log;
	int64		pos;
	int32		slot = -1;
	int32		generation = 0;
	int32	   *blocked;
	int			nblocked = 0;
	int64		stable;
	uint64		n;
	int32	   *hashes;
	int			naggs;
	TimestampTz lease_end;
	bool		isnull;
	SPITupleTable *scan;

	/*
	 * The topic's position; nothing in outbox_retry or outbox_held,
	 * something in the log; the slots: none expired, one free; the
	 * aggregates the busy ones hold
	 */
	(void) outbox_lock_relay(part, topic, false);
	args[0] = PointerGetDatum(part);
	args[1] = PointerGetDatum(topic);
	fast_run(FAST_STATE, args, 0);
	if (SPI_processed == 0 ||
		DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull)))
		return false;
	pos = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	has_log = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 3, &isnull));
	blocked = palloc(sizeof(int32) * 1);
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		HeapTuple	tup = SPI_tuptable->vals[i];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		bool		no_slot;
		bool		busy;

		(void) SPI_getbinval(tup, desc, 4, &no_slot);
		if (no_slot)
			break;
		busy = DatumGetBool(SPI_getbinval(tup, desc, 6, &isnull));
		if (busy)
		{
			ArrayType  *aggs;
			int32	   *elems;
			int			nelems;

			if (DatumGetBool(SPI_getbinval(tup, desc, 7, &isnull)))
				return false;	/* its lease passed: handed out again */
			aggs = DatumGetArrayTypeP(SPI_getbinval(tup, desc, 8, &isnull));
			if (ARR_HASNULL(aggs))
				return false;
			nelems = ArrayGetNItems(ARR_NDIM(aggs), ARR_DIMS(aggs));
			elems = (int32 *) ARR_DATA_PTR(aggs);
			blocked = repalloc(blocked, sizeof(int32) * (nblocked + nelems + 1));
			memcpy(blocked + nblocked, elems, sizeof(int32) * nelems);
			nblocked += nelems;
		}
		else if (slot < 0)
		{
			slot = DatumGetInt32(SPI_getbinval(tup, desc, 4, &isnull));
			generation = DatumGetInt32(SPI_getbinval(tup, desc, 5, &isnull));
		}
	}
	if (!has_log)
		return true;			/* nothing to hand out */
	if (slot < 0)
		return false;

	stable = DatumGetInt64(DirectFunctionCall2(dedup_outbox_stable_seq, PointerGetDatum(part),
											   PointerGetDatum(topic)));
	args[2] = Int64GetDatum(pos);
	args[3] = Int64GetDatum(stable);
	args[4] = Int32GetDatum(batch_size);
	fast_run(FAST_SCAN, args, 0);
	scan = SPI_tuptable;
	n = SPI_processed;
	if (n == 0)
	{
		args[2] = Int64GetDatum(Max(pos, stable + 1));
		fast_run(FAST_TOPIC_UPDATE, args, 0);
		return true;
	}

	/*
	 * No event to hold back: no aggregate a batch holds (and for the 1.0
	 * take, none twice: a batch of take_batch holds several events of an
	 * aggregate in seq order).  The batch's aggregates, each once.
	 */
	hashes = palloc(sizeof(int32) * n);
	for (uint64 i = 0; i < n; i++)
		hashes[i] = DatumGetInt32(SPI_getbinval(scan->vals[i], scan->tupdesc, 9, &isnull));
	qsort(hashes, n, sizeof(int32), fast_int4_cmp);
	qsort(blocked, nblocked, sizeof(int32), fast_int4_cmp);
	naggs = 0;
	for (uint64 i = 0; i < n; i++)
	{
		if (i > 0 && hashes[i] == hashes[i - 1])
		{
			if (!with_id)
				return false;
			continue;
		}
		if (nblocked > 0 && bsearch(&hashes[i], blocked, nblocked, sizeof(int32),
									fast_int4_cmp) != NULL)
			return false;
		hashes[naggs++] = hashes[i];
	}

	/*
	 * The batch, in the free slot, if it is still free at the generation
	 * read and no other take has locked it (a take of another topic that
	 * needs a slot may take this topic's free one: the PL/pgSQL take passes
	 * a slot locked, as this one does, and never waits for it); the topic's
	 * position after it, with it
	 */
	args[10] = Int32GetDatum(generation);
	generation = generation % PG_INT32_MAX + 1;
	/* the lease runs from the hand-out, after the wait for the topic's puts */
	lease_end = dedup_timestamp_plus(GetCurrentTimestamp(),
									 &settings->value[DEDUP_SCOPE_LEASE]);
	args[0] = PointerGetDatum(part);
	args[1] = Int32GetDatum(slot);
	args[2] = Int32GetDatum(generation);
	args[3] = TimestampTzGetDatum(lease_end);
	args[4] = SPI_getbinval(scan->vals[0], scan->tupdesc, 1, &isnull);
	args[5] = SPI_getbinval(scan->vals[n - 1], scan->tupdesc, 1, &isnull);
	args[6] = Int32GetDatum((int32) n);
	{
		Datum	   *elems = palloc(sizeof(Datum) * naggs);

		for (int i = 0; i < naggs; i++)
			elems[i] = Int32GetDatum(hashes[i]);
		args[7] = PointerGetDatum(construct_array(elems, naggs, INT4OID, sizeof(int32), true,
												  TYPALIGN_INT));
	}
	args[8] = PointerGetDatum(topic);
	args[9] = Int64GetDatum(n == (uint64) batch_size ?
							DatumGetInt64(args[5]) + 1 : Max(pos, stable + 1));
	fast_run(FAST_WRITE, args, 0);
	if (SPI_processed != 1 ||
		DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull)) != 1)
		return false;			/* the slot went to another take: nothing written */

	/* the events, as take returns them (take_batch with each one's seq last) */
	for (uint64 i = 0; i < n; i++)
	{
		Datum		values[11];
		bool		nulls[11];
		int			k = 0;

		if (with_id)
		{
			values[k] = Int64GetDatum(relay_batch_id(part, slot, generation));
			nulls[k++] = false;
		}
		for (int col = 2; col <= 7; col++)
		{
			values[k] = SPI_getbinval(scan->vals[i], scan->tupdesc, col, &nulls[k]);
			k++;
		}
		values[k] = Int32GetDatum(1);	/* attempts */
		nulls[k++] = false;
		values[k] = SPI_getbinval(scan->vals[i], scan->tupdesc, 8, &nulls[k]);
		k++;
		values[k] = TimestampTzGetDatum(lease_end);
		nulls[k++] = false;
		if (with_id)
		{
			values[k] = SPI_getbinval(scan->vals[i], scan->tupdesc, 1, &nulls[k]);
			k++;
		}
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	dedup_scope_count(settings->counters, DEDUP_COUNT_EVENTS_TAKEN, (int64) n);
	return true;
}

/*
 * Ack a batch whole on the fast path for caller: frees its slot, counts
 * its events acked, and returns how many it had; or -1, having written
 * nothing, when no batch of that id with no event of outbox_retry is
 * handed out (the PL/pgSQL ack answers).  A batch of a topic the caller
 * may not relay is answered as one not handed out, before anything is
 * written: 0, naming nothing (its id tells no topic).
 */
static int32
fast_ack(DedupFingerprint *part, int64 batch_id, Oid caller)
{
	Datum		args[4];
	bool		isnull;
	text	   *topic;
	DedupScopeSettings settings;
	int32		n;

	/* an id of another partition's batch names none here */
	if (batch_id < 0 || (uint64) (batch_id >> OUTBOX_BATCH_PART_SHIFT) != outbox_part_number(part))
		return -1;
	args[0] = PointerGetDatum(part);
	args[1] = Int32GetDatum((int32) ((batch_id >> OUTBOX_BATCH_SLOT_SHIFT) & OUTBOX_BATCH_MAX_SLOT));
	args[2] = Int32GetDatum((int32) (batch_id & PG_INT32_MAX));
	if (fast_run(FAST_ACK_TOPIC, args, 0) != SPI_OK_SELECT || SPI_processed == 0)
		return -1;
	topic = DatumGetTextPP(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1,
										 &isnull));
	if (!dedup_scope_allows(topic, caller, DEDUP_PRIV_RELAY, &settings))
		return 0;
	/* (of that topic still: a batch of another would be under another id) */
	args[3] = PointerGetDatum(topic);
	if (fast_run(FAST_ACK, args, 0) != SPI_OK_UPDATE_RETURNING || SPI_processed == 0)
		return -1;
	n = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	dedup_scope_count(settings.counters, DEDUP_COUNT_EVENTS_ACKED, n);
	return n;
}

/* ---------------------------------------------------------------------
 * The relay on a Citus cluster
 *
 * The outbox is distributed by partition, each a shard of dedup.claims.  A
 * call of the relay made by a client runs, through dedup_call_on_shard, on
 * the node of each partition it concerns, as the same call forwarded by
 * that partition's part: there it works in that partition alone (below).
 * A take tries this node's partitions first, then the others', each from
 * where this backend's last take stopped, and hands out the first batch it
 * finds; an ack or nack of a batch goes to the partition its id names;
 * redrive and the figures go to every partition.  The 1.0 calls, which name
 * events by id (an id does not say its partition), do not run on a
 * cluster.
 * ---------------------------------------------------------------------
 */

/* The figures of one topic, summed over the partitions */
typedef struct RelayTopicStats
{
	char	   *topic;
	int64		pending;
	int64		in_flight;
	int64		dead;
	Datum		oldest;			/* an interval, or 0 for none */
} RelayTopicStats;

static int
relay_stats_cmp(const void *a, const void *b)
{
	return strcmp(((const RelayTopicStats *) a)->topic, ((const RelayTopicStats *) b)->topic);
}

/*
 * Run the call of fcinfo in partition part, on its node, after taking its
 * shard's metadata lock here, as a claim routed from here does: the lock
 * is taken on this node before the shard's node, in the order of a shard
 * move's, which could otherwise hold this node's lock while it waits for
 * the shard node's, held by this transaction's earlier call there (Citus's
 * deadlock detector cancelled the move in citus.sh).
 */
static List *
relay_call_partition(FunctionCallInfo fcinfo, Datum *args, bool *argnulls,
					 const DedupFingerprint *part)
{
	dedup_cluster_lock_remote(DEDUP_REL_OUTBOX, part);
	return dedup_cluster_call(fcinfo->flinfo->fn_oid, args, argnulls, part);
}

/* The partition after the one this backend's last take on a cluster took from */
static int	relay_next_partition = 0;

static Datum
relay_on_cluster(FunctionCallInfo fcinfo, RelayFunction *rf)
{
	DedupFingerprint *parts;
	bool	   *local;
	int			nparts = dedup_cluster_partitions(&parts, &local);
	Datum	   *args = palloc(sizeof(Datum) * Max(PG_NARGS(), 1));
	bool	   *argnulls = palloc(sizeof(bool) * Max(PG_NARGS(), 1));

	for (int i = 0; i < PG_NARGS(); i++)
	{
		argnulls[i] = PG_ARGISNULL(i);
		args[i] = argnulls[i] ? (Datum) 0 : PG_GETARG_DATUM(i);
	}
	if (strcmp(rf->name, "dedup_outbox_take_batch") == 0)
	{
		InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
		/* this node's partitions, then the others' */
		for (int pass = 0; pass < 2; pass++)
		{
			for (int j = 0; j < nparts; j++)
			{
				int			i = (relay_next_partition + j) % nparts;

				if (local[i] != (pass == 0))
					continue;
				if (dedup_cluster_put_rows((ReturnSetInfo *) fcinfo->resultinfo,
										   relay_call_partition(fcinfo, args, argnulls,
																&parts[i])) > 0)
				{
					relay_next_partition = (i + 1) % nparts;
					return (Datum) 0;
				}
			}
		}
		return (Datum) 0;
	}
	if (strcmp(rf->name, "dedup_outbox_redrive") == 0)
	{
		int64		n = 0;

		for (int i = 0; i < nparts; i++)
		{
			List	   *rows = relay_call_partition(fcinfo, args, argnulls, &parts[i]);
			int			ncols;
			char	  **values;

			if (rows == NIL)
				continue;
			values = dedup_cluster_row_values(linitial(rows), &ncols);
			if (ncols == 1 && values[0] != NULL)
				n += pg_strtoint64(values[0]);
		}
		PG_RETURN_INT32((int32) Min(n, PG_INT32_MAX));
	}
	if (strcmp(rf->name, "dedup_outbox_stats") == 0)
	{
		ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
		RelayTopicStats *stats = NULL;
		int			nstats = 0;

		InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
		for (int i = 0; i < nparts; i++)
		{
			ListCell   *lc;

			foreach(lc, relay_call_partition(fcinfo, args, argnulls, &parts[i]))
			{
				int			ncols;
				char	  **values = dedup_cluster_row_values(lfirst(lc), &ncols);
				RelayTopicStats *s = NULL;

				if (ncols != 5 || values[0] == NULL)
					elog(ERROR, "the figures of a partition have %d columns, not 5", ncols);
				for (int k = 0; k < nstats && s == NULL; k++)
					if (strcmp(stats[k].topic, values[0]) == 0)
						s = &stats[k];
				if (s == NULL)
				{
					stats = stats ? repalloc(stats, sizeof(RelayTopicStats) * (nstats + 1)) :
						palloc(sizeof(RelayTopicStats));
					s = &stats[nstats++];
					memset(s, 0, sizeof(RelayTopicStats));
					s->topic = values[0];
				}
				s->pending += values[1] ? pg_strtoint64(values[1]) : 0;
				s->in_flight += values[2] ? pg_strtoint64(values[2]) : 0;
				s->dead += values[3] ? pg_strtoint64(values[3]) : 0;
				if (values[4] != NULL)
				{
					Datum		age = DirectFunctionCall3(interval_in, CStringGetDatum(values[4]),
														  ObjectIdGetDatum(InvalidOid),
														  Int32GetDatum(-1));

					if (s->oldest == (Datum) 0 ||
						DatumGetBool(DirectFunctionCall2(interval_gt, age, s->oldest)))
						s->oldest = age;
				}
			}
		}
		if (nstats > 1)
			qsort(stats, nstats, sizeof(RelayTopicStats), relay_stats_cmp);
		for (int k = 0; k < nstats; k++)
		{
			Datum		values[5];
			bool		nulls[5] = {false, false, false, false, stats[k].oldest == (Datum) 0};

			values[0] = CStringGetTextDatum(stats[k].topic);
			values[1] = Int64GetDatum(stats[k].pending);
			values[2] = Int64GetDatum(stats[k].in_flight);
			values[3] = Int64GetDatum(stats[k].dead);
			values[4] = stats[k].oldest;
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
		}
		return (Datum) 0;
	}
	elog(ERROR, "%s() has no way to run on a Citus cluster", rf->name);
	return (Datum) 0;
}

PG_FUNCTION_INFO_V1(dedup_outbox_relay);
Datum
dedup_outbox_relay(PG_FUNCTION_ARGS)
{
	RelayFunction *rf;
	Oid			caller = GetUserId();
	bool		retset = fcinfo->flinfo->fn_retset;
	Datum		values[RELAY_MAX_ARGS + 2];
	char		nulls[RELAY_MAX_ARGS + 2];
	DedupFingerprint part;
	Oid			owner;
	Oid			save_userid;
	int			save_sec_context;
	Datum		result = (Datum) 0;
	bool		isnull = true;
	bool		take;
	bool		ack_whole;
	DedupScopeSettings settings;
	int32		acked = -1;
	bool		done = false;
	bool		of_batch;
	bool		in_one_partition = false;

	outbox_plans_check();
	rf = relay_function(fcinfo->flinfo->fn_oid);
	take = strcmp(rf->name, "dedup_outbox_take") == 0 ||
		strcmp(rf->name, "dedup_outbox_take_batch") == 0;
	ack_whole = strcmp(rf->name, "dedup_outbox_ack_batch") == 0 &&
		!PG_ARGISNULL(0) && !PG_ARGISNULL(2) &&
		(PG_ARGISNULL(1) || ArrayGetNItems(ARR_NDIM(PG_GETARG_ARRAYTYPE_P(1)),
										   ARR_DIMS(PG_GETARG_ARRAYTYPE_P(1))) == 0);
	of_batch = strcmp(rf->name, "dedup_outbox_ack_batch") == 0 ||
		strcmp(rf->name, "dedup_outbox_nack_batch") == 0;
	if (!rf->read_only)
		dedup_check_writable(rf->name);

	/*
	 * The partition: a batch's is in its id (one of no batch's id finds
	 * none); the figures are of every partition; the rest work in the one
	 * there is.  On a cluster, see above.
	 */
	dedup_outbox_part(0, &part);
	if (of_batch && !PG_ARGISNULL(0))
		(void) outbox_batch_part(PG_GETARG_INT64(0), &part);
	if (outbox_distributed())
	{
		const DedupFingerprint *forwarded = dedup_cluster_forwarded_key();
		Datum		routed;

		if (strcmp(rf->name, "dedup_outbox_take") == 0 ||
			strcmp(rf->name, "dedup_outbox_ack") == 0 ||
			strcmp(rf->name, "dedup_outbox_nack") == 0)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("%s() does not run on a Citus cluster", rf->name),
					 errdetail("The outbox is kept in partitions there, and an event's id does not say its partition."),
					 errhint("Take, ack and nack batches: dedup_outbox_take_batch, dedup_outbox_ack_batch, dedup_outbox_nack_batch.")));
		if (forwarded != NULL)
			memcpy(&part, forwarded, sizeof(part));
		else if (!of_batch)
			return relay_on_cluster(fcinfo, rf);
		/* the batch's partition, or the one forwarded here: run there */
		if (dedup_cluster_route_key(fcinfo, DEDUP_REL_OUTBOX, &part, &routed))
			return routed;
		dedup_cluster_lock_key(DEDUP_REL_OUTBOX, &part);
		in_one_partition = true;

		/*
		 * A take of a cluster's relay passes a partition whose relay lock
		 * another take holds (it is taking from it): no take waits for
		 * another, so takes that go through the partitions in different
		 * orders, each holding the locks of those it passed until it
		 * commits, never deadlock.
		 */
		if (forwarded != NULL && strcmp(rf->name, "dedup_outbox_take_batch") == 0 &&
			!PG_ARGISNULL(0) && !outbox_lock_relay(&part, PG_GETARG_TEXT_PP(0), true))
		{
			InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
			return (Datum) 0;
		}
	}
	if (take)
		outbox_check_isolation();
	/* the fast path's take checks as the PL/pgSQL one does, first */
	take = take && !PG_ARGISNULL(0) && !PG_ARGISNULL(1) && PG_GETARG_INT32(1) >= 1 &&
		PG_GETARG_INT32(1) <= 10000;
	if (take)
		dedup_scope_use(dedup_scope_arg(fcinfo, 0, "topic"), DEDUP_PRIV_RELAY, &settings);
	if (ack_whole)
		dedup_check_interval(PG_GETARG_INTERVAL_P(2), "retry_delay", true,
							 GetCurrentStatementStartTimestamp());
	values[0] = ObjectIdGetDatum(caller);
	nulls[0] = ' ';
	values[1] = PointerGetDatum(&part);
	nulls[1] = (strcmp(rf->name, "dedup_outbox_stats") == 0 && !in_one_partition) ? 'n' : ' ';
	for (int i = 0; i < rf->nargs; i++)
	{
		values[i + 2] = PG_GETARG_DATUM(i);
		nulls[i + 2] = PG_ARGISNULL(i) ? 'n' : ' ';
	}
	if (retset)
		InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);

	owner = dedup_relation_owner(DEDUP_REL_OUTBOX);
	GetUserIdAndSecContext(&save_userid, &save_sec_context);
	SetUserIdAndSecContext(owner, save_sec_context | SECURITY_LOCAL_USERID_CHANGE);
	SPI_connect();
	if (take)
		done = fast_take((ReturnSetInfo *) fcinfo->resultinfo,
						 strcmp(rf->name, "dedup_outbox_take_batch") == 0,
						 &part, PG_GETARG_TEXT_PP(0), PG_GETARG_INT32(1), &settings);
	else if (ack_whole)
	{
		acked = fast_ack(&part, PG_GETARG_INT64(0), caller);
		done = acked >= 0;
		if (done)
		{
			result = Int32GetDatum(acked);
			isnull = false;
		}
	}
	if (done)
		;
	else if (SPI_execute_plan(relay_plan(rf), values, nulls, rf->read_only, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not run the outbox relay's %s()", rf->name);
	else if (retset)
	{
		ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;

		for (uint64 i = 0; i < SPI_processed; i++)
			tuplestore_puttuple(rsinfo->setResult, SPI_tuptable->vals[i]);
	}
	else if (SPI_processed > 0)
	{
		Oid			rettype = SPI_gettypeid(SPI_tuptable->tupdesc, 1);
		int16		typlen;
		bool		typbyval;

		get_typlenbyval(rettype, &typlen, &typbyval);
		result = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
		if (!isnull)
			result = SPI_datumTransfer(result, typbyval, typlen);
	}
	SPI_finish();
	SetUserIdAndSecContext(save_userid, save_sec_context);
	/*
	 * A redrive that moved events wakes the topic's relays; not on a
	 * cluster (see dedup_outbox_put)
	 */
	if (strcmp(rf->name, "dedup_outbox_redrive") == 0 && !isnull && DatumGetInt32(result) > 0 &&
		!outbox_distributed())
		Async_Notify(OUTBOX_CHANNEL, text_to_cstring(PG_GETARG_TEXT_PP(0)));
	if (retset)
		return (Datum) 0;
	if (isnull)
		PG_RETURN_NULL();
	return result;
}

/*
 * dedup.outbox_partition_of(topic text, aggregate_id text)
 *	RETURNS dedup_fingerprint
 *
 * The part of the outbox partition of an aggregate's events, on a cluster
 * whose dedup.claims is distributed (dedup_distribute() moves the events
 * there by it).
 */
PG_FUNCTION_INFO_V1(dedup_outbox_partition_of);
Datum
dedup_outbox_partition_of(PG_FUNCTION_ARGS)
{
	DedupFingerprint afp;
	DedupFingerprint *part = palloc(sizeof(DedupFingerprint));

	dedup_key_datum(PG_GETARG_DATUM(1), -1, PG_GETARG_TEXT_PP(0), &afp);
	dedup_cluster_partition(&afp, part);
	PG_RETURN_DEDUP_FINGERPRINT_P(part);
}

/*
 * dedup.outbox_partitions() RETURNS SETOF dedup_fingerprint
 *
 * The parts of every partition of the outbox on a cluster: one a shard of
 * dedup.claims.
 */
PG_FUNCTION_INFO_V1(dedup_outbox_partitions);
Datum
dedup_outbox_partitions(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	DedupFingerprint *parts;
	bool	   *local;
	int			n = dedup_cluster_partitions(&parts, &local);

	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
	for (int i = 0; i < n; i++)
	{
		DedupFingerprint *part = palloc(sizeof(DedupFingerprint));
		Datum		value;
		bool		isnull = false;

		memcpy(part, &parts[i], sizeof(DedupFingerprint));
		value = PointerGetDatum(part);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, &value, &isnull);
	}
	return (Datum) 0;
}
