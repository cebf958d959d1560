/*-------------------------------------------------------------------------
 *
 * outbox_put.c
 *	  dedup_outbox_put(): an event into the transactional outbox, inside the
 *	  caller's business transaction.
 *
 * The event's id is the fingerprint of (topic, key) made a UUID (version 8:
 * 122 of its 128 bits), so a put returns it either way without a look-up.
 * The log's primary key on the id is the outbox's idempotency: the row
 * stays in the log for the topic's retention (the cleanup deletes an event
 * only once it is published and older than that), so the same key within
 * retention yields one event and a retried producer transaction never
 * publishes twice; an event held in dedup.outbox_retry, or dead, counts as
 * there too.  The same key must name the same event: a put of a key
 * already there with another payload, aggregate id, type, headers or
 * aggregate type is refused (22023, nothing written), as dedup_begin
 * answers mismatch for another request under a key.  A key put by 1.0 is
 * kept without its event (dedup.outbox_keys), so a put of one is not
 * compared: it returns the id, as in 1.0.  Keys put by 1.0 are in dedup.outbox_keys until their
 * retention passes, and are looked up there while it has any; a database
 * whose extension is still at 1.0 (the library updated first) keeps its
 * new keys there too, as 1.0 did.
 *
 * The event row is written as an INSERT would write it.  While the log is
 * exactly the shape dedup created (put_shape_direct(): its columns' types,
 * typmods, collations, NOT NULLs and defaults, no CHECK or exclusion
 * constraint, rule, trigger or row security, indexes on plain columns
 * only; decided once per change of the table, not per put), it is written
 * into the log and its indexes directly, without SPI or the executor
 * (put_insert_direct(), as store.c writes claims): the put's look-ups, its
 * locks and its insert are all C.  A log its owner changed otherwise, a
 * Citus cluster (where the row goes to the partition's shard) and a
 * database still at 1.0 have the row inserted through SPI, by an INSERT as
 * the owner of dedup.outbox, which enforces what the owner added (a CHECK,
 * a domain, a varchar(n), a rule ...) and applies the column's defaults
 * and casts (payload json, another created_at default).  Either way
 * producers need EXECUTE on this function and no table privilege.
 *
 * Producers of one aggregate are serialized until they commit by a lock
 * taken before the event gets its sequence number: within an aggregate,
 * sequence order is commit order, which is the order the relay hands
 * events out in.  Every producer of a topic also holds the topic's lock
 * (outbox.c) from before its event gets its sequence number until it
 * commits, which a take waits for.  The lock of an aggregate is the
 * aggregate itself (outbox_lock_aggregate(), outbox.c: the fingerprint of
 * (topic, aggregate id), held as a row lock is, by transaction id, in
 * shared memory, not in the lock table): only producers of one aggregate
 * of one topic wait for each other, and a transaction may put events of
 * as many aggregates as dedup.outbox_aggregate_locks allows all open
 * transactions together.  Two producers deadlock (40P01) only where each
 * waits for an aggregate the other put first, as with row locks.  A put
 * without an aggregate id is the aggregate of its key, and locks it too:
 * another put may name that key as its aggregate.
 *
 * The event's id is looked up in the log under the event's own lock, with
 * a dirty snapshot (put_event_exists()): the log keeps the row of every
 * event put by 1.1 until the event is published and its retention passed,
 * even while it waits in outbox_retry or lies in outbox_dead (the
 * cleanup's trim, outbox_trim(), keeps those), so the log alone says
 * whether a key was put, whatever table the event is in and whatever the
 * caller's snapshot.  Events that the 1.0 -> 1.1 update moved into
 * outbox_retry have no row in the log: outbox_retry and outbox_dead are
 * looked up as well, with a dirty snapshot too (put_event_held()).
 *
 * A new event notifies channel dedup_outbox with the topic as payload
 * while a session of the database listens there (outbox_wake(), outbox.c);
 * PostgreSQL folds a transaction's identical notifications into one, so
 * relays are woken once per committing transaction and topic.  Its commit
 * also wakes the takes waiting on its topic (with dedup preloaded: outbox.c).
 *
 * Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/heapam.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/dependency.h"
#include "catalog/index.h"
#include "catalog/pg_am_d.h"
#include "catalog/pg_attribute.h"
#include "catalog/pg_class.h"
#include "catalog/pg_collation_d.h"
#include "catalog/pg_type_d.h"
#include "commands/sequence.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "nodes/primnodes.h"
#include "storage/bufmgr.h"
#include "storage/lmgr.h"
#include "storage/lock.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/fmgrprotos.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/uuid.h"

#include "catalog.h"
#include "checks.h"
#include "compat.h"
#include "fingerprint.h"
#include "outbox.h"
#include "routing.h"
#include "scope.h"
#include "scope_counters.h"
#include "shards.h"
#include "store.h"

#define PUT_INSERT_NARGS 8

/* The insert's kept plans: for a 1.1 database, and for one still at 1.0 */
static SPIPlanPtr put_insert_plans[2];

/* The fingerprint type they were made with (put_plans_check) */
static Oid	put_plans_type = InvalidOid;

static bool put_insert_direct(const DedupFingerprint *part, pg_uuid_t *id, text *topic,
							  text *aggregate_type, text *aggregate_id, text *type,
							  Jsonb *payload, Jsonb *headers);

/* Free the kept plans if they name a fingerprint type gone (outbox.c). */
static void
put_plans_check(void)
{
	if (!outbox_plans_stale(&put_plans_type))
		return;
	for (int i = 0; i < lengthof(put_insert_plans); i++)
	{
		if (put_insert_plans[i])
			SPI_freeplan(put_insert_plans[i]);
		put_insert_plans[i] = NULL;
	}
}

/*
 * Make a fingerprint an RFC 9562 version 8 UUID in place: it is then both
 * the event's id and its key in dedup.outbox_keys.
 */
static void
put_event_key(DedupFingerprint *fp)
{
	StaticAssertStmt(sizeof(pg_uuid_t) == DEDUP_FINGERPRINT_LEN,
					 "a fingerprint is as long as a uuid");
	fp->bytes[6] = (fp->bytes[6] & 0x0f) | 0x80;	/* version 8 */
	fp->bytes[8] = (fp->bytes[8] & 0x3f) | 0x80;	/* variant 10 */
}


/*
 * Serialize the producers of one aggregate of a topic until the end of the
 * transaction: the aggregate's lock (outbox.c), by the fingerprint of
 * (topic, aggregate id), which no one can make another aggregate's.
 */
static void
put_lock_aggregate(const text *topic, text *aggregate_id)
{
	DedupFingerprint aggregate;

	dedup_fingerprint_key_datum(PointerGetDatum(aggregate_id), -1, topic, &aggregate);
	outbox_lock_aggregate(topic, &aggregate);
}

/* An optional text argument: NULL when not given, an error when empty. */
static text *
put_text_arg(FunctionCallInfo fcinfo, int argno, const char *what)
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


/*
 * Whether a key put by 1.0 is still kept, in dedup.outbox_keys (which a
 * database created at 1.1 never fills): read only while the table has
 * pages.
 */
static bool
put_legacy_key(const text *topic, const DedupFingerprint *fp)
{
	Relation	keys = dedup_catalog_relation_open(DEDUP_REL_OUTBOX_KEYS, AccessShareLock);
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
 * Open a table of the outbox keyed by event id (the log, outbox_retry,
 * outbox_dead) and its primary key: on a cluster, the partition's shard
 * here, under Citus's lock of it.
 */
static void
put_open(DedupRelation table, const DedupFingerprint *part, Relation *heap, Relation *index)
{
	if (outbox_distributed())
		dedup_shards_shard_open(table, part, AccessShareLock, heap, index);
	else
	{
		*heap = dedup_catalog_relation_open(table, AccessShareLock);
		*index = index_open(dedup_catalog_relation_oid(table == DEDUP_REL_OUTBOX ?
													   DEDUP_REL_OUTBOX_PKEY : table + 1),
							AccessShareLock);
	}
}

/*
 * The scan keys of an event's id in such a primary key, (id) on one server,
 * (part, id) where distributed (dedup_distribute()); returns how many.
 */
static int
put_id_scankeys(Relation index, const DedupFingerprint *part, const pg_uuid_t *id,
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
 * The event a put names, its defaults filled in (headers NULL: {}): a put
 * of a key already in the outbox must name the same event.
 */
typedef struct PutEvent
{
	text	   *topic;
	text	   *key;
	Jsonb	   *payload;
	Jsonb	   *headers;
	text	   *type;
	text	   *aggregate_id;
	text	   *aggregate_type;
} PutEvent;

/* Whether a text column's value is the text given. */
static bool
put_same_text(Datum stored, bool isnull, const text *given)
{
	text	   *t;

	if (isnull)
		return false;
	t = DatumGetTextPP(stored);
	return VARSIZE_ANY_EXHDR(t) == VARSIZE_ANY_EXHDR(given) &&
		memcmp(VARDATA_ANY(t), VARDATA_ANY(given), VARSIZE_ANY_EXHDR(given)) == 0;
}

/* Whether a jsonb column's value is the jsonb given (NULL: an empty object). */
static bool
put_same_jsonb(Datum stored, bool isnull, Jsonb *given)
{
	Jsonb	   *j;

	if (isnull)
		return false;
	if (given == NULL)
	{
		j = DatumGetJsonbP(stored);
		return JB_ROOT_IS_OBJECT(j) && JB_ROOT_COUNT(j) == 0;
	}
	return DatumGetBool(DirectFunctionCall2(jsonb_eq, stored, JsonbPGetDatum(given)));
}

/*
 * A stored value of a column the put compares as the type it gives (want:
 * text or jsonb), where the owner altered the column to another type (the
 * put then inserts through SPI, which casts): its text read as that type.
 */
static Datum
put_stored_as(Datum stored, Oid typid, Oid want)
{
	Oid			output;
	bool		varlena;
	char	   *s;

	if (getBaseType(typid) == want)
		return stored;
	getTypeOutputInfo(typid, &output, &varlena);
	s = OidOutputFunctionCall(output, stored);
	return want == JSONBOID ? DirectFunctionCall1(jsonb_in, CStringGetDatum(s)) :
		CStringGetTextDatum(s);
}

/*
 * Refuse the put when the row found in the log, outbox_retry or outbox_dead
 * (heap, in slot) under its key's id holds another event than ev: another
 * payload, aggregate id, type, headers or aggregate type (22023, naming
 * the first that differs).  The same event again is the put's idempotency.
 */
static void
put_check_same_event(Relation heap, TupleTableSlot *slot, const PutEvent *ev)
{
	static const char *const columns[] = {
		"payload", "aggregateid", "type", "headers", "aggregatetype"
	};
	static const char *const arguments[] = {
		"payload", "aggregate_id", "type", "headers", "aggregate_type"
	};
	TupleDesc	desc = RelationGetDescr(heap);

	for (int c = 0; c < lengthof(columns); c++)
	{
		AttrNumber	attnum = InvalidAttrNumber;
		Datum		stored;
		bool		isnull;
		bool		same;

		for (int i = 0; i < desc->natts; i++)
			if (!TupleDescAttr(desc, i)->attisdropped &&
				strcmp(NameStr(TupleDescAttr(desc, i)->attname), columns[c]) == 0)
				attnum = i + 1;
		if (attnum == InvalidAttrNumber)
			continue;			/* a table of the owner's own shape: not
								 * compared */
		stored = slot_getattr(slot, attnum, &isnull);
		if (!isnull)
			stored = put_stored_as(stored, TupleDescAttr(desc, attnum - 1)->atttypid,
								   c == 0 || c == 3 ? JSONBOID : TEXTOID);
		switch (c)
		{
			case 0:
				same = put_same_jsonb(stored, isnull, ev->payload);
				break;
			case 3:
				same = put_same_jsonb(stored, isnull, ev->headers);
				break;
			case 1:
				same = put_same_text(stored, isnull, ev->aggregate_id);
				break;
			case 2:
				same = put_same_text(stored, isnull, ev->type);
				break;
			default:
				same = put_same_text(stored, isnull, ev->aggregate_type);
				break;
		}
		if (!same)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("outbox key \"%s\" of topic \"%s\" was put with another event",
							text_to_cstring(ev->key), text_to_cstring(ev->topic)),
					 errdetail("Its %s differs from that of the event put first, which the outbox keeps.",
							   arguments[c]),
					 errhint("Put a new event under a new key; the same event put again returns its id.")));
	}
}

/*
 * Whether outbox_retry or outbox_dead (table) holds the event of this id,
 * committed or written by a transaction in progress (a dirty snapshot: not
 * the statement's, which does not see a nack or a redrive that committed
 * after it was taken): such an event is not put again (and must be ev).
 * Only events the 1.0 -> 1.1 update moved there are found here and not in
 * the log (the trim keeps the log's row of every other event held in
 * either, outbox_trim()).  The caller looks in outbox_retry first, then in
 * outbox_dead, holding the event's lock: an event moves from outbox_dead to
 * outbox_retry only by a redrive, which waits for that lock before it
 * commits (dedup.outbox_wait_events()), so no redrive commits between the
 * two look-ups; one in progress leaves the event in both to a dirty
 * snapshot.
 */
static bool
put_event_held(DedupRelation table, const DedupFingerprint *part, const pg_uuid_t *id,
			   const PutEvent *ev)
{
	Relation	heap;
	Relation	index;
	ScanKeyData skey[2];
	int			nkeys;
	TupleTableSlot *slot;
	IndexScanDesc scan;
	SnapshotData dirty;
	bool		found;

	if (!outbox_distributed())
	{
		/*
		 * A table with no pages (these two have none unless events failed)
		 * holds no event: no look-up
		 */
		bool		empty;

		heap = dedup_catalog_relation_open(table, AccessShareLock);
		empty = RelationGetNumberOfBlocks(heap) == 0;
		table_close(heap, NoLock);
		if (empty)
			return false;
	}
	put_open(table, part, &heap, &index);
	nkeys = put_id_scankeys(index, part, id, skey);
	slot = table_slot_create(heap, NULL);
	InitDirtySnapshot(dirty);
	scan = dedup_index_beginscan(heap, index, &dirty, nkeys, 0);
	index_rescan(scan, skey, nkeys, NULL, 0);
	found = index_getnext_slot(scan, ForwardScanDirection, slot);
	if (found)
		put_check_same_event(heap, slot, ev);
	index_endscan(scan);
	ExecDropSingleTupleTableSlot(slot);
	index_close(index, NoLock);
	table_close(heap, NoLock);
	return found;
}

/*
 * Whether the log has the event of this id, committed or written by a
 * transaction in progress (waited for, then looked up again), with the
 * event's lock taken, which the caller holds until it has inserted the
 * event or found it: so two puts of one id never both insert it, without
 * the speculative insertion of ON CONFLICT and its WAL record.  A row
 * inserted by this transaction counts; one a REPEATABLE READ or
 * SERIALIZABLE snapshot cannot see is 40001, as for a claim.  The event
 * found must be ev.
 */
static bool
put_event_exists(const DedupFingerprint *part, const pg_uuid_t *id, LOCKTAG *tag,
				 const PutEvent *ev)
{
	Relation	heap;
	Relation	index;
	TupleTableSlot *slot;
	SnapshotData dirty;
	ScanKeyData skey[2];
	int			nkeys;
	IndexScanDesc scan;
	bool		found;

	put_open(DEDUP_REL_OUTBOX, part, &heap, &index);
	slot = table_slot_create(heap, NULL);
	outbox_event_locktag(tag, id);
	InitDirtySnapshot(dirty);
	nkeys = put_id_scankeys(index, part, id, skey);
	scan = dedup_index_beginscan(heap, index, &dirty, nkeys, 0);
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
	if (found)
		put_check_same_event(heap, slot, ev);
	index_endscan(scan);
	ExecDropSingleTupleTableSlot(slot);
	index_close(index, NoLock);
	table_close(heap, NoLock);
	return found;
}


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
 * setval().  It is moved PUT_SEQ_CATCH_UP_GAP further still: a put's
 * nextval() is not atomic with the check, and the numbers other puts take
 * meanwhile (fewer than that) stay below the new ones.  The lock is let go
 * at once, as setval() itself is not transactional.  Inside SPI, as the
 * owner of the outbox.
 */
#define PUT_SEQ_CATCH_UP_GAP INT64CONST(1048576)

static void
put_sequence_catch_up(const DedupFingerprint *part, text *topic)
{
	static uint64 checked_generation = 0;
	static List *checked = NIL; /* "number/topic" caught up, in
								 * TopMemoryContext */
	Oid			seq = dedup_catalog_relation_lookup(DEDUP_REL_OUTBOX_SEQ);
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
	if (checked_generation != dedup_shards_generation() || list_length(checked) > 1000)
	{
		list_free_deep(checked);
		checked = NIL;
		checked_generation = dedup_shards_generation();
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
										   Int64GetDatum(used + PUT_SEQ_CATCH_UP_GAP));
			UnlockRelationOid(seq, ShareUpdateExclusiveLock);
		}
	}
	old = MemoryContextSwitchTo(TopMemoryContext);
	checked = lappend(checked, pstrdup(name));
	MemoryContextSwitchTo(old);
}

/*
 * Insert the event row, directly (put_insert_direct()) or through a
 * kept plan, as the owner of dedup.outbox; true if it was inserted.  The
 * caller found no event of that id in the log, outbox_retry or the dead
 * letters.  The topic's producer lock is
 * taken first, before the row gets its seq.  A database whose extension is
 * still at 1.0 (the library updated, ALTER EXTENSION UPDATE not yet run)
 * has no outbox_retry, and its insert looks its dead letters and its keys
 * up itself.
 */
static bool
put_insert(bool at_1_0, const DedupFingerprint *part, pg_uuid_t *id, text *topic,
		   text *aggregate_type, text *aggregate_id, text *type, Jsonb *payload,
		   Jsonb *headers)
{
	Datum		values[PUT_INSERT_NARGS];
	char		nulls[PUT_INSERT_NARGS] = {' ', ' ', ' ', ' ', ' ', ' ', ' ', ' '};
	Oid			owner;
	Oid			save_userid;
	int			save_sec_context;
	bool		inserted;
	int			rc;
	LOCKTAG		tag;

	outbox_topic_locktag(&tag, topic);
	(void) LockAcquire(&tag, RowExclusiveLock, false, false);
	if (!at_1_0 && !outbox_distributed() &&
		put_insert_direct(part, id, topic, aggregate_type, aggregate_id, type, payload,
						  headers))
		return true;
	owner = dedup_catalog_relation_owner(DEDUP_REL_OUTBOX);
	GetUserIdAndSecContext(&save_userid, &save_sec_context);
	SetUserIdAndSecContext(owner, save_sec_context | SECURITY_LOCAL_USERID_CHANGE);
	SPI_connect();
	if (put_insert_plans[at_1_0] == NULL)
	{
		Oid			argtypes[PUT_INSERT_NARGS] = {
			UUIDOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID, JSONBOID, JSONBOID,
			dedup_catalog_fingerprint_type()
		};
		SPIPlanPtr	plan;

		/*
		 * A database still at 1.0 has one outbox, with no partitions.  At 1.1
		 * a plain VALUES: on a Citus cluster, a statement Citus routes
		 * without planning a query (about a fifth of the cost of the INSERT
		 * ... SELECT with its look-ups, measured)
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
						   PUT_INSERT_NARGS, argtypes);

		if (plan == NULL)
			elog(ERROR, "could not prepare the outbox insert: %s",
				 SPI_result_code_string(SPI_result));
		SPI_keepplan(plan);
		put_insert_plans[at_1_0] = plan;
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
		put_sequence_catch_up(part, topic);
	rc = SPI_execute_plan(put_insert_plans[at_1_0], values, nulls, false, 0);

	/*
	 * A rule of the owner's may have made the INSERT other commands
	 * (SPI_OK_REWRITTEN): the put did what the INSERT does, and counts as
	 * one, whatever the rule made of the row
	 */
	if (rc != SPI_OK_INSERT && rc != SPI_OK_REWRITTEN)
		elog(ERROR, "could not insert an outbox event: %s", SPI_result_code_string(rc));
	inserted = (rc == SPI_OK_REWRITTEN || SPI_processed > 0);
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

static const char *const put_columns[OUTBOX_NCOLS] = {
	"seq", "id", "topic", "aggregatetype", "aggregateid", "type", "payload", "headers",
	"created_at", "part"
};

/* Each column's type as sql/tables/outbox.sql creates it (part: the fingerprint's) */
static const Oid put_column_types[OUTBOX_NCOLS] = {
	INT8OID, UUIDOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID, JSONBOID, JSONBOID,
	TIMESTAMPTZOID, InvalidOid
};

/*
 * The verdict on the shape of dedup.outbox (put_shape_direct()), kept per
 * backend for one generation of catalog.c's relation OIDs: those are
 * forgotten at every relcache invalidation of the log (any change to its
 * columns, defaults, constraints, rules, triggers, row security or indexes
 * sends one), and at a DROP or CREATE EXTENSION, so the verdict is taken
 * again after any of them, and not per put.
 */
static struct
{
	uint64		generation;		/* dedup_catalog_relation_generation() it
								 * holds for */
	Oid			relid;			/* the log it is of; InvalidOid: none yet */
	bool		direct;			/* the log is dedup's shape: write it directly */
	int			attnum[OUTBOX_NCOLS];	/* each column's number in the log */
	List	   *indexes;		/* the log's indexes, in TopMemoryContext */
} put_shape;

/* Whether column c of the log (number attnum there) has the default dedup gives it. */
static bool
put_shape_default(Relation heap, int c, AttrNumber attnum)
{
	TupleConstr *constr = RelationGetDescr(heap)->constr;
	Node	   *expr = NULL;

	for (int i = 0; constr != NULL && i < constr->num_defval; i++)
		if (constr->defval[i].adnum == attnum)
			expr = stringToNode(constr->defval[i].adbin);
	if (c == OUTBOX_COL_HEADERS)
	{
		/* '{}': the default a put without headers writes (empty_headers) */
		Const	   *con = (Const *) expr;
		Jsonb	   *j;

		if (expr == NULL || !IsA(expr, Const) || con->consttype != JSONBOID || con->constisnull)
			return false;
		j = DatumGetJsonbP(con->constvalue);
		return JB_ROOT_IS_OBJECT(j) && JB_ROOT_COUNT(j) == 0;
	}
	if (c == OUTBOX_COL_CREATED_AT)
	{
		/* now(): the transaction's start, which the direct insert writes */
		return expr != NULL && IsA(expr, FuncExpr) &&
			((FuncExpr *) expr)->funcid == F_NOW && ((FuncExpr *) expr)->args == NIL;
	}
	return expr == NULL;
}

/*
 * What makes the log other than the shape dedup created, where an INSERT
 * would do something the direct insert does not; NULL when it is that
 * shape, with *attnum each column's number and *indexes the log's indexes.
 * Every column as sql/tables/outbox.sql creates it: its name, type and
 * typmod (no domain, no varchar(n), payload jsonb, not json), collation,
 * NOT NULL, identity (seq from dedup.outbox_seq_seq) and default (headers
 * '{}', created_at now(), none else), and no column more (dropped ones
 * aside); a heap table, not a partition, with no CHECK constraint, rule,
 * trigger (foreign keys and deferred unique constraints have theirs) or
 * row security.  Its indexes need not be exactly dedup's two: an INSERT
 * adds a row to an index on plain columns, with no predicate, that is not
 * an exclusion constraint, ready, and immediate if unique, by just the
 * index_insert() the direct insert makes (ExecInsertIndexTuples()), so an
 * index of the owner's of that kind is written the same either way; any
 * other (an expression, a predicate, an exclusion constraint, one being
 * built) sends the put to SPI.
 */
static const char *
put_shape_misfit(Relation heap, int *attnum, List **indexes)
{
	TupleDesc	desc = RelationGetDescr(heap);
	List	   *oids;
	ListCell   *lc;

	*indexes = NIL;
	if (heap->rd_rel->relkind != RELKIND_RELATION || heap->rd_rel->relam != HEAP_TABLE_AM_OID ||
		heap->rd_rel->relispartition)
		return "It is not a plain heap table.";
	if (heap->trigdesc != NULL)
		return "It has a trigger.";
	if (heap->rd_rel->relrowsecurity)
		return "It has row security enabled.";
	if (heap->rd_rules != NULL)
		return "It has a rule.";
	if (desc->constr != NULL && desc->constr->num_check > 0)
		return "It has a CHECK constraint.";
	for (int c = 0; c < OUTBOX_NCOLS; c++)
		attnum[c] = 0;
	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);
		int			c;
		Oid			type;
		Oid			collation;

		if (att->attisdropped)
			continue;
		for (c = 0; c < OUTBOX_NCOLS; c++)
			if (strcmp(NameStr(att->attname), put_columns[c]) == 0)
				break;
		if (c == OUTBOX_NCOLS)
			return psprintf("It has a column of its own, \"%s\".", NameStr(att->attname));
		attnum[c] = i + 1;
		type = c == OUTBOX_COL_PART ? dedup_catalog_fingerprint_type() : put_column_types[c];
		collation = c == OUTBOX_COL_TOPIC ? C_COLLATION_OID :
			type == TEXTOID ? DEFAULT_COLLATION_OID : InvalidOid;
		if (att->atttypid != type || att->atttypmod != -1)
			return psprintf("Its column \"%s\" is of type %s.", NameStr(att->attname),
							format_type_with_typemod(att->atttypid, att->atttypmod));
		if (att->attcollation != collation)
			return psprintf("Its column \"%s\" has another collation.", NameStr(att->attname));
		if (att->attnotnull != (c != OUTBOX_COL_PAYLOAD))
			return psprintf("Its column \"%s\" is %s.", NameStr(att->attname),
							att->attnotnull ? "NOT NULL" : "nullable");
		if (att->attgenerated)
			return psprintf("Its column \"%s\" is generated.", NameStr(att->attname));
		if (c == OUTBOX_COL_SEQ ?
			att->attidentity != ATTRIBUTE_IDENTITY_ALWAYS ||
			dedup_identity_sequence(heap, att->attnum, true) !=
			dedup_catalog_relation_lookup(DEDUP_REL_OUTBOX_SEQ) :
			att->attidentity != '\0' || !put_shape_default(heap, c, att->attnum))
			return psprintf("Its column \"%s\" has another default.", NameStr(att->attname));
	}
	for (int c = 0; c < OUTBOX_NCOLS; c++)
		if (attnum[c] == 0)
			return psprintf("It has no column \"%s\".", put_columns[c]);
	oids = RelationGetIndexList(heap);
	foreach(lc, oids)
	{
		Relation	index = index_open(lfirst_oid(lc), AccessShareLock);
		Form_pg_index form = index->rd_index;
		const char *misfit = NULL;

		if (RelationGetIndexExpressions(index) != NIL)
			misfit = "is on an expression";
		else if (RelationGetIndexPredicate(index) != NIL)
			misfit = "has a predicate";
		else if (form->indisexclusion)
			misfit = "is an exclusion constraint";
		else if (!form->indisvalid || !form->indisready || !form->indislive)
			misfit = "is not valid";
		else if (form->indisunique && !form->indimmediate)
			misfit = "is a deferred unique constraint";
		if (misfit != NULL)
			misfit = psprintf("Its index \"%s\" %s.", RelationGetRelationName(index), misfit);
		index_close(index, NoLock);
		if (misfit != NULL)
		{
			list_free(oids);
			return misfit;
		}
	}
	*indexes = oids;
	return NULL;
}

/*
 * Whether the direct insert may write the log (opened, heap): whether it
 * is the shape dedup created, which an INSERT would write as the direct
 * insert does (put_shape_misfit()).  Decided once per generation of the
 * relation OIDs (put_shape), and said at DEBUG1.
 */
static bool
put_shape_direct(Relation heap)
{
	while (put_shape.relid != RelationGetRelid(heap) ||
		   put_shape.generation != dedup_catalog_relation_generation())
	{
		uint64		generation = dedup_catalog_relation_generation();
		int			attnum[OUTBOX_NCOLS];
		List	   *indexes;
		const char *misfit = put_shape_misfit(heap, attnum, &indexes);
		MemoryContext old;

		if (generation != dedup_catalog_relation_generation())
		{
			/* an invalidation came meanwhile: look again */
			list_free(indexes);
			continue;
		}
		list_free(put_shape.indexes);
		old = MemoryContextSwitchTo(TopMemoryContext);
		put_shape.	indexes = list_copy(indexes);

		MemoryContextSwitchTo(old);
		list_free(indexes);
		memcpy(put_shape.attnum, attnum, sizeof(attnum));

		/*
		 * The kept plan of the 1.1 insert is made again too: the plan cache
		 * forgets one that a rule made nothing (DO INSTEAD NOTHING) at no
		 * change of the log, since it names no relation, not even at the
		 * rule's drop
		 */
		if (put_insert_plans[0] != NULL)
			SPI_freeplan(put_insert_plans[0]);
		put_insert_plans[0] = NULL;
		put_shape.	direct = (misfit == NULL);
		put_shape.	relid = RelationGetRelid(heap);
		put_shape.	generation = generation;

		if (misfit == NULL)
			ereport(DEBUG1,
					(errmsg_internal("dedup.outbox has the shape dedup created: puts write it directly")));
		else
			ereport(DEBUG1,
					(errmsg_internal("dedup.outbox is not of the shape dedup created: puts insert through SPI"),
					 errdetail_internal("%s", misfit)));
	}
	return put_shape.direct;
}

/*
 * Insert the event row into the log (dedup.outbox on one server, at 1.1)
 * and its indexes directly: heap_insert() and index_insert(), as a plain
 * INSERT would, with the defaults of the columns (seq from the identity
 * sequence, created_at the transaction's start, which is now(), headers
 * {}), then a command counter increment so that the next put of this
 * statement sees it.  Only while the log is the shape dedup created
 * (put_shape_direct()), where that is all an INSERT would do; otherwise
 * (another type, a typmod or a domain, a CHECK or exclusion constraint, a
 * rule, a trigger, row security, a column or default of the owner's, an
 * index on an expression or with a predicate) returns false, having
 * written nothing, and the caller inserts through SPI, which enforces it
 * all.  The topic's producer lock is the caller's.
 */
static bool
put_insert_direct(const DedupFingerprint *part, pg_uuid_t *id, text *topic,
				  text *aggregate_type, text *aggregate_id, text *type, Jsonb *payload,
				  Jsonb *headers)
{
	Relation	heap = dedup_catalog_relation_open(DEDUP_REL_OUTBOX, RowExclusiveLock);
	TupleDesc	desc = RelationGetDescr(heap);
	int		   *attnum;
	Datum	   *values;
	bool	   *nulls;
	HeapTuple	tuple;
	ListCell   *lc;
	Relation   *index_rels;
	int			nindexes;
	static Jsonb *empty_headers = NULL;

	for (;;)
	{
		uint64		generation;

		if (!put_shape_direct(heap))
		{
			table_close(heap, NoLock);
			return false;
		}
		/* the verdict's indexes, locked; taken again if that let one change */
		generation = put_shape.generation;

		nindexes = 0;
		index_rels = palloc(sizeof(Relation) * Max(list_length(put_shape.indexes), 1));
		foreach(lc, put_shape.indexes)
			index_rels[nindexes++] = index_open(lfirst_oid(lc), RowExclusiveLock);
		if (generation == dedup_catalog_relation_generation())
			break;
		for (int i = 0; i < nindexes; i++)
			index_close(index_rels[i], NoLock);
		pfree(index_rels);
	}
	attnum = put_shape.attnum;

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
			   Int64GetDatum(nextval_internal(dedup_catalog_relation_oid(DEDUP_REL_OUTBOX_SEQ), false)));
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
	for (int i = 0; i < nindexes; i++)
	{
		Relation	index = index_rels[i];
		IndexInfo  *info = BuildIndexInfo(index);
		Datum		ivalues[INDEX_MAX_KEYS];
		bool		inulls[INDEX_MAX_KEYS];

		for (int k = 0; k < info->ii_NumIndexAttrs; k++)
		{
			AttrNumber	a = info->ii_IndexAttrNumbers[k];

			ivalues[k] = values[a - 1];
			inulls[k] = nulls[a - 1];
		}
		index_insert(index, ivalues, inulls, &tuple->t_self, heap,
					 index->rd_index->indisunique ? UNIQUE_CHECK_YES : UNIQUE_CHECK_NO,
					 false, info);
		index_close(index, NoLock);
	}
	pfree(index_rels);
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
	put_plans_check();
	aggregate_id = put_text_arg(fcinfo, 3, "aggregate_id");
	type = put_text_arg(fcinfo, 4, "type");
	headers = PG_ARGISNULL(5) ? NULL : PG_GETARG_JSONB_P(5);
	aggregate_type = put_text_arg(fcinfo, 6, "aggregate_type");

	dedup_fingerprint_key_arg(fcinfo, 1, topic, -1, &fp);
	put_event_key(&fp);
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
		if (dedup_routing_route_key(fcinfo, DEDUP_REL_OUTBOX, &part, &result))
			return result;
	}
	put_lock_aggregate(topic, aggregate_id ? aggregate_id : key);
	at_1_0 = !OidIsValid(dedup_catalog_relation_lookup(DEDUP_REL_OUTBOX_TOPICS));
	if (at_1_0)
	{
		/* 1.0's relay deletes what it acks: the key is kept on its own */
		KeyStore	ks;

		key_store_open(&ks, DEDUP_REL_OUTBOX_KEYS, topic, NULL, true);
		is_new = key_store_claim(&ks, &fp,
								 dedup_check_timestamp_plus(ks.now, &settings.value[DEDUP_SCOPE_RETENTION]),
								 false);
		key_store_close(&ks);
	}
	else if (!outbox_distributed() && put_legacy_key(topic, &fp))
		is_new = false;			/* (a cluster has none: dedup_distribute()
								 * wants none) */
	else
	{
		PutEvent	ev = {topic, key, payload, headers, type ? type : topic,
		aggregate_id ? aggregate_id : key, aggregate_type ? aggregate_type : topic};

		is_new = !put_event_exists(&part, (pg_uuid_t *) fp.bytes, &event_lock, &ev);
		event_locked = true;
		/* nor an event held back, nacked, redriven, or dead */
		is_new = is_new &&
			!put_event_held(DEDUP_REL_OUTBOX_RETRY, &part, (pg_uuid_t *) fp.bytes, &ev) &&
			!put_event_held(DEDUP_REL_OUTBOX_DEAD, &part, (pg_uuid_t *) fp.bytes, &ev);
	}
	if (is_new && put_insert(at_1_0, &part, (pg_uuid_t *) fp.bytes, topic,
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
			outbox_wake(topic);
		dedup_scope_counters_count(settings.counters, DEDUP_COUNT_EVENTS_PUT, 1);
	}
	/* the event is in the log (or not to be put): other puts of it may look */
	if (event_locked)
		LockRelease(&event_lock, ExclusiveLock, false);
	id = palloc(sizeof(pg_uuid_t));
	memcpy(id->data, fp.bytes, UUID_LEN);
	PG_RETURN_UUID_P(id);
}
