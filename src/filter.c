/*-------------------------------------------------------------------------
 *
 * filter.c
 *	  Filters of the sealed time buckets of dedup.claims: for each sealed
 *	  bucket, a blocked Bloom filter of the fingerprints it holds, in shared
 *	  memory, so that a claim of a new key does not open and probe every
 *	  old bucket, only those whose filter may hold the key.
 *
 * A sealed bucket receives no new row (bucket.c), so a filter built from
 * its rows once it is sealed stays true: a key absent from the filter has
 * no row there.  The cleanup builds it in the seal step (and again, after a
 * restart, for sealed buckets that have none), and frees it when the bucket
 * is retired or dropped.  Without a filter (not built yet, memory full,
 * dedup not preloaded, a standby) a call probes the bucket itself: filters
 * only spare work, they never decide.
 *
 * Layout: dedup.bucket_filter_memory of shared memory cut into pages of
 * FILTER_PAGE_BYTES, and FILTER_MAX_SLOTS slots, each naming its bucket
 * (database, relation, and when the bucket closed), its size and the pages
 * that hold it.  A filter
 * is an array of 64-byte blocks (one cache line), FILTER_BITS_PER_KEY
 * bits a key; a key sets FILTER_K bits in the one block its fingerprint's
 * first four bytes choose, at independent positions taken from its other
 * twelve bytes and from a mix of all sixteen (the fingerprint is a
 * cryptographic hash, so its bytes are uniform).  A look-up reads one cache
 * line, and a claim prefetches the lines of all its buckets before it reads
 * any.  The rate of false positives is what a new key costs as the live
 * keys grow: a claim reads every sealed bucket whose filter lets its key
 * through, and those reads are cold.  At 16 bits and 10 positions a bucket
 * let 0.089 % of new keys through (2.5 % read one of thirty buckets); 24
 * bits and 13 positions give 0.005 % in theory, measured by the benchmark
 * (scripts/bench --only buckets, --only scale).  Positions must be
 * independent: 14 positions by double hashing within a block let more keys
 * through than 10 independent ones.
 *
 * The history tier (history.c) keeps the generations of scopes' histories
 * here too, read from their table when first asked: a slot names a
 * generation (its number and when it opened) and its version (the keys it
 * held when read), and holds its own number of positions a key; a fold
 * makes a new version, and the old one is freed when the new one is read.
 *
 * Names that do not come back.  A filter outlives its tables in memory: DROP
 * EXTENSION dedup drops them and CREATE EXTENSION numbers generations from 1
 * again, and a relation's OID may be given to another table once the
 * counter wrapped.  So a slot is named by its number or OID and a time, the
 * bucket's closed_at or the generation's opened_at (in microseconds, as
 * WAL-logged and replicated as the rest of the row), never by a number
 * alone: a new generation 1 with as many keys as a dropped one is another
 * filter.  The filters of a dropped extension are freed as the transaction
 * that drops it commits (dedup_filter_free_database); a standby, which replays
 * the drop, frees them when it needs room, as it frees those of a dropped
 * database (filter_free_orphans: no such table, or no such generation; whether a
 * generation is still in its table, the history tier above answers through
 * dedup_filter_history_hook, which module.c installs).  Both kinds set and test bits with
 * the routines below, so a key's bits are the same in memory and on disk.
 *
 * Concurrency.  The slot table and page map are changed under the lock; a
 * reader takes no lock: it checks that the slot names its bucket and is
 * ready, copies its fields and checks them against the memory's bounds,
 * reads bits, and counts the answer only if the slot's count of frees did
 * not move meanwhile: a bucket's slot is freed as it retires, while calls
 * with the old list of buckets may still read it, and a retired bucket's
 * expired claims still count for a scope with a history; a generation's
 * slot is freed when a fold made a new version.  A reader that cannot
 * count on a slot reads the bucket, or the generation's table.
 *
 * Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/heapam.h"
#include "access/table.h"
#include "access/tableam.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/procarray.h"
#include "storage/shmem.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"

#include "catalog.h"
#include "filter.h"
#include "settings.h"

#define FILTER_PAGE_BYTES	(64 * 1024)
#define FILTER_BITS_PER_KEY	24
#define FILTER_K			13
#define FILTER_MAX_SLOTS	256
#define FILTER_MAX_PAGES	16384	/* 1 GB of filters */

/* slot kinds */
#define FILTER_BUCKET	0
#define FILTER_HISTORY	1

/* slot states */
#define FILTER_FREE		0
#define FILTER_BUILDING	1
#define FILTER_READY	2

typedef struct FilterSlot
{
	pg_atomic_uint32 state;
	pg_atomic_uint64 frees;		/* counts the times the slot was freed */
	Oid			dboid;
	int			kind;			/* FILTER_BUCKET or FILTER_HISTORY */
	int64		ident;			/* the bucket's relation, or the generation */
	int64		stamp;			/* when the bucket closed, or the generation
								 * opened */
	int64		version;		/* of a generation: its keys when read */
	int			k;				/* positions a key */
	int			width;			/* log2 of a block's bits */
	int			builder;		/* the pid that reads it in (BUILDING) */
	uint32		nblocks;
	uint32		npages;
	int32		first_page;		/* pages first_page .. first_page + npages - 1 */
	int64		keys;
} FilterSlot;

typedef struct FilterShared
{
	LWLock	   *lock;
	int32		npages;			/* pages in data */
	FilterSlot	slots[FILTER_MAX_SLOTS];
	bool		page_used[FILTER_MAX_PAGES];
	char		data[FLEXIBLE_ARRAY_MEMBER];
} FilterShared;

static FilterShared *filter_shared = NULL;

/* the history tier's answer, installed by module.c */
DedupFilterHistoryHook dedup_filter_history_hook = NULL;

static int32
filter_npages(void)
{
	return Min(FILTER_MAX_PAGES,
			   (int64) dedup_bucket_filter_memory * 1024 * 1024 / FILTER_PAGE_BYTES);
}

static Size
filter_shmem_size(void)
{
	return add_size(offsetof(FilterShared, data),
					mul_size(filter_npages(), FILTER_PAGE_BYTES));
}

void
dedup_filter_shmem_request(void)
{
	if (dedup_bucket_filter_memory == 0)
		return;
	RequestAddinShmemSpace(MAXALIGN(filter_shmem_size()));
	RequestNamedLWLockTranche("dedup filters", 1);
}

void
dedup_filter_shmem_startup(void)
{
	bool		found;

	if (dedup_bucket_filter_memory == 0)
		return;
	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	filter_shared = ShmemInitStruct("dedup bucket filters", filter_shmem_size(), &found);
	if (!found)
	{
		memset(filter_shared, 0, offsetof(FilterShared, data));
		filter_shared->lock = &(GetNamedLWLockTranche("dedup filters"))->lock;
		filter_shared->npages = filter_npages();
		for (int i = 0; i < FILTER_MAX_SLOTS; i++)
		{
			pg_atomic_init_u32(&filter_shared->slots[i].state, FILTER_FREE);
			pg_atomic_init_u64(&filter_shared->slots[i].frees, 0);
		}
	}
	LWLockRelease(AddinShmemInitLock);
}

/* The block of a key in a filter of nblocks blocks. */
uint32
dedup_filter_block_of(const DedupFingerprint *fp, uint32 nblocks)
{
	uint32		h;

	memcpy(&h, fp->bytes, sizeof(h));
	return h % nblocks;
}

static inline bool filter_slot_is(const FilterSlot *slot, int kind, int64 ident,
								  int64 stamp, int64 version);

/* The block of a key in the filter of a slot the caller owns (it builds it). */
static inline uint8 *
filter_block(const FilterSlot *slot, const DedupFingerprint *fp)
{
	uint32		block = dedup_filter_block_of(fp, slot->nblocks);
	Size		block_bytes = DEDUP_FILTER_BLOCK_BYTES(slot->width);

	return (uint8 *) filter_shared->data + (Size) slot->first_page * FILTER_PAGE_BYTES +
		(Size) block * block_bytes;
}

/*
 * The block of a key in a slot read without the lock, its fields copied
 * and checked against the memory's bounds first (the slot may be freed and
 * taken again meanwhile); NULL when they do not hold.
 */
static inline const uint8 *
filter_block_unlocked(const FilterSlot *slot, const DedupFingerprint *fp, int *k, int *width)
{
	uint32		nblocks = slot->nblocks;
	int32		first = slot->first_page;
	Size		block_bytes;
	Size		offset;

	*k = slot->k;
	*width = slot->width;
	if (nblocks == 0 || first < 0 || *k < 1 || *k > FILTER_K ||
		(*width != DEDUP_FILTER_BUCKET_WIDTH && *width != DEDUP_FILTER_HISTORY_WIDTH))
		return NULL;
	block_bytes = DEDUP_FILTER_BLOCK_BYTES(*width);
	offset = (Size) first * FILTER_PAGE_BYTES +
		(Size) dedup_filter_block_of(fp, nblocks) * block_bytes;
	if (offset + block_bytes > (Size) filter_shared->npages * FILTER_PAGE_BYTES)
		return NULL;
	return (const uint8 *) filter_shared->data + offset;
}

/*
 * Test a key in a ready slot, read without the lock: DEDUP_FILTER_MAYBE or
 * _ABSENT, or _UNKNOWN when the slot was freed while it was read (a
 * bucket's when it retires, a generation's when a fold made a new version)
 * and its pages may have been taken by another filter.
 */
static int
filter_slot_test(FilterSlot *slot, int kind, int64 ident, int64 stamp, int64 version,
				 const DedupFingerprint *fp)
{
	uint64		frees = pg_atomic_read_u64(&slot->frees);
	const uint8 *block;
	int			k;
	int			width;
	bool		maybe;

	pg_read_barrier();
	if (!filter_slot_is(slot, kind, ident, stamp, version))
		return DEDUP_FILTER_UNKNOWN;
	/* its fields as they were when it became ready */
	pg_read_barrier();
	block = filter_block_unlocked(slot, fp, &k, &width);
	if (block == NULL)
		return DEDUP_FILTER_UNKNOWN;
	maybe = dedup_filter_test(block, fp, k, width);
	pg_read_barrier();
	if (pg_atomic_read_u64(&slot->frees) != frees)
		return DEDUP_FILTER_UNKNOWN;
	return maybe ? DEDUP_FILTER_MAYBE : DEDUP_FILTER_ABSENT;
}

/*
 * The FILTER_K bit positions of a key in a block of 2^width bits, width bits
 * each: from the fingerprint's bytes 4 to 15 as many as they hold (at 9
 * bits, seven from the first eight and three from the last four; at 10,
 * six and three), the rest from a 64-bit mix of all sixteen bytes
 * (murmur3's finalizer), so that none is a function of another.
 */
static inline void
filter_positions(const DedupFingerprint *fp, uint32 *pos, int width)
{
	uint32		mask = (1u << width) - 1;
	int			j = 0;

	uint64		h;
	uint64		m;
	uint32		l;

	StaticAssertStmt(DEDUP_FINGERPRINT_LEN >= 16 && FILTER_K == DEDUP_FILTER_MAX_K &&
					 FILTER_K * DEDUP_FILTER_HISTORY_WIDTH - 90 <= 64,
					 "a filter takes its positions from bytes 4 to 15 and the rest from their mix");
	memcpy(&h, fp->bytes + 4, sizeof(h));
	memcpy(&l, fp->bytes + 12, sizeof(l));
	memcpy(&m, fp->bytes, sizeof(m));
	m ^= h ^ ((uint64) l << 32);
	m ^= m >> 33;
	m *= UINT64CONST(0xff51afd7ed558ccd);
	m ^= m >> 33;
	m *= UINT64CONST(0xc4ceb9fe1a85ec53);
	m ^= m >> 33;
	for (int i = 0; i < 64 / width; i++, h >>= width)
		pos[j++] = h & mask;
	for (int i = 0; i < 32 / width; i++, l >>= width)
		pos[j++] = l & mask;
	for (; j < FILTER_K; m >>= width)
		pos[j++] = m & mask;
}

/* Set the first k positions of a key in its block of 2^width bits. */
void
dedup_filter_set(uint8 *block, const DedupFingerprint *fp, int k, int width)
{
	uint32		pos[FILTER_K];

	Assert(k >= 1 && k <= FILTER_K);
	filter_positions(fp, pos, width);
	for (int j = 0; j < k; j++)
		block[pos[j] >> 3] |= (1 << (pos[j] & 7));
}

/* Whether the first k positions of a key are all set in its block. */
bool
dedup_filter_test(const uint8 *block, const DedupFingerprint *fp, int k, int width)
{
	uint32		pos[FILTER_K];

	Assert(k >= 1 && k <= FILTER_K);
	filter_positions(fp, pos, width);
	for (int j = 0; j < k; j++)
	{
		if ((block[pos[j] >> 3] & (1 << (pos[j] & 7))) == 0)
			return false;
	}
	return true;
}

/*
 * Where this backend last found the filter of a bucket: a direct-mapped
 * cache of slot numbers, checked against the slot at every use, so that a
 * claim reading thirty buckets does not search the slots thirty times.
 */
#define FILTER_CACHE_SIZE	64
static struct
{
	int			kind;
	int64		ident;
	int			slot;
}			filter_cache[FILTER_CACHE_SIZE];

static inline bool
filter_slot_is(const FilterSlot *slot, int kind, int64 ident, int64 stamp, int64 version)
{
	return slot->ident == ident && slot->kind == kind && slot->stamp == stamp &&
		slot->version == version &&
		slot->dboid == MyDatabaseId &&
		pg_atomic_read_u32((pg_atomic_uint32 *) &slot->state) == FILTER_READY;
}

/* The slot holding a ready filter, or NULL. */
static FilterSlot *
filter_slot_find(int kind, int64 ident, int64 stamp, int64 version)
{
	int			c = (int) ((ident * 2 + kind) % FILTER_CACHE_SIZE);

	if (filter_shared == NULL)
		return NULL;
	if (filter_cache[c].ident == ident && filter_cache[c].kind == kind &&
		filter_slot_is(&filter_shared->slots[filter_cache[c].slot], kind, ident, stamp, version))
	{
		pg_read_barrier();
		return &filter_shared->slots[filter_cache[c].slot];
	}
	for (int i = 0; i < FILTER_MAX_SLOTS; i++)
	{
		if (filter_slot_is(&filter_shared->slots[i], kind, ident, stamp, version))
		{
			pg_read_barrier();
			filter_cache[c].kind = kind;
			filter_cache[c].ident = ident;
			filter_cache[c].slot = i;
			return &filter_shared->slots[i];
		}
	}
	return NULL;
}

/* The slot holding the ready filter of a bucket, or NULL. */
static FilterSlot *
filter_slot_of(Oid relid, TimestampTz closed_at)
{
	return filter_slot_find(FILTER_BUCKET, relid, closed_at, 0);
}

/*
 * Whether a sealed bucket may hold a row of the key: false only when its
 * filter is ready and says the key is absent.
 */
bool
dedup_filter_may_contain(Oid relid, TimestampTz closed_at, const DedupFingerprint *fp)
{
	FilterSlot *slot = filter_slot_of(relid, closed_at);

	if (slot == NULL)
		return true;
	return filter_slot_test(slot, FILTER_BUCKET, relid, closed_at, 0, fp) != DEDUP_FILTER_ABSENT;
}

/*
 * Start loading the block of a key in the filter of a bucket, if it has
 * one: a claim prefetches the blocks of all its sealed buckets before it
 * tests any, so that their cache misses overlap.
 */
void
dedup_filter_prefetch(Oid relid, TimestampTz closed_at, const DedupFingerprint *fp)
{
#if defined(__GNUC__) || defined(__clang__)
	FilterSlot *slot = filter_slot_of(relid, closed_at);
	const uint8 *block;
	int			k;
	int			width;

	if (slot != NULL && (block = filter_block_unlocked(slot, fp, &k, &width)) != NULL)
		__builtin_prefetch(block);
#endif
}

/* Whether this server keeps filters (dedup preloaded, memory for them). */
bool
dedup_filter_enabled(void)
{
	return filter_shared != NULL;
}

/* Whether a bucket has a ready filter. */
bool
dedup_filter_exists(Oid relid, TimestampTz closed_at)
{
	return filter_slot_of(relid, closed_at) != NULL;
}

/* Give a slot and its pages back; the lock is held. */
static void
filter_release(FilterSlot *slot)
{
	/*
	 * Not ready any more, then the count of frees (a full barrier), then the
	 * pages free for another filter: a reader that saw the slot ready read
	 * the count before it moved, and reads it again after its bits
	 * (filter_slot_test), so it sees the move if the pages were taken.
	 */
	pg_atomic_write_u32(&slot->state, FILTER_FREE);
	slot->ident = 0;
	slot->stamp = 0;
	pg_atomic_fetch_add_u64(&slot->frees, 1);
	for (uint32 p = 0; p < slot->npages; p++)
		filter_shared->page_used[slot->first_page + p] = false;
}

/*
 * Whether a slot may be freed by this process: a ready one, or one being
 * built by a process that is gone.  A bucket's filter is built by the
 * cleanup that frees it; a generation's by any backend, and only its
 * builder frees it while it builds.  The lock is held.
 */
static bool
filter_may_release(const FilterSlot *slot)
{
	uint32		state = pg_atomic_read_u32((pg_atomic_uint32 *) &slot->state);

	if (state == FILTER_READY)
		return true;
	return state == FILTER_BUILDING &&
		(slot->kind == FILTER_BUCKET || slot->builder == MyProcPid ||
		 BackendPidGetProc(slot->builder) == NULL);
}

/*
 * Free every version of a filter of this database, whatever its stamp (not
 * one another process builds).
 */
static void
filter_free(int kind, int64 ident)
{
	if (filter_shared == NULL)
		return;
	LWLockAcquire(filter_shared->lock, LW_EXCLUSIVE);
	for (int i = 0; i < FILTER_MAX_SLOTS; i++)
	{
		FilterSlot *slot = &filter_shared->slots[i];

		if (slot->ident == ident && slot->kind == kind && slot->dboid == MyDatabaseId &&
			filter_may_release(slot))
			filter_release(slot);
	}
	LWLockRelease(filter_shared->lock);
}

/* Free the filter of a bucket, if it has one. */
void
dedup_filter_free(Oid relid)
{
	filter_free(FILTER_BUCKET, relid);
}

/*
 * Free the filters whose bucket is gone without the cleanup (DROP EXTENSION,
 * DROP DATABASE): of this database, those whose table no longer exists; of
 * another, those whose database no longer exists.
 */
static void
filter_free_orphans(void)
{
	for (int i = 0; i < FILTER_MAX_SLOTS; i++)
	{
		FilterSlot *slot = &filter_shared->slots[i];
		Oid			dboid = slot->dboid;
		int			kind = slot->kind;
		int64		ident = slot->ident;
		int64		stamp = slot->stamp;
		int64		version = slot->version;
		bool		gone;

		if (pg_atomic_read_u32(&slot->state) != FILTER_READY)
			continue;

		/*
		 * catalog look-ups without the lock; the slot is checked again under
		 * it
		 */
		if (dboid != MyDatabaseId)
			gone = !SearchSysCacheExists1(DATABASEOID, ObjectIdGetDatum(dboid));
		else if (kind == FILTER_BUCKET)
			gone = !SearchSysCacheExists1(RELOID, ObjectIdGetDatum((Oid) ident));
		else
			gone = !dedup_filter_history_hook(ident, stamp, version);
		if (!gone)
			continue;
		LWLockAcquire(filter_shared->lock, LW_EXCLUSIVE);
		if (slot->dboid == dboid && slot->kind == kind && slot->ident == ident &&
			slot->stamp == stamp && slot->version == version &&
			pg_atomic_read_u32(&slot->state) == FILTER_READY)
			filter_release(slot);
		LWLockRelease(filter_shared->lock);
	}
}

/*
 * Take a free slot and a run of free pages for a filter of nblocks blocks;
 * NULL when there is no room.  The slot is left BUILDING, its pages not
 * yet zeroed.  The lock is held.
 */
static FilterSlot *
filter_allocate_locked(int kind, int64 ident, int64 stamp, int64 version, uint32 nblocks, int k)
{
	int			width = kind == FILTER_HISTORY ? DEDUP_FILTER_HISTORY_WIDTH : DEDUP_FILTER_BUCKET_WIDTH;
	Size		bytes = (Size) nblocks * DEDUP_FILTER_BLOCK_BYTES(width);
	uint32		npages = (uint32) ((bytes + FILTER_PAGE_BYTES - 1) / FILTER_PAGE_BYTES);
	FilterSlot *slot = NULL;
	int32		run = 0;
	int32		first = -1;

	for (int i = 0; i < FILTER_MAX_SLOTS && slot == NULL; i++)
	{
		if (pg_atomic_read_u32(&filter_shared->slots[i].state) == FILTER_FREE)
			slot = &filter_shared->slots[i];
	}
	for (int32 p = 0; slot != NULL && p < filter_shared->npages; p++)
	{
		run = filter_shared->page_used[p] ? 0 : run + 1;
		if (run == (int32) npages)
		{
			first = p - npages + 1;
			break;
		}
	}
	if (slot == NULL || first < 0)
		return NULL;
	for (uint32 p = 0; p < npages; p++)
		filter_shared->page_used[first + p] = true;
	slot->dboid = MyDatabaseId;
	slot->kind = kind;
	slot->ident = ident;
	slot->stamp = stamp;
	slot->version = version;
	slot->k = k;
	slot->width = width;
	slot->nblocks = nblocks;
	slot->npages = npages;
	slot->first_page = first;
	slot->keys = 0;
	slot->builder = MyProcPid;
	pg_atomic_write_u32(&slot->state, FILTER_BUILDING);
	return slot;
}

/* filter_allocate_locked(), taking the lock, with the pages zeroed. */
static FilterSlot *
filter_allocate(int kind, int64 ident, int64 stamp, int64 version, uint32 nblocks, int k)
{
	FilterSlot *slot;

	LWLockAcquire(filter_shared->lock, LW_EXCLUSIVE);
	slot = filter_allocate_locked(kind, ident, stamp, version, nblocks, k);
	LWLockRelease(filter_shared->lock);
	if (slot != NULL)
		memset(filter_shared->data + (Size) slot->first_page * FILTER_PAGE_BYTES, 0,
			   (Size) slot->npages * FILTER_PAGE_BYTES);
	return slot;
}

/*
 * Build the filter of a sealed bucket that holds nkeys rows (or fewer):
 * every row's fingerprint, read with SnapshotAny, so that no row, however
 * its transaction ended, is left out.  False when there is no room (the
 * bucket is then probed by every call) or no shared memory for filters.
 */
bool
dedup_filter_build(Oid relid, TimestampTz closed_at, int64 nkeys)
{
	FilterSlot *slot;
	Relation	rel;
	TableScanDesc scan;
	TupleTableSlot *tslot;
	int64		added = 0;
	uint32		nblocks = (uint32) Max(1, (nkeys * FILTER_BITS_PER_KEY + 511) / 512);

	if (filter_shared == NULL || dedup_filter_exists(relid, closed_at))
		return filter_shared != NULL;

	/*
	 * A slot left building by a process that exited before it was done, or
	 * the filter of a dropped table whose OID the bucket was given again
	 * (another stamp)
	 */
	dedup_filter_free(relid);
	slot = filter_allocate(FILTER_BUCKET, relid, closed_at, 0, nblocks, FILTER_K);
	if (slot == NULL)
	{
		filter_free_orphans();
		slot = filter_allocate(FILTER_BUCKET, relid, closed_at, 0, nblocks, FILTER_K);
	}
	if (slot == NULL)
		return false;

	PG_TRY();
	{
		rel = table_open(relid, AccessShareLock);
		scan = table_beginscan(rel, SnapshotAny, 0, NULL);
		tslot = table_slot_create(rel, NULL);
		while (table_scan_getnextslot(scan, ForwardScanDirection, tslot))
		{
			bool		isnull;
			const DedupFingerprint *fp;

			CHECK_FOR_INTERRUPTS();
			fp = (const DedupFingerprint *)
				DatumGetPointer(slot_getattr(tslot, Anum_key_key, &isnull));
			dedup_filter_set(filter_block(slot, fp), fp, FILTER_K, DEDUP_FILTER_BUCKET_WIDTH);
			added++;
		}
		ExecDropSingleTupleTableSlot(tslot);
		table_endscan(scan);
		table_close(rel, AccessShareLock);
	}
	PG_CATCH();
	{
		dedup_filter_free(relid);
		PG_RE_THROW();
	}
	PG_END_TRY();

	if (added > nkeys * 2)
	{
		/* far more rows than counted at the seal: rebuild bigger next pass */
		dedup_filter_free(relid);
		return false;
	}
	slot->keys = added;
	pg_write_barrier();
	pg_atomic_write_u32(&slot->state, FILTER_READY);
	return true;
}

/* ---------------------------------------------------------------------
 * Generations of histories (history.c)
 * ---------------------------------------------------------------------
 */

/*
 * Whether version "version" of a generation, read into memory, may hold a
 * key: DEDUP_FILTER_ABSENT, _MAYBE, or _UNKNOWN when it is not in memory.
 */
int
dedup_filter_history_test(int64 generation, TimestampTz opened_at, int64 version,
						  const DedupFingerprint *fp)
{
	FilterSlot *slot = filter_slot_find(FILTER_HISTORY, generation, opened_at, version);

	if (slot == NULL)
		return DEDUP_FILTER_UNKNOWN;
	return filter_slot_test(slot, FILTER_HISTORY, generation, opened_at, version, fp);
}

/*
 * Read a version of a generation into memory, unless it is there or another
 * backend is reading it in: fill() writes its nblocks blocks into the
 * zeroed memory it is given.  The generation's other versions are freed
 * (those ready).  True when the version is in memory; false when another
 * backend is reading it in, when there is no room, or no shared memory for
 * filters (the caller reads the table; *no_room says which).  Only this backend writes the slot
 * while it is BUILDING, and nobody frees it then (filter_may_release).
 */
bool
dedup_filter_history_load(int64 generation, TimestampTz opened_at, int64 version,
						  uint32 nblocks, int k, void (*fill) (uint8 *bits, void *arg),
						  void *arg, bool *no_room)
{
	FilterSlot *slot = NULL;

	*no_room = (filter_shared == NULL);
	if (filter_shared == NULL)
		return false;
	for (int attempt = 0; attempt < 2 && slot == NULL; attempt++)
	{
		bool		elsewhere = false;

		if (attempt > 0)
			filter_free_orphans();
		LWLockAcquire(filter_shared->lock, LW_EXCLUSIVE);
		for (int i = 0; i < FILTER_MAX_SLOTS; i++)
		{
			FilterSlot *s = &filter_shared->slots[i];

			if (pg_atomic_read_u32(&s->state) == FILTER_FREE || s->kind != FILTER_HISTORY ||
				s->ident != generation || s->dboid != MyDatabaseId)
				continue;
			if (s->stamp == opened_at && s->version == version &&
				pg_atomic_read_u32(&s->state) == FILTER_READY)
			{
				LWLockRelease(filter_shared->lock);
				return true;
			}

			/*
			 * another version, or a dropped extension's generation of that
			 * number
			 */
			if (filter_may_release(s))
				filter_release(s);
			else if (s->stamp == opened_at && s->version == version)
				elsewhere = true;
		}
		if (elsewhere)
		{
			LWLockRelease(filter_shared->lock);
			return false;
		}
		slot = filter_allocate_locked(FILTER_HISTORY, generation, opened_at, version, nblocks, k);
		LWLockRelease(filter_shared->lock);
	}
	if (slot == NULL)
	{
		*no_room = true;
		return false;
	}
	memset(filter_shared->data + (Size) slot->first_page * FILTER_PAGE_BYTES, 0,
		   (Size) slot->npages * FILTER_PAGE_BYTES);
	PG_TRY();
	{
		fill((uint8 *) filter_shared->data + (Size) slot->first_page * FILTER_PAGE_BYTES, arg);
	}
	PG_CATCH();
	{
		LWLockAcquire(filter_shared->lock, LW_EXCLUSIVE);
		filter_release(slot);
		LWLockRelease(filter_shared->lock);
		PG_RE_THROW();
	}
	PG_END_TRY();
	pg_write_barrier();
	pg_atomic_write_u32(&slot->state, FILTER_READY);
	return true;
}

/* Free a generation's filter (it was dropped). */
void
dedup_filter_history_free(int64 generation)
{
	filter_free(FILTER_HISTORY, generation);
}

/* ---------------------------------------------------------------------
 * DROP EXTENSION dedup
 * ---------------------------------------------------------------------
 */

/*
 * Free every filter of this database (those no other process builds): a
 * transaction that dropped the extension commits (module.c's hook), and its
 * buckets and generations are gone with their tables.  (A standby, which
 * replays the drop without running this, and any backend short of room,
 * recognise them instead: filter_free_orphans.)
 */
void
dedup_filter_free_database(void)
{
	int			n = 0;

	if (filter_shared == NULL)
		return;
	LWLockAcquire(filter_shared->lock, LW_EXCLUSIVE);
	for (int i = 0; i < FILTER_MAX_SLOTS; i++)
	{
		FilterSlot *slot = &filter_shared->slots[i];

		if (pg_atomic_read_u32(&slot->state) != FILTER_FREE &&
			slot->dboid == MyDatabaseId && filter_may_release(slot))
		{
			filter_release(slot);
			n++;
		}
	}
	LWLockRelease(filter_shared->lock);
	elog(DEBUG1, "freed %d filters of the dropped extension dedup", n);
}
