/*-------------------------------------------------------------------------
 *
 * outbox.c
 *	  What the outbox's put (outbox_put.c) and its relay (outbox_relay.c,
 *	  outbox_fast.c, outbox_cluster.c) share: the partitions and their
 *	  numbers, batch ids, the producers' topic lock and the relay lock, and
 *	  the settled sequence a take reads the log up to.
 *
 * The outbox is kept in partitions (sql/tables/outbox.sql): every row of
 * the relay's tables names its partition, part, and an event goes to the
 * partition of its aggregate, outbox_partition().  On one server there is
 * one, number 0.  A batch's id carries its partition's number.
 *
 * Every producer of a topic holds a lock of the topic (RowExclusiveLock,
 * which producers share) from before its event gets its sequence number
 * until it commits: outbox_stable_seq() reads the sequence, then waits for
 * the holders of that lock, after which every number up to what it read is
 * settled (committed or rolled back), and a relay may read the log up to
 * it without passing an event that could still commit.
 *
 * The relay lock of a topic in a partition serializes its takes: each
 * sees what the one before committed.
 *
 * Wake-ups.  A put that inserted an event wakes the relays that wait on
 * NOTIFY dedup_outbox (outbox_wake()).  PostgreSQL serializes the commits
 * of the transactions that notify (PreCommit_Notify holds a lock of the
 * database from before the commit record until after it), which costs
 * the producers' throughput (doc/benchmarks.md, "Notify only while a relay
 * listens").  So a put notifies only while a session of its database has run
 * LISTEN dedup_outbox: each backend's entry in shared memory names the
 * database it listens in, set as its LISTEN runs (module.c's utility
 * hook), before the LISTEN commits, and cleared only when the backend
 * exits (an UNLISTEN, or the LISTEN rolled back, leaves it: a wake-up too
 * many, never one too few).  No wake-up is lost to the look before the
 * LISTEN: a relay LISTENs, then takes, and a take first waits for the
 * puts of its topic in progress (outbox_wait_puts()), even one that finds
 * the log empty; a put looks after it holds its topic's lock, which it
 * keeps until it commits, so a put that looked before the LISTEN is one
 * the take after it waits for and then sees.
 * Without shared memory (dedup not preloaded) every put notifies, as 1.0
 * did.
 *
 * A take that waits (dedup_outbox_take_batch's wait) is woken by the commit
 * itself, with no LISTEN (so through a pooler too): it counts itself in its
 * topic's slot of OUTBOX_WAIT_SLOTS in shared memory and sleeps on the
 * slot's condition variable; a transaction that put events notes their
 * topics' slots, and as it commits (XACT_EVENT_COMMIT, after the commit is
 * visible) it moves on the generation of, and broadcasts, each slot where
 * a take waits; a slot where none waits costs the commit one read.  A
 * rolled back put, or subtransaction, takes its slots with it.  No commit
 * wakes a take for a lease passing or a retry falling due: it polls for
 * those every 100 ms.  Without shared memory the take only polls.  A transaction whose put inserted an event cannot be prepared
 * (0A000), whether or not it notified: whether PREPARE TRANSACTION works
 * must not depend on another session listening.
 *
 * Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type_d.h"
#include "commands/async.h"
#include "commands/sequence.h"
#include "common/hashfn.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "port/atomics.h"
#include "storage/condition_variable.h"
#include "storage/ipc.h"
#include "storage/lmgr.h"
#include "storage/lwlock.h"
#include "storage/procarray.h"
#include "storage/shmem.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/uuid.h"

#include "catalog.h"
#include "compat.h"
#include "fingerprint.h"
#include "outbox.h"
#include "settings.h"
#include "shards.h"

/*
 * The backends listening on the outbox's channel, in shared memory: the
 * number of them, and each backend's database (InvalidOid for one that
 * does not listen), by backend id.
 */
typedef struct OutboxListeners
{
	pg_atomic_uint32 count;
	pg_atomic_uint32 database[FLEXIBLE_ARRAY_MEMBER];
} OutboxListeners;

static OutboxListeners *outbox_listeners = NULL;
static bool outbox_listening = false;	/* this backend's entry is set */

/*
 * The waiting takes, in shared memory: OUTBOX_WAIT_SLOTS slots, a topic's
 * the hash of its database and name (topics that share a slot wake each
 * other's takes for nothing, which then take nothing and wait again).  In
 * each, the number of takes waiting there, the generation, which a commit
 * that wakes them moves on, and the condition variable they sleep on.
 */
#define OUTBOX_WAIT_SLOTS 64	/* the bits of outbox_wake_slots */

typedef struct OutboxWaitSlot
{
	pg_atomic_uint32 waiters;
	pg_atomic_uint64 generation;
	ConditionVariable cv;
} OutboxWaitSlot;

static OutboxWaitSlot *outbox_wait_slots = NULL;

/* The slots whose takes this transaction wakes as it commits */
static uint64 outbox_wake_slots = 0;

/* The slot this backend's take waits in, and its generation as last read */
static OutboxWaitSlot *outbox_waiting = NULL;
static uint64 outbox_waiting_generation = 0;

static void outbox_wait_exit(int code, Datum arg);

/*
 * The lowest transaction nesting level at which this transaction woke the
 * relays, 0 for none: a subtransaction rolled back takes its wake-ups
 * with it, as it takes its NOTIFYs.
 */
static int	outbox_woke_level = 0;
static bool outbox_wake_callbacks = false;

/* The kept plan of the sequence check on a cluster, and its type's OID */
static SPIPlanPtr outbox_last_seq_plan = NULL;
static Oid	outbox_last_seq_type = InvalidOid;

/*
 * Whether kept plans made with the fingerprint type *made_with must be made
 * again (then *made_with is set to the type of now).  The kept plans name
 * the fingerprint's type by OID among their parameters, and the plan cache
 * never looks a parameter's type up again: once the extension is dropped
 * and created again, in any session, a plan kept before fails with "cache
 * lookup failed for type".  Each file that keeps plans checks them, before
 * it runs one, and frees them when this says so.
 */
bool
outbox_plans_stale(Oid *made_with)
{
	Oid			type = dedup_catalog_fingerprint_type();

	if (type == *made_with)
		return false;
	*made_with = type;
	return true;
}

/* The number of a partition, from its part. */
uint32
outbox_part_number(const DedupFingerprint *part)
{
	return ((uint32) part->bytes[0] << 24) | ((uint32) part->bytes[1] << 16) |
		((uint32) part->bytes[2] << 8) | (uint32) part->bytes[3];
}

/* Whether the outbox is distributed by Citus (dedup_distribute()). */
bool
outbox_distributed(void)
{
	return dedup_catalog_relation_hashed(DEDUP_REL_OUTBOX);
}

/*
 * The partition the events of an aggregate go to: on one server, the one
 * there is; on a Citus cluster, that of the shard of dedup.claims that
 * holds the aggregate's key, the fingerprint of (topic, aggregate id), so
 * that a business table distributed by dedup_key(topic, aggregate id) has
 * its rows in the same shard as the aggregate's events.
 */
void
outbox_partition(const text *topic, text *aggregate_id, DedupFingerprint *part)
{
	if (outbox_distributed())
	{
		DedupFingerprint afp;

		dedup_fingerprint_key_datum(PointerGetDatum(aggregate_id), -1, topic, &afp);
		dedup_shards_partition(&afp, part);
	}
	else
		dedup_shards_outbox_part(0, part);
}

/*
 * A batch's id: its partition's number times 2^47, plus a number from the
 * node's counter of batches (dedup.outbox_batch_ids, from 1, below 2^47),
 * which every take that hands a batch out, or out again, draws anew: no
 * id is ever given to two batches (1.1's first ids had a slot's generation
 * in them, and retired a slot at its last one).  Both paths draw it here (the fast path directly,
 * the PL/pgSQL one through dedup.outbox_batch_new_id()).
 */
int64
outbox_batch_new_id(const DedupFingerprint *part)
{
	uint32		number = outbox_part_number(part);
	Oid			seq;
	int64		counter;

	if (number > DEDUP_OUTBOX_MAX_PARTITION)
		elog(ERROR, "an outbox batch of partition %u has no id", number);

	/*
	 * The node's own counter, on a Citus worker too (looked up, not through
	 * dedup_catalog_relation_oid(), which refuses a worker's copy of what is
	 * not distributed); the sequence's own checks: its MAXVALUE is
	 * OUTBOX_BATCH_MAX_COUNTER
	 */
	seq = dedup_catalog_relation_lookup(DEDUP_REL_OUTBOX_BATCH_IDS);
	if (!OidIsValid(seq))
		(void) dedup_catalog_relation_oid(DEDUP_REL_OUTBOX_BATCH_IDS);	/* its error */
	counter = nextval_internal(seq, false);
	Assert(counter > 0 && counter <= OUTBOX_BATCH_MAX_COUNTER);
	return ((int64) number << OUTBOX_BATCH_PART_SHIFT) | counter;
}

/* The kept plan of outbox_batch_top(), and its type's OID */
static SPIPlanPtr outbox_top_plan = NULL;
static Oid	outbox_top_type = InvalidOid;

/*
 * The greatest id of partition part's batch rows at or above from, or 0
 * with none: a partition's ids are a range of their own (its number in the
 * bits above OUTBOX_BATCH_PART_SHIFT), read by the primary key from its top
 * down.  Runs its own SPI.
 */
static int64
outbox_batch_top(const DedupFingerprint *part, int64 from)
{
	Datum		args[3];
	bool		isnull;
	int64		top = 0;

	args[0] = PointerGetDatum(part);
	args[1] = Int64GetDatum(from);
	args[2] = Int64GetDatum(((int64) outbox_part_number(part) << OUTBOX_BATCH_PART_SHIFT) |
							OUTBOX_BATCH_MAX_COUNTER);
	SPI_connect();
	if (outbox_plans_stale(&outbox_top_type) && outbox_top_plan != NULL)
	{
		SPI_freeplan(outbox_top_plan);
		outbox_top_plan = NULL;
	}
	if (outbox_top_plan == NULL)
	{
		Oid			argtypes[3] = {dedup_catalog_fingerprint_type(), INT8OID, INT8OID};
		SPIPlanPtr	plan;

		/*
		 * planned with its values each time: a generic plan made while the
		 * table was small read it whole, and kept, went on doing so as it
		 * grew (a drain slowed as it went)
		 */
		plan = SPI_prepare_cursor(psprintf("SELECT x.id FROM dedup.outbox_batches AS x"
										   " WHERE x.part %s $1 AND x.id OPERATOR(pg_catalog.>=) $2"
										   " AND x.id OPERATOR(pg_catalog.<=) $3"
										   " ORDER BY x.id DESC LIMIT 1",
										   dedup_catalog_fingerprint_eq()),
								  3, argtypes, CURSOR_OPT_CUSTOM_PLAN);
		if (plan == NULL)
			elog(ERROR, "could not prepare the outbox's batch id check: %s",
				 SPI_result_code_string(SPI_result));
		SPI_keepplan(plan);
		outbox_top_plan = plan;
	}
	if (SPI_execute_plan(outbox_top_plan, args, NULL, false, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not read the outbox partition's batch ids");
	if (SPI_processed == 1)
		top = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1,
										  &isnull));
	SPI_finish();
	return top;
}

/*
 * A new batch's id above above (the id of its topic's newest batch row in
 * the partition, or 0) and above every id of the partition: a topic's
 * position and low mark are read from its newest row, so its ids must grow
 * with each take, and an id is a batch's in its partition, whatever its
 * topic.  The node's counter may be behind a partition's ids (its shard
 * moved here from a node whose counter was ahead; a database copied
 * without its sequences, as logical replication copies it): then it is
 * set past the partition's greatest id, under the counter's ExclusiveLock,
 * which waits for every transaction that drew from it (nextval holds
 * RowExclusiveLock to the end) and keeps any other from drawing until this
 * one ends, so that the counter only moves forward past every id drawn.
 * Rare: once after such a move for each partition.  (Before, only past the
 * topic's newest: a take of another topic of the partition drew an id
 * whose row was there, 23505.)  Each draw checks the partition's ids from
 * the one drawn up, by the primary key: none, but after such a move.
 */
int64
outbox_batch_new_id_above(const DedupFingerprint *part, int64 above)
{
	int64		id = outbox_batch_new_id(part);
	uint32		number;
	int64		counter;
	Oid			seq;
	int64		top;

	top = outbox_batch_top(part, Max(id, above));
	if (id > above && top == 0)
		return id;
	above = Max(above, top);
	seq = dedup_catalog_relation_lookup(DEDUP_REL_OUTBOX_BATCH_IDS);
	LockRelationOid(seq, ExclusiveLock);

	/*
	 * Read again once the lock is granted: a transaction it waited for may
	 * have committed an id above what was read before (its row was not yet
	 * seen), and the counter set past only that would hand its id out again
	 */
	above = Max(above, outbox_batch_top(part, above));
	if (!outbox_batch_decode(above, &number, &counter) || number != outbox_part_number(part))
		elog(ERROR, "outbox batch %lld is not of partition %u", (long long) above,
			 outbox_part_number(part));
	id = outbox_batch_new_id(part);
	if (id > above)
		return id;
	(void) DirectFunctionCall2(setval_oid, ObjectIdGetDatum(seq), Int64GetDatum(counter));
	id = outbox_batch_new_id(part);
	Assert(id > above);
	return id;
}

/*
 * dedup.outbox_batch_new_id(in_part dedup_fingerprint, above bigint DEFAULT
 * NULL) RETURNS bigint: outbox_batch_new_id(), or, with above,
 * outbox_batch_new_id_above()
 */
PG_FUNCTION_INFO_V1(dedup_outbox_batch_new_id);
Datum
dedup_outbox_batch_new_id(PG_FUNCTION_ARGS)
{
	if (PG_ARGISNULL(0))
		elog(ERROR, "an outbox batch needs a partition");
	PG_RETURN_INT64(outbox_batch_new_id_above(PG_GETARG_DEDUP_FINGERPRINT_P(0),
											  PG_NARGS() > 1 && !PG_ARGISNULL(1) ?
											  PG_GETARG_INT64(1) : 0));
}

/*
 * The parts of a batch's id (outbox_batch_new_id()): its partition's
 * number and its counter's; false if no batch can have that id.  Every
 * reader of an id decodes it here: the partition an ack, nack or
 * heartbeat goes to (outbox_batch_part(), for both paths), the fast path's
 * ack; an id that decodes names a batch only if a row of
 * dedup.outbox_batches has it.
 */
bool
outbox_batch_decode(int64 batch_id, uint32 *number, int64 *counter)
{
	if (batch_id <= 0)
		return false;
	*number = (uint32) (batch_id >> OUTBOX_BATCH_PART_SHIFT);
	*counter = batch_id & OUTBOX_BATCH_MAX_COUNTER;
	return *counter > 0 && *number <= DEDUP_OUTBOX_MAX_PARTITION;
}

/*
 * A settle (ack, nack, heartbeat) holding batch batch_id's lock acts on its
 * newest row, of rev rev as its snapshot shows it.  Under a transaction
 * snapshot (REPEATABLE READ, SERIALIZABLE) a row a settle or take that held
 * the lock before appended, committed after the snapshot was taken, is not
 * in it: the batch acked, nacked or handed out again under a new id would
 * be settled once more from its old state (an event acked twice, one
 * acked put back, a batch handed out again made out under its old id too).
 * Such a settle fails as an UPDATE of a row updated since its snapshot
 * does (40001); under READ COMMITTED each statement sees what committed.
 */
void
outbox_batch_check_current(const DedupFingerprint *part, int64 batch_id, int32 rev)
{
	char	   *sql;
	Oid			argtypes[3];
	Datum		values[3];
	SPIPlanPtr	plan;
	int			rc;
	bool		later;

	if (!IsolationUsesXactSnapshot())
		return;
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "could not connect to SPI");
	sql = psprintf("SELECT FROM dedup.outbox_batches AS x WHERE x.part %s $1"
				   " AND x.id OPERATOR(pg_catalog.=) $2 AND x.rev OPERATOR(pg_catalog.>) $3",
				   dedup_catalog_fingerprint_eq());
	argtypes[0] = dedup_catalog_fingerprint_type();
	argtypes[1] = INT8OID;
	argtypes[2] = INT4OID;
	plan = SPI_prepare(sql, 3, argtypes);
	if (plan == NULL)
		elog(ERROR, "could not prepare \"%s\": %s", sql, SPI_result_code_string(SPI_result));
	values[0] = PointerGetDatum(part);
	values[1] = Int64GetDatum(batch_id);
	values[2] = Int32GetDatum(rev);
	/* read with a snapshot taken now: what committed since the transaction's */
	rc = SPI_execute_snapshot(plan, values, NULL, GetLatestSnapshot(), InvalidSnapshot,
							  true, false, 1);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "could not run \"%s\": %s", sql, SPI_result_code_string(rc));
	later = SPI_processed > 0;
	SPI_finish();
	if (later)
		ereport(ERROR,
				(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
				 errmsg("could not serialize access due to a concurrent settle of an outbox batch"),
				 errdetail("Batch %lld was acked, nacked, extended or handed out again after this transaction's snapshot was taken.",
						   (long long) batch_id),
				 errhint("Retry the transaction.")));
}

/*
 * dedup.outbox_batch_check_current(in_part dedup_fingerprint, bid bigint,
 *									rev integer): the check above, for the
 * PL/pgSQL settles (dedup.outbox_batch()).
 */
PG_FUNCTION_INFO_V1(dedup_outbox_batch_check_current);
Datum
dedup_outbox_batch_check_current(PG_FUNCTION_ARGS)
{
	outbox_batch_check_current(PG_GETARG_DEDUP_FINGERPRINT_P(0), PG_GETARG_INT64(1),
							   PG_GETARG_INT32(2));
	PG_RETURN_VOID();
}

/* dedup.outbox_batch_valid(batch_id bigint) RETURNS boolean */
PG_FUNCTION_INFO_V1(dedup_outbox_batch_valid);
Datum
dedup_outbox_batch_valid(PG_FUNCTION_ARGS)
{
	uint32		number;
	int64		counter;

	PG_RETURN_BOOL(outbox_batch_decode(PG_GETARG_INT64(0), &number, &counter));
}

/*
 * How far a take reads the log for room events of a batch of batch_size:
 * held events take no room, so it reads on past them, at most ten times
 * its room, never less than the batch, never more than
 * OUTBOX_MAX_BATCH_SIZE.
 */
int32
outbox_scan_limit(int32 batch_size, int32 room)
{
	int64		limit = Max((int64) batch_size, (int64) room * 10);

	return (int32) Min(limit, (int64) OUTBOX_MAX_BATCH_SIZE);
}

/* dedup.outbox_scan_limit(batch_size integer, room integer) RETURNS integer */
PG_FUNCTION_INFO_V1(dedup_outbox_scan_limit);
Datum
dedup_outbox_scan_limit(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT32(outbox_scan_limit(PG_GETARG_INT32(0), PG_GETARG_INT32(1)));
}

/*
 * A topic's position after a take that read scanned events of the log
 * from pos up to the settled sequence stable and kept (handed out or held
 * back) the first kept of them, the last of seq last: past the settled
 * sequence when it kept all it read and read less than its scan limit (it
 * read the log's whole rest up to stable), else past the last it kept.
 */
int64
outbox_next_position(int64 pos, int64 stable, int64 scanned, int64 kept, int32 scan_limit,
					 int64 last)
{
	if (kept == scanned && kept < scan_limit)
		return Max(pos, stable + 1);
	return last + 1;
}

/*
 * dedup.outbox_next_position(pos bigint, stable bigint, scanned bigint,
 *							  kept bigint, scan_limit integer, last bigint)
 *	RETURNS bigint
 */
PG_FUNCTION_INFO_V1(dedup_outbox_next_position);
Datum
dedup_outbox_next_position(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT64(outbox_next_position(PG_GETARG_INT64(0), PG_GETARG_INT64(1),
										 PG_GETARG_INT64(2), PG_GETARG_INT64(3),
										 PG_GETARG_INT32(4), PG_GETARG_INT64(5)));
}

/* dedup.outbox_max_batch_size() RETURNS integer: the most events a take hands out */
PG_FUNCTION_INFO_V1(dedup_outbox_max_batch_size);
Datum
dedup_outbox_max_batch_size(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT32(OUTBOX_MAX_BATCH_SIZE);
}

/* The partition of a batch's id: false if no batch can have that id. */
bool
outbox_batch_part(int64 batch_id, DedupFingerprint *part)
{
	uint32		number;
	int64		counter;

	if (!outbox_batch_decode(batch_id, &number, &counter))
		return false;
	dedup_shards_outbox_part(number, part);
	return true;
}

/*
 * 64 bits of a fingerprint (SHA-256) of a topic's name, and of the number
 * of a partition other than 0: the tags of the topic's producer lock and of
 * its relay locks.  No one can choose a name whose tag is another topic's,
 * as anyone could with a 32-bit hash of it: the producers of one topic
 * would then hold up the takes of the other.  The last one is kept, as a
 * producer or a relay names one topic again and again.
 */
static void
outbox_topic_hash(const text *topic, uint32 part_number, uint32 *hi, uint32 *lo)
{
	static char *last_topic = NULL; /* in TopMemoryContext */
	static Size last_len = 0;
	static uint32 last_part = 0;
	static uint32 last_hi;
	static uint32 last_lo;
	Size		len = VARSIZE_ANY_EXHDR(topic);
	DedupFingerprint fp;

	if (last_topic == NULL || last_len != len || last_part != part_number ||
		memcmp(last_topic, VARDATA_ANY(topic), len) != 0)
	{
		if (part_number == 0)
			dedup_fingerprint_key_datum(PointerGetDatum(topic), -1, topic, &fp);
		else
			dedup_fingerprint_key_datum(Int64GetDatum((int64) part_number), sizeof(int64), topic, &fp);
		memcpy(&last_hi, fp.bytes, sizeof(uint32));
		memcpy(&last_lo, fp.bytes + sizeof(uint32), sizeof(uint32));
		if (last_topic != NULL)
			pfree(last_topic);
		last_topic = MemoryContextAlloc(TopMemoryContext, Max(len, 1));
		memcpy(last_topic, VARDATA_ANY(topic), len);
		last_len = len;
		last_part = part_number;
	}
	*hi = last_hi;
	*lo = last_lo;
}

/* The lock of a topic its producers hold (see the header comment). */
void
outbox_topic_locktag(LOCKTAG *tag, const text *topic)
{
	uint32		hi;
	uint32		lo;

	outbox_topic_hash(topic, 0, &hi, &lo);
	SET_LOCKTAG_ADVISORY(*tag, MyDatabaseId, hi, lo, DEDUP_LOCKTAG_TOPIC);
}

/*
 * The relay lock of a topic in a partition: a take holds it until its
 * transaction ends, so that the takes of a topic in a partition go one
 * after another, each seeing what the one before committed (a heavyweight
 * lock, not a row lock: no WAL).  With dont_wait, false at once if another
 * transaction holds it.
 */
static void
outbox_relay_locktag(LOCKTAG *tag, const DedupFingerprint *part, const text *topic)
{
	uint32		hi;
	uint32		lo;

	outbox_topic_hash(topic, outbox_part_number(part), &hi, &lo);
	SET_LOCKTAG_ADVISORY(*tag, MyDatabaseId, hi, lo, DEDUP_LOCKTAG_RELAY);
}

bool
outbox_lock_relay(const DedupFingerprint *part, const text *topic, bool dont_wait)
{
	LOCKTAG		tag;

	outbox_relay_locktag(&tag, part, topic);
	return LockAcquire(&tag, ExclusiveLock, false, dont_wait) != LOCKACQUIRE_NOT_AVAIL;
}

/* Whether this backend holds the relay lock of a topic in a partition. */
bool
outbox_relay_lock_held(const DedupFingerprint *part, const text *topic)
{
	LOCKTAG		tag;

	outbox_relay_locktag(&tag, part, topic);
	return dedup_lock_held_by_me(&tag, ExclusiveLock);
}

/*
 * Let the relay lock of a topic in a partition go before the transaction
 * ends (however many times it was taken): only for a take that wrote
 * nothing, whose next take may as well be another transaction's, and that
 * took the lock itself, in the statement running (outbox_relay_lock_held()
 * false before it): LockRelease() lets go only of what the current
 * resource owner holds (the statement's, the subtransaction's), and a hold
 * of an earlier statement or of a savepoint's parent stays to the end of
 * the transaction (it fails, with a WARNING, rather than loop).
 */
void
outbox_unlock_relay(const DedupFingerprint *part, const text *topic)
{
	LOCKTAG		tag;

	outbox_relay_locktag(&tag, part, topic);
	while (dedup_lock_held_by_me(&tag, ExclusiveLock) &&
		   LockRelease(&tag, ExclusiveLock, false))
		;
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
 * A take reads, in each statement, the events that committed before it: a
 * snapshot taken once for the transaction may not show them (0A000).
 */
void
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
 * sequence past them (outbox_put.c).
 */
int64
outbox_stable_seq(const DedupFingerprint *part, text *topic)
{
	LOCAL_FCINFO(seqinfo, 1);
	Datum		last;
	int64		stable;
	int64		in_log;

	outbox_check_isolation();
	InitFunctionCallInfoData(*seqinfo, NULL, 1, InvalidOid, NULL, NULL);
	/* on a cluster, this node's (the sequence is every node's own) */
	seqinfo->args[0].value = ObjectIdGetDatum(dedup_catalog_relation_hashed(DEDUP_REL_OUTBOX) ?
											  dedup_catalog_relation_lookup(DEDUP_REL_OUTBOX_SEQ) :
											  dedup_catalog_relation_oid(DEDUP_REL_OUTBOX_SEQ));
	seqinfo->args[0].isnull = false;
	last = pg_sequence_last_value(seqinfo);
	stable = seqinfo->isnull ? 0 : DatumGetInt64(last);
	if (dedup_catalog_relation_hashed(DEDUP_REL_OUTBOX) &&
		outbox_partition_last_seq(part, topic, &in_log) && in_log > stable)
		stable = in_log;
	outbox_wait_puts(topic);
	return stable;
}

/*
 * Wait for the puts of topic in progress (the holders of its topic lock)
 * to end.  A take does, before it reads the relay's state, so that it sees
 * every put that was in progress as it began: one that looked for a
 * listener before the relay's LISTEN (the head of this file).
 */
void
outbox_wait_puts(const text *topic)
{
	LOCKTAG		tag;

	outbox_topic_locktag(&tag, topic);
	WaitForLockers(tag, ShareLock, false);
}

/* dedup.outbox_wait_puts(topic text) RETURNS void */
PG_FUNCTION_INFO_V1(dedup_outbox_wait_puts);
Datum
dedup_outbox_wait_puts(PG_FUNCTION_ARGS)
{
	outbox_wait_puts(PG_GETARG_TEXT_PP(0));
	PG_RETURN_VOID();
}

/* The lock of an event's id a put holds while it looks the id up. */
void
outbox_event_locktag(LOCKTAG *tag, const pg_uuid_t *id)
{
	dedup_bytes_locktag(tag, id->data, DEDUP_LOCKTAG_EVENT);
}

/*
 * dedup.outbox_wait_events(ids uuid[]) RETURNS void
 *
 * Wait for the puts that are looking these events up (the holders of
 * their events' locks), one id after another, holding none: a redrive
 * calls it after it moved the events and before it commits, so that no put
 * of one of them looks in outbox_retry before the move and in outbox_dead
 * after it (outbox_put.c).
 */
PG_FUNCTION_INFO_V1(dedup_outbox_wait_events);
Datum
dedup_outbox_wait_events(PG_FUNCTION_ARGS)
{
	ArrayType  *ids = PG_GETARG_ARRAYTYPE_P(0);
	Datum	   *values;
	bool	   *nulls;
	int			n;

	deconstruct_array(ids, UUIDOID, UUID_LEN, false, TYPALIGN_CHAR, &values, &nulls, &n);
	for (int i = 0; i < n; i++)
	{
		LOCKTAG		tag;

		if (nulls[i])
			continue;
		outbox_event_locktag(&tag, DatumGetUUIDP(values[i]));
		(void) LockAcquire(&tag, ExclusiveLock, false, false);
		LockRelease(&tag, ExclusiveLock, false);
	}
	PG_RETURN_VOID();
}

/* dedup.outbox_stable_seq(in_part dedup_fingerprint, topic text) RETURNS bigint */
PG_FUNCTION_INFO_V1(dedup_outbox_stable_seq);
Datum
dedup_outbox_stable_seq(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT64(outbox_stable_seq(PG_GETARG_DEDUP_FINGERPRINT_P(0), PG_GETARG_TEXT_PP(1)));
}

/*
 * On a cluster, the last number the log of a topic in a partition used, or
 * its relays' position passed; false if neither.  Runs its own SPI.
 */
bool
outbox_partition_last_seq(const DedupFingerprint *part, text *topic, int64 *last)
{
	Datum		args[2] = {PointerGetDatum(part), PointerGetDatum(topic)};
	bool		isnull;

	SPI_connect();
	if (outbox_plans_stale(&outbox_last_seq_type) && outbox_last_seq_plan != NULL)
	{
		SPI_freeplan(outbox_last_seq_plan);
		outbox_last_seq_plan = NULL;
	}
	if (outbox_last_seq_plan == NULL)
	{
		char	   *eq = dedup_catalog_fingerprint_eq();
		Oid			argtypes[2] = {dedup_catalog_fingerprint_type(), TEXTOID};
		SPIPlanPtr	plan;

		plan = SPI_prepare(psprintf("SELECT GREATEST("
									" (SELECT o.seq FROM dedup.outbox AS o WHERE o.part %s $1"
									"  AND o.topic OPERATOR(pg_catalog.=) $2 ORDER BY o.seq DESC LIMIT 1),"
									" (SELECT t.next_seq OPERATOR(pg_catalog.-) 1 FROM dedup.outbox_topics AS t"
									"  WHERE t.part %s $1 AND t.topic OPERATOR(pg_catalog.=) $2),"
									" (SELECT x.next_seq OPERATOR(pg_catalog.-) 1 FROM dedup.outbox_batches AS x"
									"  WHERE x.part %s $1 AND x.topic OPERATOR(pg_catalog.=) $2"
									"  ORDER BY x.id DESC LIMIT 1))",
									eq, eq, eq),
						   2, argtypes);
		if (plan == NULL)
			elog(ERROR, "could not prepare the outbox's sequence check: %s",
				 SPI_result_code_string(SPI_result));
		SPI_keepplan(plan);
		outbox_last_seq_plan = plan;
	}
	if (SPI_execute_plan(outbox_last_seq_plan, args, NULL, true, 1) != SPI_OK_SELECT ||
		SPI_processed != 1)
		elog(ERROR, "could not read the outbox partition's last number");
	*last = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	SPI_finish();
	return !isnull;
}

/* ---------------------------------------------------------------------
 * Wake-ups: NOTIFY dedup_outbox, while a session of the database listens,
 * and the waiting takes' condition variables
 * --------------------------------------------------------------------- */

static Size
outbox_listeners_size(void)
{
	return add_size(offsetof(OutboxListeners, database),
					mul_size(MaxBackends, sizeof(pg_atomic_uint32)));
}

void
outbox_listeners_shmem_request(void)
{
	RequestAddinShmemSpace(MAXALIGN(outbox_listeners_size()));
	RequestAddinShmemSpace(MAXALIGN(mul_size(OUTBOX_WAIT_SLOTS, sizeof(OutboxWaitSlot))));
}

void
outbox_listeners_shmem_startup(void)
{
	bool		found;

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	outbox_listeners = ShmemInitStruct("dedup outbox listeners", outbox_listeners_size(), &found);
	if (!found)
	{
		pg_atomic_init_u32(&outbox_listeners->count, 0);
		for (int i = 0; i < MaxBackends; i++)
			pg_atomic_init_u32(&outbox_listeners->database[i], InvalidOid);
	}
	outbox_wait_slots = ShmemInitStruct("dedup outbox waiting takes",
										mul_size(OUTBOX_WAIT_SLOTS, sizeof(OutboxWaitSlot)), &found);
	if (!found)
	{
		for (int i = 0; i < OUTBOX_WAIT_SLOTS; i++)
		{
			pg_atomic_init_u32(&outbox_wait_slots[i].waiters, 0);
			pg_atomic_init_u64(&outbox_wait_slots[i].generation, 0);
			ConditionVariableInit(&outbox_wait_slots[i].cv);
		}
	}
	LWLockRelease(AddinShmemInitLock);
}

/* before_shmem_exit: this backend no longer listens */
static void
outbox_listener_exit(int code, Datum arg)
{
	if (!outbox_listening)
		return;
	pg_atomic_write_u32(&outbox_listeners->database[dedup_my_backend_slot()], InvalidOid);
	pg_atomic_fetch_sub_u32(&outbox_listeners->count, 1);
	outbox_listening = false;
}

/*
 * A LISTEN of channel runs in this backend (module.c's utility hook, before
 * the LISTEN itself): from now until the backend exits, the outbox's puts
 * in its database notify.
 */
void
outbox_note_listen(const char *channel)
{
	if (outbox_listeners == NULL || outbox_listening || channel == NULL ||
		strcmp(channel, OUTBOX_CHANNEL) != 0 ||
		dedup_my_backend_slot() < 0)
		return;
	before_shmem_exit(outbox_listener_exit, (Datum) 0);
	pg_atomic_write_u32(&outbox_listeners->database[dedup_my_backend_slot()], MyDatabaseId);
	pg_atomic_fetch_add_u32(&outbox_listeners->count, 1);	/* a full barrier */
	outbox_listening = true;
}

/* Whether a backend of this database listens (or may: no shared memory). */
static bool
outbox_listened(void)
{
	if (outbox_listeners == NULL)
		return true;
	pg_memory_barrier();
	if (pg_atomic_read_u32(&outbox_listeners->count) == 0)
		return false;
	for (int i = 0; i < MaxBackends; i++)
		if (pg_atomic_read_u32(&outbox_listeners->database[i]) == MyDatabaseId)
			return true;
	return false;
}

/* The slot of the waiting takes of topic in this database */
static int
outbox_wait_slot(const text *topic)
{
	uint32		h = hash_bytes((const unsigned char *) VARDATA_ANY(topic), VARSIZE_ANY_EXHDR(topic));

	return hash_combine(h, hash_uint32(MyDatabaseId)) % OUTBOX_WAIT_SLOTS;
}

/*
 * This transaction committed: wake the takes waiting in the slots of the
 * topics it put events of.  XACT_EVENT_COMMIT comes after the commit is
 * visible (ProcArrayEndTransaction()), so a take woken sees the events.
 * A slot where nobody waits costs a read: the counter, after a full
 * barrier.  Against outbox_wait_begin(): either the take counted itself
 * before this read, and is woken (generation moved on, then its
 * condition variable broadcast), or after, and then its next poll, whose
 * snapshots come after the count, sees this commit.
 */
static void
outbox_wake_takes(void)
{
	uint64		slots = outbox_wake_slots;

	outbox_wake_slots = 0;
	if (outbox_wait_slots == NULL || slots == 0)
		return;
	pg_memory_barrier();
	for (int i = 0; i < OUTBOX_WAIT_SLOTS; i++)
	{
		OutboxWaitSlot *slot = &outbox_wait_slots[i];

		if ((slots & (UINT64CONST(1) << i)) == 0 ||
			pg_atomic_read_u32(&slot->waiters) == 0)
			continue;
		pg_atomic_fetch_add_u64(&slot->generation, 1);
		ConditionVariableBroadcast(&slot->cv);
	}
}

/*
 * A take of topic starts to wait (outbox_relay.c): false, without shared
 * memory (dedup not preloaded), for a take that polls.  It counts itself
 * among the slot's waiters and joins its condition variable's sleepers
 * before its first poll (then, after each poll that found nothing,
 * outbox_wait_changed(), and outbox_wait_sleep() if no commit woke it), so
 * that no commit after that poll's snapshots goes unseen; outbox_wait_end()
 * when it stops waiting, error or not.
 */
bool
outbox_wait_begin(const text *topic)
{
	static bool exit_registered = false;

	if (outbox_wait_slots == NULL || outbox_waiting != NULL)
		return false;
	if (!exit_registered)
	{
		/* a FATAL (a terminated backend) skips the take's PG_FINALLY */
		before_shmem_exit(outbox_wait_exit, (Datum) 0);
		exit_registered = true;
	}
	outbox_waiting = &outbox_wait_slots[outbox_wait_slot(topic)];
	ConditionVariablePrepareToSleep(&outbox_waiting->cv);
	pg_atomic_fetch_add_u32(&outbox_waiting->waiters, 1);	/* a full barrier */
	outbox_waiting_generation = pg_atomic_read_u64(&outbox_waiting->generation);
	return true;
}

/*
 * Whether a commit woke the takes of this one's slot since it last looked
 * (it looks after each poll that found nothing): then it polls again
 * without sleeping, even if the wake-up's latch was used up by a wait of
 * the poll.
 *
 * First the take joins the sleepers again: a broadcast during the poll
 * took it off them, and if a wait of the poll used up the latch, a sleep
 * off the list would not be woken by the next commit (it would sleep its
 * whole RELAY_POLL_MAX_MS).  Joining takes the condition variable's
 * spinlock before the generation is read: a commit whose broadcast missed
 * the take moved the generation on before, and the take sees it here.
 */
bool
outbox_wait_changed(void)
{
	uint64		generation;

	ConditionVariableCancelSleep();
	ConditionVariablePrepareToSleep(&outbox_waiting->cv);
	pg_memory_barrier();
	generation = pg_atomic_read_u64(&outbox_waiting->generation);

	if (generation == outbox_waiting_generation)
		return false;
	outbox_waiting_generation = generation;
	return true;
}

/* Sleep at most timeout_ms, or until a commit wakes this slot's takes. */
void
outbox_wait_sleep(long timeout_ms)
{
	(void) ConditionVariableTimedSleep(&outbox_waiting->cv, timeout_ms, PG_WAIT_EXTENSION);
}

/* The take stops waiting (also on an error: then before the abort). */
void
outbox_wait_end(void)
{
	if (outbox_waiting == NULL)
		return;
	ConditionVariableCancelSleep();
	pg_atomic_fetch_sub_u32(&outbox_waiting->waiters, 1);
	outbox_waiting = NULL;
}

/* before_shmem_exit: the backend exits, maybe from a take's wait */
static void
outbox_wait_exit(int code, Datum arg)
{
	outbox_wait_end();
}

/* The transaction ends, or one of its subtransactions. */
static void
outbox_wake_xact(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_PRE_PREPARE:
			if (outbox_woke_level > 0)
				ereport(ERROR,
						(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						 errmsg("cannot prepare a transaction that put an event into the outbox"),
						 errdetail("A put wakes the outbox's relays as its transaction commits, which a prepared transaction cannot do."),
						 errhint("Put the event in a transaction that is not prepared.")));
			break;
		case XACT_EVENT_COMMIT:
			outbox_wake_takes();
			outbox_woke_level = 0;
			break;
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PREPARE:
		case XACT_EVENT_PARALLEL_COMMIT:
		case XACT_EVENT_PARALLEL_ABORT:
			outbox_wake_slots = 0;
			outbox_woke_level = 0;
			break;
		default:
			break;
	}
}

static void
outbox_wake_subxact(SubXactEvent event, SubTransactionId mySubid,
					SubTransactionId parentSubid, void *arg)
{
	int			level = GetCurrentTransactionNestLevel();

	if (event == SUBXACT_EVENT_ABORT_SUB && outbox_woke_level >= level)
	{
		/* no put of the transaction stays: no take to wake */
		outbox_woke_level = 0;
		outbox_wake_slots = 0;
	}
	else if (event == SUBXACT_EVENT_COMMIT_SUB && outbox_woke_level == level)
		outbox_woke_level = level - 1;
}

/*
 * Wake the relays of topic when this transaction commits: the takes that
 * wait on it (outbox_wake_takes()), and NOTIFY dedup_outbox with the topic
 * as payload, if a session of the database listens.  Called by a put that
 * inserted an event, holding its topic's lock (see the head of this file).
 */
void
outbox_wake(const text *topic)
{
	int			level = GetCurrentTransactionNestLevel();

	if (!outbox_wake_callbacks)
	{
		RegisterXactCallback(outbox_wake_xact, NULL);
		RegisterSubXactCallback(outbox_wake_subxact, NULL);
		outbox_wake_callbacks = true;
	}
	if (outbox_woke_level == 0 || level < outbox_woke_level)
		outbox_woke_level = level;
	if (outbox_wait_slots != NULL)
		outbox_wake_slots |= UINT64CONST(1) << outbox_wait_slot(topic);
	if (outbox_listened())
		Async_Notify(OUTBOX_CHANNEL, text_to_cstring(topic));
}

/* ---------------------------------------------------------------------
 * The producers' aggregate locks
 *
 * A put holds its aggregate (the fingerprint of (topic, aggregate id), or
 * of its key where it names none) until its transaction ends, so that two
 * producers of one aggregate take their sequence numbers in commit order
 * (outbox_put.c).  Only producers of the same aggregate of the same topic
 * wait for each other: the lock is the aggregate itself, not a stripe of
 * a hash space that unrelated puts would share, and no two unrelated puts
 * take locks in an order that can deadlock.
 *
 * A transaction may put events of thousands of aggregates, more than the
 * lock table holds, so these are not heavyweight locks.  They are what
 * PostgreSQL's row locks are: the holder's transaction id, here in a
 * hash table in shared memory keyed by (database, aggregate), and a put
 * that finds another transaction in progress there waits for that
 * transaction's own lock (XactLockTableWait()), which the deadlock
 * detector sees, then looks again.  A transaction removes its entries as
 * it ends (an entry of a transaction that is no longer in progress is
 * free anyway: one of a prepared transaction stays until it is committed
 * or rolled back, and is then taken over); a subtransaction rolled back
 * removes those it took.  dedup.outbox_aggregate_locks entries in all;
 * when they are taken, a put fails with 53200, as a full lock table does
 * (a role that may put can fill it with one transaction, as any role can
 * fill PostgreSQL's lock table, which is smaller, with
 * pg_advisory_xact_lock()).  Without shared memory (dedup not preloaded),
 * an aggregate is one of 1,024 heavyweight locks of its topic, held to
 * the end of the transaction: producers of other topics never share them,
 * producers of one topic's other aggregates sometimes do.
 * --------------------------------------------------------------------- */

#define OUTBOX_AGGREGATE_PARTITIONS 32	/* a power of 2 */
#define OUTBOX_AGGREGATE_STRIPES 1024	/* of a topic, without shared memory;
										 * a power of 2 */

typedef struct OutboxAggregateKey
{
	Oid			database;
	uint8		aggregate[DEDUP_FINGERPRINT_LEN];
} OutboxAggregateKey;

typedef struct OutboxAggregateEntry
{
	OutboxAggregateKey key;
	TransactionId holder;		/* a top-level transaction */
} OutboxAggregateEntry;

static HTAB *outbox_aggregates = NULL;
static LWLockPadded *outbox_aggregate_partitions = NULL;

/*
 * The entries this transaction holds, in TopMemoryContext, each with the
 * nesting level of the subtransaction that took it
 */
static OutboxAggregateKey *outbox_held_aggregates = NULL;
static int *outbox_held_levels = NULL;
static int	outbox_held_count = 0;
static int	outbox_held_size = 0;
static TransactionId outbox_held_xid = InvalidTransactionId;
static bool outbox_aggregate_callback = false;

void
outbox_aggregates_shmem_request(void)
{
	RequestAddinShmemSpace(hash_estimate_size(dedup_outbox_aggregate_locks,
											  sizeof(OutboxAggregateEntry)));
	RequestNamedLWLockTranche("dedup outbox aggregates", OUTBOX_AGGREGATE_PARTITIONS);
}

void
outbox_aggregates_shmem_startup(void)
{
	HASHCTL		info;

	info.keysize = sizeof(OutboxAggregateKey);
	info.entrysize = sizeof(OutboxAggregateEntry);
	info.num_partitions = OUTBOX_AGGREGATE_PARTITIONS;
	outbox_aggregates = ShmemInitHash("dedup outbox aggregates",
									  dedup_outbox_aggregate_locks,
									  dedup_outbox_aggregate_locks, &info,
									  HASH_ELEM | HASH_BLOBS | HASH_PARTITION | HASH_FIXED_SIZE);
	outbox_aggregate_partitions = GetNamedLWLockTranche("dedup outbox aggregates");
}

/* The partition lock of a key's hash */
static LWLock *
outbox_aggregate_partition(uint32 hash)
{
	return &outbox_aggregate_partitions[hash % OUTBOX_AGGREGATE_PARTITIONS].lock;
}

/* Remove an entry this transaction holds from the table. */
static void
outbox_aggregate_remove(const OutboxAggregateKey *key)
{
	uint32		hash = get_hash_value(outbox_aggregates, key);
	LWLock	   *lock = outbox_aggregate_partition(hash);
	OutboxAggregateEntry *entry;

	LWLockAcquire(lock, LW_EXCLUSIVE);
	entry = hash_search_with_hash_value(outbox_aggregates, key, hash, HASH_FIND, NULL);
	if (entry != NULL && entry->holder == outbox_held_xid)
		(void) hash_search_with_hash_value(outbox_aggregates, key, hash, HASH_REMOVE, NULL);
	LWLockRelease(lock);
}

/*
 * At the end of a transaction its entries go; a prepared transaction's
 * stay, as its heavyweight locks do, until another put finds it ended.
 */
static void
outbox_aggregates_release(XactEvent event, void *arg)
{
	if (outbox_held_count == 0)
		return;
	if (event == XACT_EVENT_COMMIT || event == XACT_EVENT_ABORT ||
		event == XACT_EVENT_PARALLEL_COMMIT || event == XACT_EVENT_PARALLEL_ABORT)
	{
		for (int i = 0; i < outbox_held_count; i++)
			outbox_aggregate_remove(&outbox_held_aggregates[i]);
	}
	else if (event != XACT_EVENT_PREPARE)
		return;
	outbox_held_count = 0;
	outbox_held_xid = InvalidTransactionId;
}

/*
 * A subtransaction rolled back lets go of the aggregates it took (its
 * events are gone with it), as it lets go of its row locks; one committed
 * hands them to its parent.
 */
static void
outbox_aggregates_subxact(SubXactEvent event, SubTransactionId mySubid,
						  SubTransactionId parentSubid, void *arg)
{
	int			level = GetCurrentTransactionNestLevel();
	int			kept = 0;

	if (outbox_held_count == 0 ||
		(event != SUBXACT_EVENT_ABORT_SUB && event != SUBXACT_EVENT_COMMIT_SUB))
		return;
	for (int i = 0; i < outbox_held_count; i++)
	{
		if (outbox_held_levels[i] >= level)
		{
			if (event == SUBXACT_EVENT_ABORT_SUB)
			{
				outbox_aggregate_remove(&outbox_held_aggregates[i]);
				continue;
			}
			outbox_held_levels[i] = level - 1;
		}
		outbox_held_aggregates[kept] = outbox_held_aggregates[i];
		outbox_held_levels[kept] = outbox_held_levels[i];
		kept++;
	}
	outbox_held_count = kept;
}

/*
 * The table is full: free the entries of transactions that ended without
 * removing them (prepared ones since committed or rolled back).  Every
 * partition locked, in order.
 */
static void
outbox_aggregates_sweep(void)
{
	HASH_SEQ_STATUS status;
	OutboxAggregateEntry *entry;

	for (int i = 0; i < OUTBOX_AGGREGATE_PARTITIONS; i++)
		LWLockAcquire(&outbox_aggregate_partitions[i].lock, LW_EXCLUSIVE);
	hash_seq_init(&status, outbox_aggregates);
	while ((entry = hash_seq_search(&status)) != NULL)
		if (!TransactionIdIsInProgress(entry->holder))
			(void) hash_search(outbox_aggregates, &entry->key, HASH_REMOVE, NULL);
	for (int i = OUTBOX_AGGREGATE_PARTITIONS - 1; i >= 0; i--)
		LWLockRelease(&outbox_aggregate_partitions[i].lock);
}

/* Note an entry this transaction holds, to remove it as the transaction ends. */
static void
outbox_aggregate_note(const OutboxAggregateKey *key)
{
	if (outbox_held_count == outbox_held_size)
	{
		int			size = Max(64, outbox_held_size * 2);

		if (outbox_held_aggregates == NULL)
		{
			outbox_held_aggregates = MemoryContextAlloc(TopMemoryContext,
														size * sizeof(OutboxAggregateKey));
			outbox_held_levels = MemoryContextAlloc(TopMemoryContext, size * sizeof(int));
		}
		else
		{
			outbox_held_aggregates = repalloc(outbox_held_aggregates,
											  size * sizeof(OutboxAggregateKey));
			outbox_held_levels = repalloc(outbox_held_levels, size * sizeof(int));
		}
		outbox_held_size = size;
	}
	outbox_held_aggregates[outbox_held_count] = *key;
	outbox_held_levels[outbox_held_count] = GetCurrentTransactionNestLevel();
	outbox_held_count++;
}

/*
 * Hold an aggregate (its fingerprint) until this transaction ends, waiting
 * for the transaction that holds it, if another does (see above).
 */
void
outbox_lock_aggregate(const text *topic, const DedupFingerprint *aggregate)
{
	OutboxAggregateKey key;
	TransactionId xid;
	uint32		hash;
	LWLock	   *lock;
	bool		swept = false;

	if (outbox_aggregates == NULL)
	{
		LOCKTAG		tag;
		uint32		hi;
		uint32		lo;
		uint32		stripe;

		/*
		 * No shared memory: one of the topic's OUTBOX_AGGREGATE_STRIPES
		 * heavyweight locks, so that a transaction holds at most that many of
		 * a topic (the lock table is shared, and small), named by the topic's
		 * fingerprint, so that only producers of one topic share them
		 */
		outbox_topic_hash(topic, 0, &hi, &lo);
		memcpy(&stripe, aggregate->bytes, sizeof(stripe));
		SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, hi,
							 (lo & ~(OUTBOX_AGGREGATE_STRIPES - 1)) |
							 (stripe & (OUTBOX_AGGREGATE_STRIPES - 1)),
							 DEDUP_LOCKTAG_AGGREGATE);
		(void) LockAcquire(&tag, ExclusiveLock, false, false);
		return;
	}
	memset(&key, 0, sizeof(key));
	key.database = MyDatabaseId;
	memcpy(key.aggregate, aggregate->bytes, DEDUP_FINGERPRINT_LEN);
	xid = GetTopTransactionId();
	if (!outbox_aggregate_callback)
	{
		RegisterXactCallback(outbox_aggregates_release, NULL);
		RegisterSubXactCallback(outbox_aggregates_subxact, NULL);
		outbox_aggregate_callback = true;
	}
	if (outbox_held_count == 0)
		outbox_held_xid = xid;
	hash = get_hash_value(outbox_aggregates, &key);
	lock = outbox_aggregate_partition(hash);
	for (;;)
	{
		OutboxAggregateEntry *entry;
		bool		found;
		TransactionId holder;

		CHECK_FOR_INTERRUPTS();
		LWLockAcquire(lock, LW_EXCLUSIVE);
		entry = hash_search_with_hash_value(outbox_aggregates, &key, hash, HASH_ENTER_NULL,
											&found);
		if (entry == NULL)
		{
			LWLockRelease(lock);
			if (!swept)
			{
				outbox_aggregates_sweep();
				swept = true;
				continue;
			}
			ereport(ERROR,
					(errcode(ERRCODE_OUT_OF_MEMORY),
					 errmsg("out of shared memory for the outbox's aggregates"),
					 errdetail("Transactions in progress hold the %d aggregates dedup.outbox_aggregate_locks allows.",
							   dedup_outbox_aggregate_locks),
					 errhint("Put events of fewer aggregates in one transaction, or raise dedup.outbox_aggregate_locks.")));
		}
		holder = found ? entry->holder : InvalidTransactionId;
		if (holder == xid)
		{
			LWLockRelease(lock);
			return;				/* held already */
		}
		if (!found || !TransactionIdIsInProgress(holder))
		{
			entry->holder = xid;
			LWLockRelease(lock);
			break;
		}
		LWLockRelease(lock);
		/* another producer of the aggregate: wait for it to end, look again */
		XactLockTableWait(holder, NULL, NULL, XLTW_None);
	}
	outbox_aggregate_note(&key);
}
