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
 * (database and relation), its size and the pages that hold it.  A filter
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
 * Concurrency.  The slot table and page map are changed under the lock; a
 * reader takes no lock: it checks that the slot names its bucket and is
 * ready, then reads bits.  A slot is freed only when its bucket is retired
 * or dropped, whose rows have all expired, so a reader that still reads it
 * (a stale list of buckets) can get any answer without harm.
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
#include "storage/shmem.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"

#include "dedup.h"
#include "bucket.h"
#include "store.h"

#define FILTER_PAGE_BYTES	(64 * 1024)
#define FILTER_BLOCK_BYTES	64
#define FILTER_BLOCKS_PER_PAGE	(FILTER_PAGE_BYTES / FILTER_BLOCK_BYTES)
#define FILTER_BITS_PER_KEY	24
#define FILTER_K			13
#define FILTER_MAX_SLOTS	256
#define FILTER_MAX_PAGES	16384	/* 1 GB of filters */

/* slot states */
#define FILTER_FREE		0
#define FILTER_BUILDING	1
#define FILTER_READY	2

typedef struct FilterSlot
{
	pg_atomic_uint32 state;
	Oid			dboid;
	Oid			relid;
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

int			dedup_bucket_filter_memory = 64;	/* MB */

static FilterShared *filter_shared = NULL;

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
			pg_atomic_init_u32(&filter_shared->slots[i].state, FILTER_FREE);
	}
	LWLockRelease(AddinShmemInitLock);
}

/* The block of a key, and its FILTER_K bit positions in the block. */
static inline uint8 *
filter_block(const FilterSlot *slot, const DedupFingerprint *fp)
{
	uint32		h;
	uint32		block;

	memcpy(&h, fp->bytes, sizeof(h));
	block = h % slot->nblocks;
	return (uint8 *) filter_shared->data +
		(Size) (slot->first_page + block / FILTER_BLOCKS_PER_PAGE) * FILTER_PAGE_BYTES +
		(Size) (block % FILTER_BLOCKS_PER_PAGE) * FILTER_BLOCK_BYTES;
}

/*
 * The FILTER_K bit positions of a key in its block, 9 bits each: ten from
 * the fingerprint's bytes 4 to 15 (seven from the first eight, three from
 * the last four), three from a 64-bit mix of all sixteen bytes (murmur3's
 * finalizer), so that none is a function of another.
 */
static inline void
filter_positions(const DedupFingerprint *fp, uint32 *pos)
{
	uint64		h;
	uint64		m;
	uint32		l;

	StaticAssertStmt(DEDUP_FINGERPRINT_LEN >= 16 && FILTER_K == 13,
					 "a filter takes ten 9-bit positions from bytes 4 to 15 and three from their mix");
	memcpy(&h, fp->bytes + 4, sizeof(h));
	memcpy(&l, fp->bytes + 12, sizeof(l));
	memcpy(&m, fp->bytes, sizeof(m));
	m ^= h ^ ((uint64) l << 32);
	m ^= m >> 33;
	m *= UINT64CONST(0xff51afd7ed558ccd);
	m ^= m >> 33;
	m *= UINT64CONST(0xc4ceb9fe1a85ec53);
	m ^= m >> 33;
	for (int j = 0; j < 7; j++, h >>= 9)
		pos[j] = h & 511;
	for (int j = 7; j < 10; j++, l >>= 9)
		pos[j] = l & 511;
	for (int j = 10; j < FILTER_K; j++, m >>= 9)
		pos[j] = m & 511;
}

/*
 * Where this backend last found the filter of a bucket: a direct-mapped
 * cache of slot numbers, checked against the slot at every use, so that a
 * claim reading thirty buckets does not search the slots thirty times.
 */
#define FILTER_CACHE_SIZE	64
static struct
{
	Oid			relid;
	int			slot;
}			filter_cache[FILTER_CACHE_SIZE];

static inline bool
filter_slot_is(const FilterSlot *slot, Oid relid)
{
	return slot->relid == relid && slot->dboid == MyDatabaseId &&
		pg_atomic_read_u32((pg_atomic_uint32 *) &slot->state) == FILTER_READY;
}

/* The slot holding the ready filter of a bucket, or NULL. */
static FilterSlot *
filter_slot_of(Oid relid)
{
	int			c = relid % FILTER_CACHE_SIZE;

	if (filter_shared == NULL)
		return NULL;
	if (filter_cache[c].relid == relid &&
		filter_slot_is(&filter_shared->slots[filter_cache[c].slot], relid))
	{
		pg_read_barrier();
		return &filter_shared->slots[filter_cache[c].slot];
	}
	for (int i = 0; i < FILTER_MAX_SLOTS; i++)
	{
		if (filter_slot_is(&filter_shared->slots[i], relid))
		{
			pg_read_barrier();
			filter_cache[c].relid = relid;
			filter_cache[c].slot = i;
			return &filter_shared->slots[i];
		}
	}
	return NULL;
}

/*
 * Whether a sealed bucket may hold a row of the key: false only when its
 * filter is ready and says the key is absent.
 */
bool
dedup_filter_may_contain(Oid relid, const DedupFingerprint *fp)
{
	FilterSlot *slot = filter_slot_of(relid);
	const uint8 *block;
	uint32		pos[FILTER_K];

	if (slot == NULL)
		return true;
	block = filter_block(slot, fp);
	filter_positions(fp, pos);
	for (int j = 0; j < FILTER_K; j++)
	{
		if ((block[pos[j] >> 3] & (1 << (pos[j] & 7))) == 0)
			return false;
	}
	return true;
}

/*
 * Start loading the block of a key in the filter of a bucket, if it has
 * one: a claim prefetches the blocks of all its sealed buckets before it
 * tests any, so that their cache misses overlap.
 */
void
dedup_filter_prefetch(Oid relid, const DedupFingerprint *fp)
{
#if defined(__GNUC__) || defined(__clang__)
	FilterSlot *slot = filter_slot_of(relid);

	if (slot != NULL)
		__builtin_prefetch(filter_block(slot, fp));
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
dedup_filter_exists(Oid relid)
{
	return filter_slot_of(relid) != NULL;
}

/* Free the filter of a bucket, if it has one. */
void
dedup_filter_free(Oid relid)
{
	if (filter_shared == NULL)
		return;
	LWLockAcquire(filter_shared->lock, LW_EXCLUSIVE);
	for (int i = 0; i < FILTER_MAX_SLOTS; i++)
	{
		FilterSlot *slot = &filter_shared->slots[i];

		if (slot->relid == relid && slot->dboid == MyDatabaseId &&
			pg_atomic_read_u32(&slot->state) != FILTER_FREE)
		{
			for (uint32 p = 0; p < slot->npages; p++)
				filter_shared->page_used[slot->first_page + p] = false;
			slot->relid = InvalidOid;
			pg_atomic_write_u32(&slot->state, FILTER_FREE);
		}
	}
	LWLockRelease(filter_shared->lock);
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
		Oid			relid = slot->relid;
		bool		gone;

		if (pg_atomic_read_u32(&slot->state) != FILTER_READY)
			continue;
		/* catalog look-ups without the lock; the slot is checked again under it */
		if (dboid == MyDatabaseId)
			gone = !SearchSysCacheExists1(RELOID, ObjectIdGetDatum(relid));
		else
			gone = !SearchSysCacheExists1(DATABASEOID, ObjectIdGetDatum(dboid));
		if (!gone)
			continue;
		LWLockAcquire(filter_shared->lock, LW_EXCLUSIVE);
		if (slot->dboid == dboid && slot->relid == relid &&
			pg_atomic_read_u32(&slot->state) == FILTER_READY)
		{
			for (uint32 p = 0; p < slot->npages; p++)
				filter_shared->page_used[slot->first_page + p] = false;
			slot->relid = InvalidOid;
			pg_atomic_write_u32(&slot->state, FILTER_FREE);
		}
		LWLockRelease(filter_shared->lock);
	}
}

/*
 * Take a free slot and a run of free pages for a filter of nkeys keys;
 * NULL when there is no room.  The slot is left BUILDING.
 */
static FilterSlot *
filter_allocate(Oid relid, int64 nkeys)
{
	uint32		nblocks = (uint32) Max(1, (nkeys * FILTER_BITS_PER_KEY + 511) / 512);
	uint32		npages = (nblocks + FILTER_BLOCKS_PER_PAGE - 1) / FILTER_BLOCKS_PER_PAGE;
	FilterSlot *slot = NULL;
	int32		run = 0;
	int32		first = -1;

	LWLockAcquire(filter_shared->lock, LW_EXCLUSIVE);
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
	{
		LWLockRelease(filter_shared->lock);
		return NULL;
	}
	for (uint32 p = 0; p < npages; p++)
		filter_shared->page_used[first + p] = true;
	slot->dboid = MyDatabaseId;
	slot->relid = relid;
	slot->nblocks = nblocks;
	slot->npages = npages;
	slot->first_page = first;
	slot->keys = nkeys;
	pg_atomic_write_u32(&slot->state, FILTER_BUILDING);
	LWLockRelease(filter_shared->lock);
	memset(filter_shared->data + (Size) first * FILTER_PAGE_BYTES, 0,
		   (Size) npages * FILTER_PAGE_BYTES);
	return slot;
}

/*
 * Build the filter of a sealed bucket that holds nkeys rows (or fewer):
 * every row's fingerprint, read with SnapshotAny, so that no row, however
 * its transaction ended, is left out.  False when there is no room (the
 * bucket is then probed by every call) or no shared memory for filters.
 */
bool
dedup_filter_build(Oid relid, int64 nkeys)
{
	FilterSlot *slot;
	Relation	rel;
	TableScanDesc scan;
	TupleTableSlot *tslot;
	int64		added = 0;

	if (filter_shared == NULL || dedup_filter_exists(relid))
		return filter_shared != NULL;
	/* a slot left building by a process that exited before it was done */
	dedup_filter_free(relid);
	slot = filter_allocate(relid, nkeys);
	if (slot == NULL)
	{
		filter_free_orphans();
		slot = filter_allocate(relid, nkeys);
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
			uint8	   *block;
			uint32		pos[FILTER_K];

			CHECK_FOR_INTERRUPTS();
			fp = (const DedupFingerprint *)
				DatumGetPointer(slot_getattr(tslot, Anum_key_key, &isnull));
			block = filter_block(slot, fp);
			filter_positions(fp, pos);
			for (int j = 0; j < FILTER_K; j++)
				block[pos[j] >> 3] |= (1 << (pos[j] & 7));
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

	if (added > slot->keys * 2)
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
