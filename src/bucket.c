/*-------------------------------------------------------------------------
 *
 * bucket.c
 *	  Which relations hold the claims: the time buckets of dedup.claims.
 *
 * Claims and idempotency records are written into the current bucket, a
 * table that inherits from dedup.claims and has its own primary key on the
 * fingerprint, so that the index pages new keys go into are few and recent
 * (after a checkpoint, each page written costs a full-page image).  When
 * the current bucket is due, by time or by size (below: "When the current
 * bucket is due for a switch"), the cleanup opens a new bucket and closes
 * the old one, which is only read from then on; once every row of a closed
 * bucket has expired, the whole bucket goes with DROP TABLE: no row is
 * deleted, no dead tuple left, no vacuum owed.  dedup.buckets lists them (see
 * sql/tables/buckets.sql); bucket 0 is dedup.claims itself, the only
 * bucket of a new or updated database until the first switch.
 *
 * Reading and writing (store.c).  A call opens every bucket not retired,
 * newest first, and looks a key up in each until it finds a row: the row
 * in the newest bucket that has one is the key's latest version, since
 * rows are only ever written into the current bucket or into the bucket
 * their latest version is in, whichever is newer.  A live row found in an
 * older bucket is deleted as its new version goes into the current one.
 *
 * Switching, without blocking a call.  A call reads the list of buckets
 * once per change (the list is cached, and a change sends a relcache
 * invalidation of dedup.buckets), and holds a lock on each bucket while it
 * runs, except while it waits for another transaction that writes its key
 * (store.c): then it holds none, and opens them again after, so that no
 * step waits for it.  The switch is done in steps, each a transaction of
 * its own:
 *	1. open: once bucket n is due, create bucket n+1 as "next": every call
 *	   reads it from now on, none writes it;
 *	2. switch: wait until every call that began before step 1 committed
 *	   (and so may not know bucket n+1) has ended: WaitForLockers() on the
 *	   current bucket, which blocks nobody; then make n+1 current and n
 *	   closed.  A call that still takes n for current also reads n+1, and
 *	   writes a key into n+1 when its latest version is there;
 *	3. seal: wait likewise for the calls that may still write into n; then,
 *	   unless a transaction still in progress wrote into n (below), read n
 *	   once for the latest expiry of its rows;
 *	4. retire: once that time has passed, no row in n is live: calls stop
 *	   reading it; in the same transaction, its claims of scopes with a
 *	   history are folded first, by the function the cleanup passes
 *	   (history.c's: this file calls no history itself);
 *	5. drop: DROP TABLE (for bucket 0, TRUNCATE ONLY), only if its lock is
 *	   free, waiting for nothing: a call that read an old list, or a
 *	   transaction that read dedup.claims and keeps its lock until it ends
 *	   (a report, pg_dump), leaves the bucket to a later pass.
 * Retired buckets that wait for their drop stay listed; the open step opens
 * none while the list holds BUCKET_MAX_ROWS rows, whatever their states, so
 * the list calls read stays short however far behind the drops are.
 * Writers' transactions.  A call holds its locks on the buckets' tables
 * for the call only, but the rows it wrote commit with its transaction,
 * maybe long after.  So before a transaction first writes a row into a
 * bucket (store.c), it takes the bucket's write lock (an advisory-class lock
 * tag of ours, catalog.h), which it keeps until it ends; writers share it.
 * The seal, once the calls that may still write into n have ended, looks
 * for its holders (GetLockConflicts, which waits for nobody): while there
 * is one, n stays closed until a later pass.  Sealed, n holds every row it
 * will ever hold, committed: the fold (history.c), which reads with an MVCC
 * snapshot, misses none, and the drop destroys no row that could still
 * commit.  Only a write takes the lock, not a look-up: a duplicate, or a
 * call waiting for another transaction, holds back no seal.  (A live row
 * deleted from n as its key moves on needs none: n's latest expiry already
 * counts it, and its new version is in a newer bucket.)
 *
 * A step that cannot get a lock in time (lock_timeout) is rolled back alone
 * and left to the next pass; the pass goes on (cleanup.c).
 * A step whose previous step was done in the same transaction waits for
 * the next pass.  The steps run as the owner of dedup.buckets, since a
 * cleanup role is not allowed DDL.
 *
 * Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/dependency.h"
#include "catalog/namespace.h"
#include "catalog/pg_inherits.h"
#include "catalog/pg_class.h"
#include "catalog/pg_depend.h"
#include "catalog/pg_extension.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "executor/tuptable.h"
#include "miscadmin.h"
#include "storage/bufmgr.h"
#include "storage/ipc.h"
#include "storage/lmgr.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"

#include "bucket.h"
#include "catalog.h"
#include "filter.h"
#include "settings.h"
#include "shards.h"

/* dedup.buckets.state */
#define BUCKET_NEXT		'n'
#define BUCKET_CURRENT	'c'
#define BUCKET_CLOSED	'x'
#define BUCKET_SEALED	's'
#define BUCKET_RETIRED	'r'

/* Columns of dedup.buckets */
#define Anum_buckets_bucket			1
#define Anum_buckets_relid			2
#define Anum_buckets_state			3
#define Anum_buckets_opened_at		4
#define Anum_buckets_closed_at		5
#define Anum_buckets_max_expires_at	6
#define Anum_buckets_claims			7
#define Anum_buckets_records		8

/*
 * Most rows dedup.buckets lists, retired ones included: the open step
 * opens no bucket while it lists as many (bucket_open_next).  Nothing else
 * depends on it: the list is read whole however long it is.
 */
#define BUCKET_MAX_ROWS		(2 * DEDUP_MAX_BUCKETS)

/* A row of dedup.buckets. */
typedef struct BucketRow
{
	int32		number;
	Oid			relid;
	char		state;
	TimestampTz opened_at;
	TimestampTz closed_at;		/* 0 while open */
	bool		has_max;
	TimestampTz max_expires_at;
	int64		claims;
	int64		records;
	bool		mine;			/* this version written by this transaction */
} BucketRow;

static char *bucket_table_name(int32 number);

/* The cached list, and a count of the invalidations that may change it. */
static DedupBucketList bucket_list;
static bool bucket_list_valid = false;
static uint64 bucket_list_generation = 0;
static Oid	bucket_table_relid = InvalidOid;

static void
bucket_list_callback(Datum arg, Oid relid)
{
	bool		ours = !OidIsValid(relid) || relid == bucket_table_relid;

	for (int i = 0; !ours && bucket_list_valid && i < bucket_list.nbuckets; i++)
		ours = (bucket_list.buckets[i].heap == relid);
	if (ours)
	{
		bucket_list_valid = false;
		bucket_list_generation++;
	}
}

static int
bucket_row_compare(const void *a, const void *b)
{
	int32		na = ((const BucketRow *) a)->number;
	int32		nb = ((const BucketRow *) b)->number;

	return (na > nb) ? -1 : (na < nb) ? 1 : 0;
}

/*
 * Read dedup.buckets, newest bucket first, into *rowsp (palloc'd), with a
 * snapshot taken after the table was locked (and so after every
 * invalidation sent before).  An empty table stands for bucket 0, current:
 * the state of a new database.  However many rows it lists, retired ones
 * waiting for their drop included, they are all read: a call never fails
 * because the cleanup fell behind.
 */
static int
bucket_read(BucketRow **rowsp)
{
	int			size = BUCKET_MAX_ROWS;
	BucketRow  *rows = palloc(sizeof(BucketRow) * size);
	Relation	rel = dedup_catalog_relation_open(DEDUP_REL_BUCKETS, AccessShareLock);
	Snapshot	snapshot = RegisterSnapshot(IsInParallelMode() ?
											GetTransactionSnapshot() : GetLatestSnapshot());
	SysScanDesc scan = systable_beginscan(rel, InvalidOid, false, snapshot, 0, NULL);
	TupleDesc	desc = RelationGetDescr(rel);
	HeapTuple	tuple;
	int			n = 0;

	while ((tuple = systable_getnext(scan)) != NULL)
	{
		BucketRow  *row;
		bool		isnull;
		Datum		d;

		if (n >= size)
		{
			size *= 2;
			rows = repalloc(rows, sizeof(BucketRow) * size);
		}
		row = &rows[n];
		row->number = DatumGetInt32(heap_getattr(tuple, Anum_buckets_bucket, desc, &isnull));
		row->relid = DatumGetObjectId(heap_getattr(tuple, Anum_buckets_relid, desc, &isnull));
		row->state = DatumGetChar(heap_getattr(tuple, Anum_buckets_state, desc, &isnull));
		row->opened_at = DatumGetTimestampTz(heap_getattr(tuple, Anum_buckets_opened_at,
														  desc, &isnull));
		d = heap_getattr(tuple, Anum_buckets_closed_at, desc, &isnull);
		row->closed_at = isnull ? 0 : DatumGetTimestampTz(d);
		d = heap_getattr(tuple, Anum_buckets_max_expires_at, desc, &isnull);
		row->has_max = !isnull;
		row->max_expires_at = isnull ? 0 : DatumGetTimestampTz(d);
		d = heap_getattr(tuple, Anum_buckets_claims, desc, &isnull);
		row->claims = isnull ? 0 : DatumGetInt64(d);
		d = heap_getattr(tuple, Anum_buckets_records, desc, &isnull);
		row->records = isnull ? 0 : DatumGetInt64(d);
		row->mine = TransactionIdIsCurrentTransactionId(HeapTupleHeaderGetXmin(tuple->t_data));
		n++;
	}
	systable_endscan(scan);
	UnregisterSnapshot(snapshot);
	table_close(rel, AccessShareLock);

	/*
	 * On a Citus cluster, each bucket's table by its name: on a worker, the
	 * relid stored is that of the table's shell as Citus made it when the
	 * bucket was listed, and Citus makes the shells again with new OIDs when
	 * it syncs its metadata to the node (citus_activate_node, after
	 * citus_disable_node): a stale relid would find no shard of the bucket,
	 * and its claims would be missed.  InvalidOid when the table is gone.
	 */
	if (n > 0 && dedup_catalog_relation_hashed(DEDUP_REL_CLAIMS))
	{
		Oid			nsp = get_namespace_oid(DEDUP_INTERNAL_SCHEMA, false);

		for (int i = 0; i < n; i++)
			rows[i].relid = rows[i].number == 0 ?
				dedup_catalog_relation_lookup(DEDUP_REL_CLAIMS) :
				get_relname_relid(bucket_table_name(rows[i].number), nsp);
	}

	if (n == 0)
	{
		memset(&rows[0], 0, sizeof(BucketRow));
		rows[0].number = 0;
		rows[0].relid = dedup_catalog_relation_lookup(DEDUP_REL_CLAIMS);
		rows[0].state = BUCKET_CURRENT;
		rows[0].opened_at = DT_NOBEGIN;
		n = 1;
	}
	else
		qsort(rows, n, sizeof(BucketRow), bucket_row_compare);
	*rowsp = rows;
	return n;
}

static char *
bucket_table_name(int32 number)
{
	return number == 0 ? pstrdup("claims") : psprintf("claims_%d", number);
}

/* The primary key of a bucket: claims_pkey, or claims_N_pkey. */
static Oid
bucket_index(const BucketRow *row)
{
	Oid			nsp = get_rel_namespace(row->relid);
	Oid			index = InvalidOid;

	if (OidIsValid(nsp))
		index = get_relname_relid(psprintf("%s_pkey", bucket_table_name(row->number)), nsp);
	if (!OidIsValid(index))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("bucket %d of dedup.claims is missing its table or primary key",
						row->number),
				 errdetail("dedup.buckets lists relation %u for it.", row->relid),
				 errhint("A bucket's table is dropped by the cleanup only; restore it, or remove its row from dedup.buckets.")));
	return index;
}

static void
bucket_list_load(DedupBucketList *list)
{
	BucketRow  *rows;
	int			n;

	list->nbuckets = 0;
	if (!OidIsValid(bucket_table_relid))
	{
		Oid			claims = dedup_catalog_relation_oid(DEDUP_REL_CLAIMS);

		/* a database still at 1.0 (not one whose list of buckets is lost) */
		if (has_subclass(claims))
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_TABLE),
					 errmsg("relation \"%s.buckets\" does not exist", DEDUP_INTERNAL_SCHEMA),
					 errdetail("dedup.claims has buckets, and the list of them is gone."),
					 errhint("Restore dedup.buckets, or run ALTER EXTENSION dedup UPDATE.")));
		/* dedup.claims alone */
		list->nbuckets = 1;
		list->buckets[0].number = 0;
		list->buckets[0].heap = dedup_catalog_relation_lookup(DEDUP_REL_CLAIMS);
		list->buckets[0].index = dedup_catalog_relation_lookup(DEDUP_REL_CLAIMS_PKEY);
		list->buckets[0].current = true;
		list->buckets[0].sealed = false;
		list->buckets[0].closed_at = 0;
		return;
	}
	n = bucket_read(&rows);
	for (int i = 0; i < n; i++)
	{
		DedupBucket *b;

		if (rows[i].state == BUCKET_RETIRED)
			continue;
		if (list->nbuckets >= DEDUP_MAX_BUCKETS)
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("dedup.claims has more than %d buckets to read", DEDUP_MAX_BUCKETS)));
		b = &list->buckets[list->nbuckets++];
		b->number = rows[i].number;
		b->heap = rows[i].relid;

		/*
		 * on a cluster, the bucket's distributed table: store.c opens its
		 * shards
		 */
		b->index = dedup_catalog_relation_hashed(DEDUP_REL_CLAIMS) ? InvalidOid : bucket_index(&rows[i]);
		b->current = (rows[i].state == BUCKET_CURRENT);
		b->sealed = (rows[i].state == BUCKET_SEALED);
		b->closed_at = rows[i].closed_at;
	}
	pfree(rows);
}

/*
 * The buckets a call reads, newest first.  *generation identifies the list:
 * after locking the buckets, a caller checks with dedup_bucket_list_changed()
 * that no change arrived meanwhile, and reads the list again if one did.
 */
const DedupBucketList *
dedup_bucket_list(uint64 *generation)
{
	static bool registered = false;

	if (!registered)
	{
		dedup_catalog_relcache_register(bucket_list_callback);
		registered = true;
	}
	bucket_table_relid = dedup_catalog_relation_lookup(DEDUP_REL_BUCKETS);
	*generation = bucket_list_generation;
	if (!bucket_list_valid)
	{
		bool		current = false;

		bucket_list_load(&bucket_list);
		for (int i = 0; i < bucket_list.nbuckets; i++)
			current |= bucket_list.buckets[i].current;

		/*
		 * valid unless an invalidation arrived while it was read; a list with
		 * no current bucket (dedup.buckets edited by hand) is read again at
		 * the next call, so that the row's repair, which sends no
		 * invalidation, is seen
		 */
		bucket_list_valid = (*generation == bucket_list_generation) && current;
	}
	return &bucket_list;
}

bool
dedup_bucket_list_changed(uint64 generation)
{
	AcceptInvalidationMessages();
	return generation != bucket_list_generation;
}

/*
 * Lock a bucket's table; false, holding no lock, when it was dropped before
 * the lock was granted (by a cleanup, after this call read the list).
 */
bool
dedup_bucket_lock(Oid relid, LOCKMODE lockmode)
{
	LockRelationOid(relid, lockmode);
	if (SearchSysCacheExists1(RELOID, ObjectIdGetDatum(relid)))
		return true;
	UnlockRelationOid(relid, lockmode);
	return false;
}

/* The tag of a bucket's write lock (catalog.h's lock tag classes). */
static void
bucket_written_locktag(LOCKTAG *tag, Oid relid)
{
	SET_LOCKTAG_ADVISORY(*tag, MyDatabaseId, relid, 0, DEDUP_LOCKTAG_BUCKET);
}

/*
 * Before a transaction first writes a row into a bucket: take the bucket's
 * write lock, held until the transaction ends.  Writers share it; the seal
 * looks for its holders (bucket_seal).
 */
void
dedup_bucket_lock_written(Oid relid)
{
	LOCKTAG		tag;

	bucket_written_locktag(&tag, relid);
	(void) LockAcquire(&tag, RowExclusiveLock, false, false);
}

/* Whether a transaction in progress, not this one, wrote into a bucket. */
static bool
bucket_has_writers(Oid relid)
{
	LOCKTAG		tag;
	VirtualTransactionId *holders;
	bool		any;

	bucket_written_locktag(&tag, relid);
	holders = GetLockConflicts(&tag, ShareLock, NULL);
	any = VirtualTransactionIdIsValid(holders[0]);
	pfree(holders);
	return any;
}

/*
 * The list of buckets has no current one: only an edit of dedup.buckets by
 * hand makes it so (the steps change the current bucket in one transaction,
 * and a unique index allows no second one), which no call can repair.
 */
void
dedup_bucket_no_current(void)
{
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("dedup.buckets lists no current bucket"),
			 errdetail("Its row in state 'c' was changed or deleted by hand: no call can read or write the claims until a bucket is listed current again."),
			 errhint("Set the state of the newest bucket listed back to 'c' (UPDATE dedup.buckets SET state = 'c' WHERE bucket = ...), or restore the row deleted.")));
}

/*
 * Open the bucket new claims go into (dedup.claims in a database at 1.0),
 * locked, once no change of the list arrived while it was being locked.
 */
Relation
dedup_bucket_open_current(LOCKMODE lockmode)
{
	for (;;)
	{
		uint64		generation;
		const DedupBucketList *list = dedup_bucket_list(&generation);
		Oid			relid = InvalidOid;

		for (int i = 0; i < list->nbuckets; i++)
		{
			if (list->buckets[i].current)
				relid = list->buckets[i].heap;
		}
		if (!OidIsValid(relid))
			dedup_bucket_no_current();
		if (dedup_bucket_lock(relid, lockmode))
		{
			if (!dedup_bucket_list_changed(generation))
				return table_open(relid, NoLock);
			UnlockRelationOid(relid, lockmode);
		}
	}
}

/*
 * Whether this database keeps claims in buckets: not at 1.0, and not on a
 * Citus cluster, where dedup.claims is one distributed table (shards.c)
 * and a worker has no list of buckets of its own.
 */
bool
dedup_bucket_storage(void)
{
	if (!OidIsValid(dedup_catalog_relation_lookup(DEDUP_REL_BUCKETS)))
		return false;
	if (dedup_catalog_relation_hashed(DEDUP_REL_CLAIMS))
		return !dedup_catalog_is_citus_worker();	/* the coordinator drives
													 * them */
	return !dedup_catalog_is_citus_worker();
}

/* ---------------------------------------------------------------------
 * When the current bucket is due for a switch
 *
 * By time: dedup.bucket_interval, or when it is 0 (the default) an interval
 * that follows the ttls written into the current bucket: a quarter of the
 * shortest, so that short ttls expire with their bucket's drop rather than
 * row by row, but at least the longest over half of DEDUP_MAX_BUCKETS, so
 * that the buckets holding live rows stay well within DEDUP_MAX_BUCKETS;
 * the quarter capped at BUCKET_AUTO_MAX_USECS, the longest's share not (a
 * longest ttl over 32 times that cap, 8 days, would otherwise keep more than
 * half of DEDUP_MAX_BUCKETS live, with no switch by size, and over 16 days
 * have the open step stop at DEDUP_MAX_BUCKETS, warning every pass), and
 * the whole at least BUCKET_AUTO_MIN_USECS.  By size: once
 * the bucket's primary key, the index every new key goes into, reaches
 * dedup.bucket_max_size (by default a sixteenth of shared_buffers), beyond
 * which its pages no longer stay in cache and every checkpoint brings back
 * a full-page image for most new keys; by size only while fewer than half
 * of DEDUP_MAX_BUCKETS hold live rows.
 *
 * The ttls are noted in shared memory, one slot a database (when dedup is
 * preloaded; without, the interval is BUCKET_AUTO_MAX_USECS): a writer
 * notes the ttl and the expiry of each row it writes into the current
 * bucket, but takes the slot's lock only when the ttl falls outside the
 * range it last saw there, or the expiry before the earliest it saw, so a
 * claim normally touches no shared memory.  The earliest expiry tells the
 * cleanup when rows of the current bucket may have expired: until then its
 * row deletes do not read it (dedup_bucket_skip_current).  It is known
 * only for a bucket the slot has followed since its switch (complete): not
 * for bucket 0, nor for a bucket written into before the server started.
 * A slot is tied to dedup.buckets's relation (an extension dropped and
 * created again starts over) and holds the range of the current bucket:
 * the switch (and the listing of bucket 0) starts it again, and a writer
 * that notes a ttl for another bucket (one that has not seen the switch
 * yet) is not heard.
 * Slots are kept until the server stops; when all are taken, the slots of
 * databases that no longer exist are freed (bucket_ttls_acquire), and a
 * database that still gets none has the interval BUCKET_AUTO_MAX_USECS: its
 * backends ask again every BUCKET_TTL_RETRY_USECS, not at every claim.
 * ---------------------------------------------------------------------
 */
#define BUCKET_AUTO_MIN_USECS	USECS_PER_SEC
#define BUCKET_AUTO_MAX_USECS	(6 * USECS_PER_HOUR)
#define BUCKET_TTL_SLOTS		64
#define BUCKET_TTL_RETRY_USECS	(10 * USECS_PER_SEC)

/* What is noted of the rows written into a bucket. */
typedef struct BucketWritten
{
	bool		noted;			/* whether a ttl is */
	int64		min_ttl;		/* microseconds */
	int64		max_ttl;
	bool		complete;		/* noted since its switch: every row written
								 * is */
	bool		expiry_noted;	/* whether a row written is */
	TimestampTz min_expires;	/* the earliest expiry of a row written */
} BucketWritten;

typedef struct BucketTtls
{
	Oid			dboid;			/* InvalidOid: a free slot */
	Oid			buckets;		/* dedup.buckets of that database: the
								 * extension's */
	pg_atomic_uint32 generation;	/* advanced by each switch */
	int32		number;			/* the current bucket, whose rows these are */
	BucketWritten written;
} BucketTtls;

typedef struct BucketShared
{
	LWLock	   *lock;
	BucketTtls	slots[BUCKET_TTL_SLOTS];
} BucketShared;

static BucketShared *bucket_shared = NULL;

/* What this backend last saw in its database's slot. */
static struct
{
	BucketTtls *slot;			/* NULL: none seen */
	Oid			buckets;
	uint32		generation;
	int32		number;
	int64		min_ttl;		/* a ttl within these needs no noting */
	int64		max_ttl;
	TimestampTz min_expires;	/* nor an expiry from this one on */
	TimestampTz retry_at;		/* when slot is NULL: when to ask again */
} bucket_ttls_seen;

void
dedup_bucket_shmem_request(void)
{
	RequestAddinShmemSpace(MAXALIGN(sizeof(BucketShared)));
	RequestNamedLWLockTranche("dedup buckets", 1);
}

void
dedup_bucket_shmem_startup(void)
{
	bool		found;

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	bucket_shared = ShmemInitStruct("dedup buckets", sizeof(BucketShared), &found);
	if (!found)
	{
		memset(bucket_shared, 0, sizeof(BucketShared));
		bucket_shared->lock = &(GetNamedLWLockTranche("dedup buckets"))->lock;
		for (int i = 0; i < BUCKET_TTL_SLOTS; i++)
			pg_atomic_init_u32(&bucket_shared->slots[i].generation, 0);
	}
	LWLockRelease(AddinShmemInitLock);
}

/*
 * The slot of this database's extension (its dedup.buckets: buckets), under
 * the lock, held exclusive when create: a free slot, or a slot of this
 * database left by a dropped extension, is taken for it.  NULL when there
 * is none.
 */
static BucketTtls *
bucket_ttls_slot(Oid buckets, bool create, int32 number)
{
	BucketTtls *mine = NULL;
	BucketTtls *free_slot = NULL;

	for (int i = 0; i < BUCKET_TTL_SLOTS; i++)
	{
		BucketTtls *slot = &bucket_shared->slots[i];

		if (slot->dboid == MyDatabaseId && slot->buckets == buckets)
			return slot;
		if (slot->dboid == MyDatabaseId)
			mine = slot;
		else if (slot->dboid == InvalidOid && free_slot == NULL)
			free_slot = slot;
	}
	if (!create)
		return NULL;
	if (mine == NULL)
		mine = free_slot;
	if (mine != NULL)
	{
		mine->dboid = MyDatabaseId;
		mine->buckets = buckets;
		mine->number = number;
		memset(&mine->written, 0, sizeof(BucketWritten));
		pg_atomic_fetch_add_u32(&mine->generation, 1);
	}
	return mine;
}

/*
 * The slot of this database's extension, taken if need be, with the lock
 * held exclusive (the caller releases it); NULL when every slot is taken.
 * Then the slots of databases that no longer exist are freed first: their
 * database OIDs are looked up in pg_database with the lock released (a
 * catalog read may wait), and only the slots that still hold them after
 * are freed.
 */
static BucketTtls *
bucket_ttls_acquire(Oid buckets, int32 number)
{
	BucketTtls *slot;
	Oid			dboids[BUCKET_TTL_SLOTS];
	bool		dropped = false;

	LWLockAcquire(bucket_shared->lock, LW_EXCLUSIVE);
	slot = bucket_ttls_slot(buckets, true, number);
	if (slot != NULL)
		return slot;
	for (int i = 0; i < BUCKET_TTL_SLOTS; i++)
		dboids[i] = bucket_shared->slots[i].dboid;
	LWLockRelease(bucket_shared->lock);

	for (int i = 0; i < BUCKET_TTL_SLOTS; i++)
	{
		if (OidIsValid(dboids[i]) && dboids[i] != MyDatabaseId &&
			!SearchSysCacheExists1(DATABASEOID, ObjectIdGetDatum(dboids[i])))
			dropped = true;
		else
			dboids[i] = InvalidOid;
	}

	LWLockAcquire(bucket_shared->lock, LW_EXCLUSIVE);
	for (int i = 0; dropped && i < BUCKET_TTL_SLOTS; i++)
	{
		BucketTtls *other = &bucket_shared->slots[i];

		if (OidIsValid(dboids[i]) && other->dboid == dboids[i])
		{
			other->dboid = InvalidOid;
			other->buckets = InvalidOid;
			memset(&other->written, 0, sizeof(BucketWritten));
			pg_atomic_fetch_add_u32(&other->generation, 1);
		}
	}
	return bucket_ttls_slot(buckets, true, number);
}

/*
 * A switch to bucket number (or bucket 0 listed): the ttls noted from now
 * on are that bucket's.  Not transactional: a switch rolled back leaves no
 * ttl noted until it is made again (the interval is then the longest).
 * empty: the bucket is new, no row can be in it yet (a switch, made before
 * it commits), so that what is noted from now on is all it holds.
 */
static void
bucket_ttls_reset(int32 number, bool empty)
{
	Oid			buckets;
	BucketTtls *slot;

	if (bucket_shared == NULL)
		return;
	buckets = dedup_catalog_relation_lookup(DEDUP_REL_BUCKETS);
	slot = bucket_ttls_acquire(buckets, number);
	if (slot != NULL)
	{
		slot->number = number;
		memset(&slot->written, 0, sizeof(BucketWritten));
		slot->written.complete = empty;
		pg_atomic_fetch_add_u32(&slot->generation, 1);
	}
	LWLockRelease(bucket_shared->lock);
}

/*
 * Note a row written into bucket number (the bucket it went into, the
 * current one as the writer knows it, or a newer one): its ttl, expires_at
 * less the time of the call (when positive), and its expiry.  Touches
 * shared memory only to read the slot's generation, unless the ttl is
 * outside the range, or the expiry before the earliest, this backend last
 * saw noted for that bucket; with no slot to be had, at most every
 * BUCKET_TTL_RETRY_USECS.
 */
void
dedup_bucket_note_written(int32 number, TimestampTz now, TimestampTz expires_at)
{
	int64		ttl = expires_at - now;
	Oid			buckets;
	BucketTtls *slot;

	if (bucket_shared == NULL)
		return;
	buckets = dedup_catalog_relation_lookup(DEDUP_REL_BUCKETS);
	slot = bucket_ttls_seen.slot;

	if (slot != NULL && bucket_ttls_seen.buckets == buckets &&
		bucket_ttls_seen.number == number &&
		pg_atomic_read_u32(&slot->generation) == bucket_ttls_seen.generation &&
		(ttl <= 0 || (ttl >= bucket_ttls_seen.min_ttl && ttl <= bucket_ttls_seen.max_ttl)) &&
		expires_at >= bucket_ttls_seen.min_expires)
		return;

	/*
	 * no slot for this database: asked again only every
	 * BUCKET_TTL_RETRY_USECS
	 */
	if (slot == NULL && bucket_ttls_seen.buckets == buckets &&
		now < bucket_ttls_seen.retry_at)
		return;

	slot = bucket_ttls_acquire(buckets, number);
	if (slot != NULL && slot->number == number)
	{
		BucketWritten *w = &slot->written;

		if (ttl > 0)
		{
			/* a row written expired (a lease's tombstone) sets no ttl */
			w->min_ttl = w->noted ? Min(w->min_ttl, ttl) : ttl;
			w->max_ttl = w->noted ? Max(w->max_ttl, ttl) : ttl;
			w->noted = true;
		}
		w->min_expires = w->expiry_noted ? Min(w->min_expires, expires_at) : expires_at;
		w->expiry_noted = true;
	}
	bucket_ttls_seen.slot = slot;
	bucket_ttls_seen.buckets = buckets;
	bucket_ttls_seen.number = number;
	bucket_ttls_seen.retry_at = now + BUCKET_TTL_RETRY_USECS;

	if (slot != NULL)
		bucket_ttls_seen.generation = pg_atomic_read_u32(&slot->generation);

	if (slot != NULL && slot->number == number)
	{
		/* with no ttl noted yet (only an expired row), every one is new */
		bucket_ttls_seen.min_ttl = slot->written.noted ? slot->written.min_ttl : PG_INT64_MAX;
		bucket_ttls_seen.max_ttl = slot->written.noted ? slot->written.max_ttl : PG_INT64_MIN;
		bucket_ttls_seen.min_expires = slot->written.min_expires;
	}
	else
	{
		/* not the slot's bucket (an older one), or no slot: nothing to note */
		bucket_ttls_seen.min_ttl = PG_INT64_MIN;
		bucket_ttls_seen.max_ttl = PG_INT64_MAX;
		bucket_ttls_seen.min_expires = DT_NOBEGIN;
	}
	LWLockRelease(bucket_shared->lock);
}

/*
 * What is noted of the rows written into bucket number, into *written;
 * false when this database's slot does not follow that bucket (or there is
 * none).
 */
static bool
bucket_written(int32 number, BucketWritten *written)
{
	bool		found = false;

	if (bucket_shared != NULL)
	{
		Oid			buckets = dedup_catalog_relation_lookup(DEDUP_REL_BUCKETS);
		BucketTtls *slot;

		LWLockAcquire(bucket_shared->lock, LW_SHARED);
		slot = bucket_ttls_slot(buckets, false, number);
		if (slot != NULL && slot->number == number)
		{
			*written = slot->written;
			found = true;
		}
		LWLockRelease(bucket_shared->lock);
	}
	return found;
}

/*
 * The time new claims go into bucket number before the next one is opened:
 * dedup.bucket_interval, or when it is 0 the interval that follows the ttls
 * written into that bucket (BUCKET_AUTO_MAX_USECS while none is known).
 */
int64
dedup_bucket_interval_usecs(int32 number)
{
	int64		interval = BUCKET_AUTO_MAX_USECS;
	BucketWritten w;

	if (dedup_bucket_interval > 0)
		return (int64) dedup_bucket_interval * USECS_PER_SEC;
	if (bucket_written(number, &w) && w.noted)
		interval = Max(Min(w.min_ttl / 4, BUCKET_AUTO_MAX_USECS),
					   w.max_ttl / (DEDUP_MAX_BUCKETS / 2));
	return Max(interval, BUCKET_AUTO_MIN_USECS);
}

/*
 * The size of a bucket's primary key at which the next bucket is opened, in
 * bytes; 0 for none.  dedup.bucket_max_size, or by default (-1) a sixteenth
 * of shared_buffers, at least 8MB.
 */
int64
dedup_bucket_max_bytes(void)
{
	if (dedup_bucket_max_size == 0)
		return 0;
	if (dedup_bucket_max_size < 0)
		return Max((int64) NBuffers * BLCKSZ / 16, (int64) 8 * 1024 * 1024);
	return (int64) dedup_bucket_max_size * 1024;
}

/*
 * Whether the current bucket (number, opened at opened_at, its primary key
 * index) is due for a switch at now, live buckets holding rows that have
 * not expired: by time, or by size while fewer than half of
 * DEDUP_MAX_BUCKETS do (a long ttl at a high rate would otherwise fill the
 * list with small buckets, and then keep the current one growing, with a
 * warning every pass, until the oldest retire).
 */
static bool
bucket_is_due(int32 number, TimestampTz opened_at, Oid index, TimestampTz now, int live)
{
	int64		max_bytes = dedup_bucket_max_bytes();
	Relation	rel;
	int64		bytes;

	if (opened_at == DT_NOBEGIN)
		return false;			/* bucket 0 of a new database, not yet listed */
	if (now >= opened_at + dedup_bucket_interval_usecs(number))
		return true;
	if (max_bytes == 0 || live >= DEDUP_MAX_BUCKETS / 2)
		return false;
	rel = index_open(index, AccessShareLock);
	bytes = (int64) RelationGetNumberOfBlocks(rel) * BLCKSZ;
	index_close(rel, AccessShareLock);
	return bytes >= max_bytes;
}

/*
 * Whether the ttls noted for bucket number are all within BUCKET_TTL_SPREAD
 * of one another: its rows all expire within a few of its intervals.
 */
#define BUCKET_TTL_SPREAD	8

static bool
bucket_ttls_close(int32 number)
{
	BucketWritten w;

	return bucket_written(number, &w) && w.noted &&
		w.max_ttl / BUCKET_TTL_SPREAD <= w.min_ttl;
}

/*
 * Whether no row written into bucket number can have expired at now: the
 * slot has followed it since its switch (complete), and the earliest expiry
 * noted, if any, is later.  False when that is not known.
 */
static bool
bucket_none_expired(int32 number, TimestampTz now)
{
	BucketWritten w;

	return bucket_written(number, &w) && w.complete &&
		(!w.expiry_noted || w.min_expires > now);
}

/*
 * Whether the cleanup's row deletes pass over the current bucket this time.
 * When none of its rows can have expired yet (bucket_none_expired): a
 * bucket shorter than the ttls written into it, as the default interval
 * makes it, is then never read by them, however large it grows.  And when
 * the rows that expired in it go with it rather than one by one: the bucket
 * is due for a switch the open step can make (the list has room), and the
 * ttls written into it are close (BUCKET_TTL_SPREAD), so that its drop
 * comes soon after: short ttls then cost no row deletes, no dead tuples.
 * With ttls far apart, the short ones' rows are deleted, not kept until the
 * long ones' expire.  Kept only for BUCKET_KEEP_PASSES passes of the cleanup
 * after it became due (the next bucket's opening, or else the end of its
 * interval): a switch that keeps failing (its wait for the calls on the
 * bucket times out, behind a long transaction) does not keep expired rows
 * meanwhile.
 */
#define BUCKET_KEEP_PASSES	2

bool
dedup_bucket_skip_current(void)
{
	BucketRow  *rows;
	int			n = bucket_read(&rows);
	int			live = 0;
	const BucketRow *current = NULL;
	const BucketRow *next = NULL;
	TimestampTz now = GetCurrentTimestamp();
	bool		skip = false;

	for (int i = 0; i < n; i++)
	{
		if (rows[i].state == BUCKET_CURRENT)
			current = &rows[i];
		if (rows[i].state == BUCKET_NEXT)
			next = &rows[i];
		if (rows[i].state != BUCKET_RETIRED)
			live++;
	}
	if (current != NULL && bucket_none_expired(current->number, now))
		skip = true;
	/* as the open step decides (bucket_open_next) */
	else if (current != NULL && current->opened_at != DT_NOBEGIN &&
			 n < BUCKET_MAX_ROWS && live < DEDUP_MAX_BUCKETS &&
			 bucket_ttls_close(current->number))
	{
		TimestampTz due_since = next != NULL ? next->opened_at :
			current->opened_at + dedup_bucket_interval_usecs(current->number);

		if (now < due_since + BUCKET_KEEP_PASSES * (int64) dedup_cleanup_interval * USECS_PER_SEC)
			skip = bucket_is_due(current->number, current->opened_at, bucket_index(current),
								 now, live);
	}
	pfree(rows);
	return skip;
}

/* ---------------------------------------------------------------------
 * The cleanup's steps
 * ---------------------------------------------------------------------
 */

/* Run one statement through SPI (connected), with up to three arguments. */
static void
bucket_sql(const char *sql, int nargs, const Oid *types, const Datum *values)
{
	int			rc = SPI_execute_with_args(sql, nargs, (Oid *) types, (Datum *) values,
										   NULL, false, 0);

	if (rc < 0)
		elog(ERROR, "SPI_execute_with_args failed (%d): %s", rc, sql);
}

static void
bucket_set_state(int32 number, char state)
{
	Oid			types[2] = {INT4OID, CHAROID};
	Datum		values[2] = {Int32GetDatum(number), CharGetDatum(state)};

	bucket_sql("UPDATE dedup.buckets SET state = $2 WHERE bucket OPERATOR(pg_catalog.=) $1", 2, types, values);
}

/* Tell every backend that the list of buckets changed, at commit. */
static void
bucket_list_invalidate(void)
{
	CacheInvalidateRelcacheByRelid(dedup_catalog_relation_oid(DEDUP_REL_BUCKETS));
}

/* Wait for the transactions that hold a lock on relid conflicting with mode. */
static void
bucket_wait_for_lockers(Oid relid, LOCKMODE mode)
{
	LOCKTAG		tag;

	SET_LOCKTAG_RELATION(tag, MyDatabaseId, relid);
	WaitForLockers(tag, mode, false);
}

/*
 * A bucket's table depends on the extension (automatically: DROP EXTENSION
 * drops it), which pg_dump does not restore; record it where it is missing.
 */
static void
bucket_depend_on_extension(Oid relid)
{
	ObjectAddress table;
	ObjectAddress extension;

	ObjectAddressSet(extension, ExtensionRelationId, get_extension_oid("dedup", false));
	ObjectAddressSet(table, RelationRelationId, relid);
	if (getExtensionOfObject(RelationRelationId, relid) != InvalidOid)
		return;					/* a member: bucket 0 */
	{
		Relation	depend = table_open(DependRelationId, AccessShareLock);
		ScanKeyData key[2];
		SysScanDesc scan;
		HeapTuple	tuple;
		bool		found = false;

		ScanKeyInit(&key[0], Anum_pg_depend_classid, BTEqualStrategyNumber, F_OIDEQ,
					ObjectIdGetDatum(RelationRelationId));
		ScanKeyInit(&key[1], Anum_pg_depend_objid, BTEqualStrategyNumber, F_OIDEQ,
					ObjectIdGetDatum(relid));
		scan = systable_beginscan(depend, DependDependerIndexId, true, NULL, 2, key);
		while (!found && (tuple = systable_getnext(scan)) != NULL)
		{
			Form_pg_depend dep = (Form_pg_depend) GETSTRUCT(tuple);

			found = (dep->refclassid == ExtensionRelationId &&
					 dep->refobjid == extension.objectId && dep->deptype == DEPENDENCY_AUTO);
		}
		systable_endscan(scan);
		table_close(depend, AccessShareLock);
		if (found)
			return;
	}
	recordDependencyOn(&table, &extension, DEPENDENCY_AUTO);
}

/* Step 1: open the next bucket when the current one is old enough. */
static void
bucket_open_next(BucketRow *rows, int n)
{
	TimestampTz now = GetCurrentTimestamp();
	const BucketRow *current = NULL;
	int			live = 0;
	int32		next;
	char	   *name;
	Oid			relid;
	Oid			types[2] = {INT4OID, OIDOID};
	Datum		values[2];

	if (rows[0].opened_at == DT_NOBEGIN)
	{
		/* a new database: list bucket 0, so that its age is known */
		bucket_sql("INSERT INTO dedup.buckets (bucket, relid, state, opened_at) "
				   "VALUES (0, 'dedup.claims'::pg_catalog.regclass, 'c', pg_catalog.now())",
				   0, NULL, NULL);
		bucket_ttls_reset(0, false);
		return;
	}
	for (int i = 0; i < n; i++)
	{
		/* every pass: pg_dump does not restore a bucket's dependency */
		if (rows[i].number != 0)
			bucket_depend_on_extension(rows[i].relid);
		if (rows[i].state == BUCKET_NEXT)
			return;				/* opened already, not yet switched to */
		if (rows[i].state == BUCKET_CURRENT)
			current = &rows[i];
		if (rows[i].state != BUCKET_RETIRED)
			live++;
	}
	if (current == NULL ||
		!bucket_is_due(current->number, current->opened_at, bucket_index(current), now, live))
		return;

	/*
	 * The list at its limit, whatever the buckets' states: retired buckets
	 * whose drop finds their table locked (a long read of dedup.claims,
	 * pg_dump) stay listed, and opening more would only lengthen the list
	 * every call reads.  The current bucket goes on taking the claims.
	 */
	if (n >= BUCKET_MAX_ROWS)
	{
		ereport(WARNING,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("dedup.claims keeps its current bucket: dedup.buckets lists %d buckets",
						n),
				 errdetail("%d of them are retired and wait for their drop: a transaction holds a lock on their tables.",
						   n - live),
				 errhint("End the long transactions that read dedup.claims (pg_stat_activity).")));
		return;
	}
	if (live >= DEDUP_MAX_BUCKETS)
	{
		ereport(WARNING,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("dedup.claims keeps its current bucket: %d buckets hold rows that have not expired",
						live),
				 errhint("Raise dedup.bucket_max_size or dedup.bucket_interval: 64 buckets should hold the claims of the longest ttl.")));
		return;
	}

	next = rows[0].number + 1;
	name = bucket_table_name(next);
	bucket_sql(psprintf("CREATE TABLE dedup.%s (CONSTRAINT %s PRIMARY KEY (key)) "
						"INHERITS (dedup.claims) WITH (autovacuum_vacuum_scale_factor = 0.02)",
						quote_identifier(name),
						quote_identifier(psprintf("%s_pkey", name))),
			   0, NULL, NULL);
	relid = get_relname_relid(name, get_namespace_oid(DEDUP_INTERNAL_SCHEMA, false));
	bucket_depend_on_extension(relid);
	values[0] = Int32GetDatum(next);
	values[1] = ObjectIdGetDatum(relid);
	bucket_sql("INSERT INTO dedup.buckets (bucket, relid, state, opened_at) "
			   "VALUES ($1, $2, 'n', pg_catalog.now())", 2, types, values);
	bucket_list_invalidate();
}

/* Step 2: make the next bucket current, once every call reads it. */
static void
bucket_switch(BucketRow *rows, int n)
{
	const BucketRow *next = NULL;
	const BucketRow *current = NULL;
	Oid			types[1] = {INT4OID};
	Datum		values[1];

	for (int i = 0; i < n; i++)
	{
		if (rows[i].state == BUCKET_NEXT)
			next = &rows[i];
		else if (rows[i].state == BUCKET_CURRENT)
			current = &rows[i];
	}
	if (next == NULL || next->mine || current == NULL)
		return;

	/* the calls that began before the next bucket was listed have ended */
	bucket_wait_for_lockers(current->relid, ShareLock);
	values[0] = Int32GetDatum(current->number);
	bucket_sql("UPDATE dedup.buckets SET state = 'x', closed_at = pg_catalog.now() "
			   "WHERE bucket OPERATOR(pg_catalog.=) $1", 1, types, values);
	values[0] = Int32GetDatum(next->number);
	bucket_sql("UPDATE dedup.buckets SET state = 'c', opened_at = pg_catalog.now() "
			   "WHERE bucket OPERATOR(pg_catalog.=) $1", 1, types, values);
	bucket_list_invalidate();
	bucket_ttls_reset(next->number, true);
}

/*
 * Read a bucket whole: the latest expiry of its rows and their numbers, by
 * kind.  With a dirty snapshot, rows of transactions still in progress
 * count, deleted ones do not.  False when it has no row.
 */
static bool
bucket_scan(Oid relid, TimestampTz *max, int64 *claims, int64 *records)
{
	Relation	rel = table_open(relid, AccessShareLock);
	SnapshotData dirty;
	TableScanDesc scan;
	TupleTableSlot *slot;
	bool		has_max = false;

	*max = 0;
	*claims = *records = 0;
	InitDirtySnapshot(dirty);
	scan = table_beginscan(rel, &dirty, 0, NULL);
	slot = table_slot_create(rel, NULL);
	while (table_scan_getnextslot(scan, ForwardScanDirection, slot))
	{
		bool		isnull;
		TimestampTz expires_at = DatumGetTimestampTz(slot_getattr(slot, Anum_key_expires_at,
																  &isnull));

		CHECK_FOR_INTERRUPTS();
		if (!has_max || expires_at > *max)
			*max = expires_at;
		has_max = true;
		if (slot_attisnull(slot, Anum_claims_record))
			(*claims)++;
		else
			(*records)++;
	}
	ExecDropSingleTupleTableSlot(slot);
	table_endscan(scan);
	table_close(rel, AccessShareLock);
	return has_max;
}

/*
 * Step 3: the latest expiry of each closed bucket's rows, and their counts;
 * then its filter (filter.c).  Calls read a sealed bucket only when its
 * filter may hold their key, so the list changes.
 */
static void
bucket_seal(BucketRow *rows, int n)
{
	bool		sealed = false;

	for (int i = 0; i < n; i++)
	{
		TimestampTz max;
		int64		claims;
		int64		records;
		Oid			types[4] = {INT4OID, TIMESTAMPTZOID, INT8OID, INT8OID};
		Datum		values[4];
		char		nulls[4] = {' ', ' ', ' ', ' '};

		if (rows[i].state != BUCKET_CLOSED || rows[i].mine)
			continue;
		/* the calls that may still write into it, not knowing it closed */
		bucket_wait_for_lockers(rows[i].relid, ShareLock);
		/* the transactions that wrote into it, until they end: a later pass */
		if (bucket_has_writers(rows[i].relid))
			continue;
		if (!bucket_scan(rows[i].relid, &max, &claims, &records))
			nulls[1] = 'n';
		values[0] = Int32GetDatum(rows[i].number);
		values[1] = TimestampTzGetDatum(max);
		values[2] = Int64GetDatum(claims);
		values[3] = Int64GetDatum(records);
		if (SPI_execute_with_args("UPDATE dedup.buckets SET state = 's', max_expires_at = $2, "
								  "claims = $3, records = $4 WHERE bucket OPERATOR(pg_catalog.=) $1",
								  4, types, values, nulls, false, 0) < 0)
			elog(ERROR, "could not seal bucket %d", rows[i].number);
		if (!dedup_filter_build(rows[i].relid, rows[i].closed_at, claims + records) &&
			dedup_filter_enabled())
			ereport(LOG,
					(errmsg("dedup keeps no filter of bucket %d of dedup.claims: dedup.bucket_filter_memory is full",
							rows[i].number),
					 errdetail("The bucket holds %lld rows; every new claim reads it.",
							   (long long) (claims + records)),
					 errhint("Raise dedup.bucket_filter_memory (24 bits a key), or dedup.bucket_interval.")));
		sealed = true;
	}
	if (sealed)
		bucket_list_invalidate();
	/* filters lost with shared memory (a restart) are built again */
	for (int i = 0; i < n; i++)
	{
		if (rows[i].state == BUCKET_SEALED &&
			!dedup_filter_exists(rows[i].relid, rows[i].closed_at))
			(void) dedup_filter_build(rows[i].relid, rows[i].closed_at,
									  rows[i].claims + rows[i].records);
	}
}

/*
 * Step 4: retire the sealed buckets whose every row has expired, once their
 * claims of scopes with a history are folded into it, in the same
 * transaction (fold: history.c's, which the cleanup passes); then delete the
 * generations of histories whose time has passed (expire).
 */
static void
bucket_retire(BucketRow *rows, int n, DedupBucketFold fold, DedupBucketExpire expire)
{
	TimestampTz now = GetCurrentTimestamp();
	bool		retired = false;

	for (int i = 0; i < n; i++)
	{
		if (rows[i].state != BUCKET_SEALED || (rows[i].has_max && rows[i].max_expires_at > now))
			continue;
		(void) fold(rows[i].relid);
		bucket_set_state(rows[i].number, BUCKET_RETIRED);
		dedup_filter_free(rows[i].relid);
		retired = true;
	}
	if (retired)
		bucket_list_invalidate();
	(void) expire();
}

/*
 * The rows a retired bucket holds, by kind.  A small bucket is read for
 * them; a larger one (more than BUCKET_COUNT_MAX_READ rows when sealed) is
 * not: reading a million rows takes the drop over a tenth of a second of
 * I/O and CPU, at the claims' expense, for a figure.  It counts the rows it held when
 * sealed, as dedup.buckets keeps them, which also counts the few that moved
 * out of it since (a record whose new version went into a newer bucket, a
 * released claim).
 */
#define BUCKET_COUNT_MAX_READ	10000

static void
bucket_rows_held(const BucketRow *row, int64 *claims, int64 *records)
{
	TimestampTz max;

	if (row->claims + row->records <= BUCKET_COUNT_MAX_READ)
		(void) bucket_scan(row->relid, &max, claims, records);
	else
	{
		*claims = row->claims;
		*records = row->records;
	}
}

/*
 * Step 5: drop the retired buckets no call reads any more; bucket 0,
 * dedup.claims itself, is emptied instead.  Counts the rows they held.
 */
static int64
bucket_drop(BucketRow *rows, int n, int64 removed[DEDUP_NUM_KINDS])
{
	int64		total = 0;

	for (int i = 0; i < n; i++)
	{
		Oid			types[1] = {INT4OID};
		Datum		values[1] = {Int32GetDatum(rows[i].number)};
		int64		claims;
		int64		records;

		if (rows[i].state != BUCKET_RETIRED || rows[i].mine)
			continue;

		/*
		 * Only if its table is free: a call that read an old list, or a
		 * transaction that read dedup.claims and holds its lock until it ends
		 * (a report, pg_dump), leaves it to a later pass.  Waiting here would
		 * wait for that transaction (and in the worker, time out and leave
		 * every other retired bucket listed too).
		 */
		if (!ConditionalLockRelationOid(rows[i].relid, AccessExclusiveLock))
			continue;
		/* what it holds now: records moved out of it since it was sealed */
		bucket_rows_held(&rows[i], &claims, &records);
		if (rows[i].number == 0)
			bucket_sql("TRUNCATE ONLY dedup.claims", 0, NULL, NULL);
		else
			bucket_sql(psprintf("DROP TABLE dedup.%s",
								quote_identifier(bucket_table_name(rows[i].number))),
					   0, NULL, NULL);
		bucket_sql("DELETE FROM dedup.buckets WHERE bucket OPERATOR(pg_catalog.=) $1", 1, types, values);
		dedup_filter_free(rows[i].relid);
		removed[DEDUP_KIND_CLAIM] += claims;
		removed[DEDUP_KIND_RECORD] += records;
		total += claims + records;
	}
	return total;
}

/* ---------------------------------------------------------------------
 * On a Citus cluster
 *
 * Each bucket is a table distributed by key, co-located with dedup.claims
 * (claims_N: a key's shard of it is on its node, by the same shard index),
 * so that a claim writes into its key's shard of the current bucket on the
 * key's node, and looks the key up in that node's shards of the buckets its
 * list holds (store.c), as on one server.  Each node keeps its own list in
 * its own dedup.buckets (a plain table, not distributed): the waits of a
 * switch and of a seal are for the calls and writers on that node's shards,
 * which only that node can see.  The coordinator drives the steps, once per
 * cluster (its cleanup; dedup.bucket_cluster_step in sql/functions/
 * cluster.sql): it creates and drops the buckets' tables (Citus propagates
 * the DDL, moves a bucket's shards with the co-located ones), and tells
 * each node, through dedup.bucket_node() below, to list a bucket, switch
 * to it, seal, retire or forget one.  The coordinator's own list is the
 * cluster's: a bucket moves on there once every node did.  A node that
 * cannot be reached holds back the step, which the next pass makes again:
 * the current bucket meanwhile takes the claims, nothing is lost.
 * ---------------------------------------------------------------------
 */

/* Wait for the calls on a bucket's shards here; whether any wrote into one, not committed. */
static bool
bucket_node_wait(const BucketRow *row)
{
	Oid		   *heaps = palloc(sizeof(Oid) * DEDUP_CLUSTER_MAX_LOCAL_SHARDS);
	int			n = dedup_shards_bucket_local_shards(row->relid, bucket_table_name(row->number),
													 heaps, NULL, DEDUP_CLUSTER_MAX_LOCAL_SHARDS);
	bool		writers = false;

	for (int i = 0; i < n; i++)
		bucket_wait_for_lockers(heaps[i], ShareLock);
	for (int i = 0; i < n && !writers; i++)
		writers = bucket_has_writers(heaps[i]);
	pfree(heaps);
	return writers;
}

/* The size of the primary keys of a bucket's shards here, in bytes. */
static int64
bucket_node_bytes(const BucketRow *row)
{
	Oid		   *heaps = palloc(sizeof(Oid) * DEDUP_CLUSTER_MAX_LOCAL_SHARDS);
	Oid		   *indexes = palloc(sizeof(Oid) * DEDUP_CLUSTER_MAX_LOCAL_SHARDS);
	int			n = dedup_shards_bucket_local_shards(row->relid, bucket_table_name(row->number),
													 heaps, indexes, DEDUP_CLUSTER_MAX_LOCAL_SHARDS);
	int64		bytes = 0;

	for (int i = 0; i < n; i++)
	{
		Relation	rel = try_relation_open(indexes[i], AccessShareLock);

		if (rel == NULL)
			continue;
		bytes += (int64) RelationGetNumberOfBlocks(rel) * BLCKSZ;
		relation_close(rel, AccessShareLock);
	}
	pfree(heaps);
	pfree(indexes);
	return bytes;
}

static BucketRow *
bucket_row_of(BucketRow *rows, int n, int32 number)
{
	for (int i = 0; i < n; i++)
		if (rows[i].number == number && (number != 0 || rows[i].opened_at != DT_NOBEGIN))
			return &rows[i];
	return NULL;
}

/*
 * dedup.bucket_node(action, bucket): one step of the buckets' work on this
 * node, as the coordinator's cleanup asks (run_command_on_workers); returns
 * the bucket's state here after it ('-' when it is not listed), or for
 * 'due' whether this node's current bucket is due for a switch, by time or
 * by the size of its shards here (this node's share):
 *	list	list bucket N as next (every call here reads it, none writes it);
 *	switch	once the calls on the current bucket's shards here that began
 *			before N was listed ended, make N current, the other closed;
 *	seal	once the calls that may still write into N's shards here ended,
 *			and no transaction in progress wrote into them, mark N sealed;
 *	retire	N's rows have all expired (the coordinator read them): no call
 *			reads it;
 *	forget	N's table was dropped: unlist it;
 *	state	nothing: its state here;
 *	adopt:L	(L the cluster's live buckets, N its current one) a node added
 *			since lists them, before any shard moves to it.
 */
PG_FUNCTION_INFO_V1(dedup_bucket_node);
Datum
dedup_bucket_node(PG_FUNCTION_ARGS)
{
	char	   *action = text_to_cstring(PG_GETARG_TEXT_PP(0));
	int32		number = PG_GETARG_INT32(1);
	Relation	rel;
	BucketRow  *rows;
	BucketRow  *row;
	int			n;
	char		result[2] = {'-', '\0'};
	Oid			types[2] = {INT4OID, TEXTOID};
	Datum		values[2];

	if (!dedup_catalog_relation_hashed(DEDUP_REL_CLAIMS))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("dedup.claims is not distributed on this node"),
				 errhint("dedup.bucket_node() is the cluster's cleanup's: run SELECT dedup_distribute() on the coordinator.")));
	/* one at a time on this node */
	rel = dedup_catalog_relation_open(DEDUP_REL_BUCKETS, ShareUpdateExclusiveLock);
	table_close(rel, NoLock);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	n = bucket_read(&rows);
	if (strcmp(action, "list") == 0 || bucket_row_of(rows, n, 0) == NULL)
	{
		/* a node's first list: bucket 0, dedup.claims itself, current */
		if (rows[0].opened_at == DT_NOBEGIN)
		{
			bucket_sql("INSERT INTO dedup.buckets (bucket, relid, state, opened_at) "
					   "VALUES (0, 'dedup.claims'::pg_catalog.regclass, 'c', pg_catalog.now())",
					   0, NULL, NULL);
			bucket_ttls_reset(0, false);
			bucket_list_invalidate();
			pfree(rows);
			n = bucket_read(&rows);
		}
	}
	row = bucket_row_of(rows, n, number);
	if (strcmp(action, "list") == 0)
	{
		if (row == NULL && number > 0)
		{
			values[0] = Int32GetDatum(number);
			values[1] = CStringGetTextDatum(psprintf("dedup.%s", bucket_table_name(number)));
			bucket_sql("INSERT INTO dedup.buckets (bucket, relid, state, opened_at) "
					   "VALUES ($1, $2::pg_catalog.regclass, 'n', pg_catalog.now())", 2, types, values);
			bucket_list_invalidate();
			result[0] = BUCKET_NEXT;
		}
		else if (row != NULL)
			result[0] = row->state;
	}
	else if (strcmp(action, "switch") == 0)
	{
		BucketRow  *current = NULL;

		for (int i = 0; i < n; i++)
			if (rows[i].state == BUCKET_CURRENT)
				current = &rows[i];
		if (row != NULL && row->state == BUCKET_NEXT && !row->mine && current != NULL)
		{
			/* the calls that began before N was listed here have ended */
			(void) bucket_node_wait(current);
			values[0] = Int32GetDatum(current->number);
			bucket_sql("UPDATE dedup.buckets SET state = 'x', closed_at = pg_catalog.now() "
					   "WHERE bucket OPERATOR(pg_catalog.=) $1", 1, types, values);
			values[0] = Int32GetDatum(number);
			bucket_sql("UPDATE dedup.buckets SET state = 'c', opened_at = pg_catalog.now() "
					   "WHERE bucket OPERATOR(pg_catalog.=) $1", 1, types, values);
			bucket_list_invalidate();
			bucket_ttls_reset(number, true);
			result[0] = BUCKET_CURRENT;
		}
		else if (row != NULL)
			result[0] = row->state;
	}
	else if (strcmp(action, "seal") == 0)
	{
		if (row != NULL && row->state == BUCKET_CLOSED && !row->mine)
		{
			/*
			 * the calls that may still write into it, then its writers in
			 * progress
			 */
			if (!bucket_node_wait(row))
			{
				bucket_set_state(number, BUCKET_SEALED);
				bucket_list_invalidate();
				result[0] = BUCKET_SEALED;
			}
			else
				result[0] = BUCKET_CLOSED;
		}
		else if (row != NULL)
			result[0] = row->state;
	}
	else if (strcmp(action, "retire") == 0)
	{
		if (row != NULL && row->state == BUCKET_SEALED)
		{
			bucket_set_state(number, BUCKET_RETIRED);
			bucket_list_invalidate();
			result[0] = BUCKET_RETIRED;
		}
		else if (row != NULL)
			result[0] = row->state;
	}
	else if (strcmp(action, "forget") == 0)
	{
		if (row != NULL && row->state == BUCKET_RETIRED)
		{
			values[0] = Int32GetDatum(number);
			bucket_sql("DELETE FROM dedup.buckets WHERE bucket OPERATOR(pg_catalog.=) $1",
					   1, types, values);
			bucket_list_invalidate();
		}
		else if (row != NULL)
			result[0] = row->state;
	}
	else if (strcmp(action, "state") == 0)
	{
		if (row != NULL)
			result[0] = row->state;
	}
	else if (strncmp(action, "adopt:", 6) == 0)
	{
		/*
		 * The cluster's live buckets ("2s,6x,9c", N the current one): a node
		 * whose list lacks N was added since the buckets began, and lists
		 * only what it was told since, not the older buckets whose claims a
		 * shard moved to it brings along.  While it holds no shard of
		 * dedup.claims (no call runs on one here, none wrote), its list
		 * becomes the cluster's; holding shards, it is left as it is ('m'):
		 * the buckets of a node added are listed before shards move to it.
		 */
		Oid			shard;

		if (row != NULL)
			result[0] = row->state;
		else if (dedup_shards_local_shards(DEDUP_REL_CLAIMS, &shard, 1) > 0)
			result[0] = 'm';
		else
		{
			char	   *list = pstrdup(action + 6);
			char	   *item;
			char	   *save = NULL;

			bucket_sql("DELETE FROM dedup.buckets", 0, NULL, NULL);
			for (item = strtok_r(list, ",", &save); item != NULL; item = strtok_r(NULL, ",", &save))
			{
				size_t		len = strlen(item);
				char		state = len > 1 ? item[len - 1] : '?';
				int32		bucket;

				if (state != BUCKET_CURRENT && state != BUCKET_CLOSED && state != BUCKET_SEALED)
					ereport(ERROR,
							(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
							 errmsg("invalid bucket \"%s\" in a list to adopt", item)));
				item[len - 1] = '\0';
				bucket = pg_strtoint32(item);
				values[0] = Int32GetDatum(bucket);
				values[1] = CStringGetTextDatum(psprintf("dedup.%s", bucket_table_name(bucket)));
				bucket_sql(psprintf("INSERT INTO dedup.buckets (bucket, relid, state, opened_at, closed_at) "
									"VALUES ($1, $2::pg_catalog.regclass, '%c', pg_catalog.now(), %s)",
									state, state == BUCKET_CURRENT ? "NULL" : "pg_catalog.now()"),
						   2, types, values);
			}
			bucket_list_invalidate();
			bucket_ttls_reset(number, false);
			pfree(rows);
			n = bucket_read(&rows);
			row = bucket_row_of(rows, n, number);
			if (row != NULL)
				result[0] = row->state;
		}
	}
	else if (strcmp(action, "due") == 0)
	{
		BucketRow  *current = NULL;
		int			live = 0;
		TimestampTz now = GetCurrentTimestamp();
		int64		max_bytes = dedup_bucket_max_bytes();
		bool		due = false;

		for (int i = 0; i < n; i++)
		{
			if (rows[i].state == BUCKET_CURRENT)
				current = &rows[i];
			if (rows[i].state != BUCKET_RETIRED)
				live++;
		}
		if (current != NULL && current->opened_at != DT_NOBEGIN)
		{
			due = now >= current->opened_at + dedup_bucket_interval_usecs(current->number);
			if (!due && max_bytes > 0 && live < DEDUP_MAX_BUCKETS / 2)
				due = bucket_node_bytes(current) >= max_bytes;
		}
		result[0] = due ? 't' : 'f';
	}
	else
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("unknown bucket action \"%s\"", action)));
	SPI_finish();
	PG_RETURN_TEXT_P(cstring_to_text(result));
}

/*
 * One step of the buckets' work on a cluster, from its coordinator:
 * dedup.bucket_cluster_step (sql/functions/cluster.sql), which tells each
 * node through dedup.bucket_node(); the rows of the buckets it dropped,
 * counted by kind.
 */
static int64
bucket_cluster_step(int step, int64 removed[DEDUP_NUM_KINDS])
{
	Oid			types[1] = {INT4OID};
	Datum		values[1] = {Int32GetDatum(step)};
	int64		claims = 0;
	int64		records = 0;

	if (SPI_execute_with_args("SELECT claims, records FROM dedup.bucket_cluster_step($1)",
							  1, types, values, NULL, false, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not run step %d of the buckets on the cluster", step);
	if (SPI_processed == 1)
	{
		bool		isnull;
		Datum		d;

		d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
		claims = isnull ? 0 : DatumGetInt64(d);
		d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull);
		records = isnull ? 0 : DatumGetInt64(d);
	}
	removed[DEDUP_KIND_CLAIM] += claims;
	removed[DEDUP_KIND_RECORD] += records;
	return claims + records;
}

/*
 * One step of the cleanup's work on buckets (0 to DEDUP_BUCKET_NSTEPS - 1),
 * in the current transaction, as the owner of dedup.buckets.  Returns the
 * rows removed with dropped buckets, counted by kind in removed[]; fold and
 * expire are the history tier's, for the retire step.  Only one
 * transaction works on buckets at a time: another finds the table locked
 * and leaves the step to it.
 */
int64
dedup_bucket_step(int step, int64 removed[DEDUP_NUM_KINDS], DedupBucketFold fold,
				  DedupBucketExpire expire)
{
	Relation	rel = dedup_catalog_relation_open(DEDUP_REL_BUCKETS, AccessShareLock);
	Oid			relid = RelationGetRelid(rel);
	Oid			owner = rel->rd_rel->relowner;
	Oid			save_userid;
	int			save_sec_context;
	int			save_nestlevel;
	BucketRow  *rows;
	int			n;
	int64		total = 0;

	table_close(rel, AccessShareLock);
	if (!ConditionalLockRelationOid(relid, ShareUpdateExclusiveLock))
		return 0;

	/*
	 * As the owner, with a search_path of pg_catalog only, as a SECURITY
	 * DEFINER function with SET search_path would run: the statements name
	 * the extension's relations with their schema, and nothing the caller put
	 * on its search_path (an operator, a function) can be picked.
	 */
	GetUserIdAndSecContext(&save_userid, &save_sec_context);
	SetUserIdAndSecContext(owner, save_sec_context | SECURITY_LOCAL_USERID_CHANGE);
	save_nestlevel = NewGUCNestLevel();
	(void) set_config_option("search_path", "pg_catalog, pg_temp", PGC_USERSET,
							 PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (dedup_catalog_relation_hashed(DEDUP_REL_CLAIMS))
	{
		/*
		 * on a Citus cluster, from its coordinator: every node's
		 * (bucket_cluster_step)
		 */
		total = bucket_cluster_step(step, removed);
		SPI_finish();
		AtEOXact_GUC(true, save_nestlevel);
		SetUserIdAndSecContext(save_userid, save_sec_context);
		return total;
	}
	n = bucket_read(&rows);
	switch (step)
	{
		case 0:
			bucket_open_next(rows, n);
			break;
		case 1:
			bucket_switch(rows, n);
			break;
		case 2:
			bucket_seal(rows, n);
			break;
		case 3:
			bucket_retire(rows, n, fold, expire);
			break;
		case 4:
			total = bucket_drop(rows, n, removed);
			break;
		default:
			elog(ERROR, "unknown bucket step %d", step);
	}
	SPI_finish();
	AtEOXact_GUC(true, save_nestlevel);
	SetUserIdAndSecContext(save_userid, save_sec_context);
	return total;
}
