/*-------------------------------------------------------------------------
 *
 * history.c
 *	  The history tier of a scope: an approximate memory of its expired
 *	  claims, behind the exact window, in blocked Bloom filters that are
 *	  WAL-logged like any table and expire by whole generations.
 *
 * The exact claims decide every race, rollback and live key (store.c).  A
 * scope with a history (dedup.scopes.history, its window, and
 * false_positive_rate) has a history_id, which each of its claims carries
 * in dedup.claims.history.  When the cleanup retires a time bucket (every
 * row of it has expired, bucket.c), it first folds, in the same
 * transaction, the fingerprints of the bucket's claims of such scopes that
 * expired less than a window ago into the scope's open generation; calls
 * stop reading the bucket only once that commits.  So only committed,
 * expired claims ever enter a history, and a key is answered from it only
 * when no live claim has it.  An expired claim not yet folded still counts
 * (store.c): a claim is a duplicate while its key has a live claim, an
 * expired one within the window, or a generation that may hold it.  The
 * store and the filters, below this file, ask it through the hooks
 * module.c installs (key_store_history_hook, dedup_filter_history_hook),
 * and the cleanup passes the fold to the bucket steps (cleanup.c).
 *
 * Generations.  A generation takes the folds of one slice of time, as long
 * as the window, and is deleted whole (its row and its chunks, never a
 * key) once its slice ended a window ago: a key folded at t, which expired
 * before t, is remembered until at least t + window, and at most about two
 * windows.  A look-up reads the two slices still kept, and a slice's
 * first generation is sized for half the scope's rate (less when the slice
 * before took more), so that the two add up to it: a generation's filter
 * has the bits a key and positions that keep a blocked filter's rate at its
 * share (history_geometry), for the keys it is sized for.  That size is a
 * guess made when a slice opens: the keys the last slice took, or for a
 * history's first slice the keys of its first fold, and no more: a first
 * fold is often the burst of a backlog, and a filter sized for a window of
 * it would cost far more than the claims it replaces.  A fold that would
 * pass it starts another generation in the same slice, at a lower rate and
 * twice the size, as a scalable Bloom filter does (history_open_generation
 * has the rates), so a slice that grows from its first fold keeps the
 * scope's rate, and a sudden rise never raises it past 1.25 times the
 * scope's.  Bloom filters of different sizes cannot be
 * merged without their keys, so a slice's folds go into one open filter,
 * rewritten chunk by chunk at each fold, rather than into small write-once
 * filters merged later.
 *
 * Layout.  A key's block is chosen by the first four bytes of its
 * fingerprint, its positions by the others (filter.c, the routine of the
 * buckets' filters too).  Blocks are 1024 bits, two adjacent cache lines:
 * the spread of keys among blocks costs a generation 4.9 % more bits than
 * an unblocked filter at its rate (0.0005 for a scope's 0.001), 9.5 % at
 * 512 bits (one line, as the buckets' filters), which with the halved rate
 * would be 20 % more than the ideal filter for the scope's rate alone, 15 %
 * at 1024 bits.  The bits are kept
 * in dedup.history_blocks, 63 blocks (8064 bytes, about a page) a row; a
 * chunk no fold has touched has no row.  Look-ups read a generation from
 * shared memory (filter.c: read once by the first call that needs it, and
 * again after each fold, which makes a new version), or, without room
 * there, the one chunk of the key, through the primary key.  Every backend
 * keeps the list of generations, read again after a relcache invalidation
 * of dedup.history_generations, which each fold and expiry sends; a
 * standby replays both, so it answers as the primary does.
 *
 * Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "access/genam.h"
#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/tableam.h"
#include "catalog/namespace.h"
#include "catalog/pg_type_d.h"
#include "executor/spi.h"
#include "executor/tuptable.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "catalog.h"
#include "checks.h"
#include "filter.h"
#include "history.h"
#include "routing.h"
#include "scope.h"
#include "shards.h"
#include "store.h"

/* a block of 1024 bits; a chunk of 63 (8064 bytes): one row of dedup.history_blocks */
#define HISTORY_WIDTH			DEDUP_FILTER_HISTORY_WIDTH
#define HISTORY_BLOCK_BYTES		DEDUP_FILTER_BLOCK_BYTES(HISTORY_WIDTH)
#define HISTORY_BLOCK_BITS		(HISTORY_BLOCK_BYTES * 8)
#define HISTORY_CHUNK_BLOCKS	63
#define HISTORY_CHUNK_BYTES		(HISTORY_CHUNK_BLOCKS * HISTORY_BLOCK_BYTES)

/* the smallest generation, in keys, and the largest */
#define HISTORY_MIN_CAPACITY	1024
#define HISTORY_MAX_CAPACITY	((int64) 1 << 32)

/* Columns of dedup.history_generations */
#define Anum_generations_generation	1
#define Anum_generations_history_id	2
#define Anum_generations_opened_at	3
#define Anum_generations_slice_end	4
#define Anum_generations_rate		5
#define Anum_generations_k			6
#define Anum_generations_nblocks	7
#define Anum_generations_capacity	8
#define Anum_generations_keys		9

/* Columns of dedup.history_spans (on a Citus cluster) */
#define Anum_spans_shardid			1
#define Anum_spans_hash_min			2
#define Anum_spans_hash_max			3

/* Columns of dedup.history_blocks */
#define Anum_blocks_generation		1
#define Anum_blocks_chunk			2
#define Anum_blocks_bits			3

typedef struct HistoryGeneration
{
	int64		generation;
	int32		history_id;
	TimestampTz opened_at;
	TimestampTz slice_end;
	double		rate;
	int			k;
	uint32		nblocks;
	int64		capacity;
	int64		keys;			/* the version: it grows at every fold */
	bool		no_room;		/* could not be read into shared memory */
} HistoryGeneration;

/* ---------------------------------------------------------------------
 * Geometry
 * ---------------------------------------------------------------------
 */

/*
 * The rate of false positives of a blocked Bloom filter of 1024-bit blocks
 * at bits_per_key bits a key and k positions: the keys of a block are
 * Poisson-distributed around 1024 / bits_per_key (Putze, Sanders, Singler,
 * "Cache-, hash- and space-efficient Bloom filters", 2007).
 */
static double
history_blocked_rate(double bits_per_key, int k)
{
	double		lambda = HISTORY_BLOCK_BITS / bits_per_key;
	double		p = exp(-lambda);
	double		sum = 0;
	int			top = (int) (lambda * 4) + 50;

	for (int x = 0; x <= top; x++)
	{
		if (x > 0)
			p *= lambda / x;
		sum += p * pow(1.0 - pow(1.0 - 1.0 / HISTORY_BLOCK_BITS, (double) k * x), k);
	}
	return sum;
}

/*
 * The fewest bits a key, in steps of 1/100, and the positions that go with
 * them, for a blocked filter whose rate is at most "rate".  The ideal
 * Bloom filter needs -ln(rate) / ln(2)^2 bits; blocks cost a few percent
 * more (4.8 % at 0.0005).
 */
static void
history_geometry(double rate, double *bits_per_key, int *k)
{
	double		ideal = -log(rate) / (M_LN2 * M_LN2);

	for (double c = ideal;; c += 0.01)
	{
		for (int j = 1; j <= DEDUP_FILTER_MAX_K; j++)
		{
			if (history_blocked_rate(c, j) <= rate)
			{
				*bits_per_key = c;
				*k = j;
				return;
			}
		}
	}
}

/* ---------------------------------------------------------------------
 * The list of generations, cached by each backend
 * ---------------------------------------------------------------------
 */
static HistoryGeneration *history_list = NULL;
static int	history_count = 0;
static bool history_valid = false;
static uint64 history_invalidations = 0;	/* counts them, as bucket.c does */
static Oid	history_relid = InvalidOid;

static void
history_list_callback(Datum arg, Oid relid)
{
	if (!OidIsValid(relid) || relid == history_relid)
	{
		history_valid = false;
		history_invalidations++;
	}
}

/* A row of dedup.history_generations (or of a shard of it) */
static void
history_generation_of(HeapTuple tuple, TupleDesc desc, HistoryGeneration *g)
{
	bool		isnull;

	g->generation = DatumGetInt64(heap_getattr(tuple, Anum_generations_generation, desc, &isnull));
	g->history_id = DatumGetInt32(heap_getattr(tuple, Anum_generations_history_id, desc, &isnull));
	g->opened_at = DatumGetTimestampTz(heap_getattr(tuple, Anum_generations_opened_at, desc, &isnull));
	g->slice_end = DatumGetTimestampTz(heap_getattr(tuple, Anum_generations_slice_end, desc, &isnull));
	g->rate = DatumGetFloat8(heap_getattr(tuple, Anum_generations_rate, desc, &isnull));
	g->k = DatumGetInt32(heap_getattr(tuple, Anum_generations_k, desc, &isnull));
	g->nblocks = (uint32) DatumGetInt32(heap_getattr(tuple, Anum_generations_nblocks, desc, &isnull));
	g->capacity = DatumGetInt64(heap_getattr(tuple, Anum_generations_capacity, desc, &isnull));
	g->keys = DatumGetInt64(heap_getattr(tuple, Anum_generations_keys, desc, &isnull));
	g->no_room = false;
}

/*
 * The generations of one shard of dedup.history_generations (a Citus
 * cluster's), read with a snapshot taken now: of history_id, or all when
 * it is 0, with their keys.  Returns how many.
 */
static int
history_shard_generations(Oid heap, int32 history_id, HistoryGeneration **result)
{
	Relation	rel = table_open(heap, AccessShareLock);
	Snapshot	snapshot = RegisterSnapshot(GetLatestSnapshot());
	SysScanDesc scan = systable_beginscan(rel, InvalidOid, false, snapshot, 0, NULL);
	HeapTuple	tuple;
	int			n = 0;
	int			size = 4;
	HistoryGeneration *list = palloc(sizeof(HistoryGeneration) * size);

	while ((tuple = systable_getnext(scan)) != NULL)
	{
		if (n == size)
		{
			size *= 2;
			list = repalloc(list, sizeof(HistoryGeneration) * size);
		}
		history_generation_of(tuple, RelationGetDescr(rel), &list[n]);
		if ((history_id == 0 || list[n].history_id == history_id) && list[n].keys > 0)
			n++;
	}
	systable_endscan(scan);
	UnregisterSnapshot(snapshot);
	table_close(rel, AccessShareLock);
	*result = list;
	return n;
}

static bool history_cluster_generation_is(int64 generation, TimestampTz opened_at, int64 version);

/*
 * Read dedup.history_generations if it changed, with a snapshot taken after
 * the table is locked (and so after every invalidation sent before).  False
 * when the database has no history tier (still at 1.0's SQL).
 */
static bool
history_list_read(void)
{
	static bool registered = false;
	Oid			relid = dedup_catalog_relation_lookup(DEDUP_REL_HISTORY_GENERATIONS);
	Relation	rel;
	Snapshot	snapshot;
	SysScanDesc scan;
	HeapTuple	tuple;
	int			n = 0;
	int			size = 8;
	HistoryGeneration *list;
	uint64		invalidations;

	if (!OidIsValid(relid))
		return false;

	/*
	 * Invalidations are taken in as a call locks its buckets: the fold that
	 * changed the list committed with the retirement of the bucket it folded,
	 * so a call that still has the old list still reads the bucket.
	 */
	if (history_valid && relid == history_relid)
		return true;
	if (!registered)
	{
		dedup_catalog_relcache_register(history_list_callback);
		registered = true;
	}
	rel = table_open(relid, AccessShareLock);
	if (history_valid && relid == history_relid)
	{
		table_close(rel, AccessShareLock);
		return true;
	}
	history_relid = relid;
	invalidations = history_invalidations;
	snapshot = RegisterSnapshot(IsInParallelMode() ? GetTransactionSnapshot() : GetLatestSnapshot());

	/*
	 * built in the caller's memory: an error while reading leaves the old
	 * list, invalid
	 */
	list = palloc(sizeof(HistoryGeneration) * size);
	scan = systable_beginscan(rel, InvalidOid, false, snapshot, 0, NULL);
	while ((tuple = systable_getnext(scan)) != NULL)
	{
		TupleDesc	desc = RelationGetDescr(rel);
		HistoryGeneration *g;

		if (n == size)
		{
			size *= 2;
			list = repalloc(list, sizeof(HistoryGeneration) * size);
		}
		g = &list[n++];
		history_generation_of(tuple, desc, g);
	}
	systable_endscan(scan);
	UnregisterSnapshot(snapshot);
	table_close(rel, AccessShareLock);
	{
		HistoryGeneration *kept = MemoryContextAlloc(TopMemoryContext,
													 sizeof(HistoryGeneration) * Max(n, 1));

		memcpy(kept, list, sizeof(HistoryGeneration) * n);
		if (history_list != NULL)
			pfree(history_list);
		history_list = kept;
	}
	pfree(list);
	history_count = n;
	/* valid unless an invalidation came while it was read */
	history_valid = (invalidations == history_invalidations);
	return true;
}

/*
 * Whether a generation exists at that version (filter.c frees the memory
 * of those that do not).
 */
bool
dedup_history_generation_is(int64 generation, TimestampTz opened_at, int64 version)
{
	if (dedup_catalog_relation_hashed(DEDUP_REL_CLAIMS))
		return history_cluster_generation_is(generation, opened_at, version);
	if (!history_list_read())
		return false;
	for (int i = 0; i < history_count; i++)
	{
		if (history_list[i].generation == generation)
			return history_list[i].opened_at == opened_at && history_list[i].keys == version;
	}
	return false;
}

/* ---------------------------------------------------------------------
 * Look-ups
 * ---------------------------------------------------------------------
 */

/*
 * Where a history's bits are read: dedup.history_blocks and its primary
 * key, or on a Citus cluster their shards of a key's shard index.
 */
typedef struct HistoryBlocks
{
	Oid			heap;
	Oid			pkey;
	const HistoryGeneration *g;
} HistoryBlocks;

/* Copy a generation's chunks into the zeroed bits of its filter (filter.c). */
static void
history_fill(uint8 *bits, void *arg)
{
	const HistoryBlocks *where = (const HistoryBlocks *) arg;
	const HistoryGeneration *g = where->g;
	Relation	rel = table_open(where->heap, AccessShareLock);
	Snapshot	snapshot = RegisterSnapshot(GetLatestSnapshot());
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tuple;
	Size		total = (Size) g->nblocks * HISTORY_BLOCK_BYTES;

	ScanKeyInit(&key, Anum_blocks_generation, BTEqualStrategyNumber, F_INT8EQ,
				Int64GetDatum(g->generation));
	scan = systable_beginscan(rel, where->pkey, true, snapshot, 1, &key);
	while ((tuple = systable_getnext(scan)) != NULL)
	{
		bool		isnull;
		int32		chunk = DatumGetInt32(heap_getattr(tuple, Anum_blocks_chunk,
													   RelationGetDescr(rel), &isnull));
		bytea	   *b = DatumGetByteaPP(heap_getattr(tuple, Anum_blocks_bits,
													 RelationGetDescr(rel), &isnull));
		Size		offset = (Size) chunk * HISTORY_CHUNK_BYTES;

		CHECK_FOR_INTERRUPTS();
		if (offset < total)
			memcpy(bits + offset, VARDATA_ANY(b), Min(VARSIZE_ANY_EXHDR(b), total - offset));
	}
	systable_endscan(scan);
	UnregisterSnapshot(snapshot);
	table_close(rel, AccessShareLock);
}

/* A key's chunk of a generation, read from the table: whether it may hold the key. */
static bool
history_probe_table(const HistoryBlocks *where, const DedupFingerprint *fp)
{
	const HistoryGeneration *g = where->g;
	uint32		block = dedup_filter_block_of(fp, g->nblocks);
	Relation	rel = table_open(where->heap, AccessShareLock);
	Snapshot	snapshot = RegisterSnapshot(GetLatestSnapshot());
	ScanKeyData key[2];
	SysScanDesc scan;
	HeapTuple	tuple;
	bool		maybe = false;

	ScanKeyInit(&key[0], Anum_blocks_generation, BTEqualStrategyNumber, F_INT8EQ,
				Int64GetDatum(g->generation));
	ScanKeyInit(&key[1], Anum_blocks_chunk, BTEqualStrategyNumber, F_INT4EQ,
				Int32GetDatum(block / HISTORY_CHUNK_BLOCKS));
	scan = systable_beginscan(rel, where->pkey, true, snapshot, 2, key);
	tuple = systable_getnext(scan);
	if (tuple != NULL)
	{
		bool		isnull;
		bytea	   *b = DatumGetByteaPP(heap_getattr(tuple, Anum_blocks_bits,
													 RelationGetDescr(rel), &isnull));
		Size		offset = (Size) (block % HISTORY_CHUNK_BLOCKS) * HISTORY_BLOCK_BYTES;

		if (VARSIZE_ANY_EXHDR(b) >= offset + HISTORY_BLOCK_BYTES)
			maybe = dedup_filter_test((const uint8 *) VARDATA_ANY(b) + offset, fp, g->k,
									  HISTORY_WIDTH);
	}
	systable_endscan(scan);
	UnregisterSnapshot(snapshot);
	table_close(rel, AccessShareLock);
	return maybe;
}

/*
 * Whether a generation may hold a key: from its filter in shared memory,
 * read there first if there is room, else from the key's chunk.
 */
static bool
history_generation_may_contain(HistoryBlocks *where, const DedupFingerprint *fp)
{
	const HistoryGeneration *g = where->g;
	int			answer = dedup_filter_history_test(g->generation, g->opened_at, g->keys, fp);

	if (answer == DEDUP_FILTER_UNKNOWN && !g->no_room)
	{
		bool		no_room;

		if (dedup_filter_history_load(g->generation, g->opened_at, g->keys, g->nblocks,
									  g->k, history_fill, where, &no_room))
			answer = dedup_filter_history_test(g->generation, g->opened_at, g->keys, fp);
		else if (no_room)
		{
			/* not again until the list changes */
			for (int j = 0; j < history_count; j++)
			{
				if (history_list[j].generation == g->generation)
					history_list[j].no_room = true;
			}
		}
	}
	if (answer == DEDUP_FILTER_UNKNOWN)
		answer = history_probe_table(where, fp) ? DEDUP_FILTER_MAYBE : DEDUP_FILTER_ABSENT;
	return answer == DEDUP_FILTER_MAYBE;
}

static bool history_cluster_may_contain(int32 history_id, const DedupFingerprint *fp);

/*
 * Whether a history may hold a key: true when one of its generations says
 * so (a fold of the key, or a false positive), false when none does.
 */
bool
dedup_history_may_contain(int32 history_id, const DedupFingerprint *fp)
{
	HistoryGeneration *mine;
	int			n = 0;
	bool		maybe = false;

	if (history_id == 0)
		return false;
	if (dedup_catalog_relation_hashed(DEDUP_REL_CLAIMS))
		return history_cluster_may_contain(history_id, fp);
	if (!history_list_read())
		return false;
	/* copied: reading a generation may read the list again */
	mine = palloc(sizeof(HistoryGeneration) * Max(history_count, 1));
	for (int i = 0; i < history_count; i++)
	{
		if (history_list[i].history_id == history_id && history_list[i].keys > 0)
			mine[n++] = history_list[i];
	}
	for (int i = 0; i < n && !maybe; i++)
	{
		HistoryBlocks where;

		where.heap = dedup_catalog_relation_oid(DEDUP_REL_HISTORY_BLOCKS);
		where.pkey = dedup_catalog_relation_oid(DEDUP_REL_HISTORY_BLOCKS_PKEY);
		where.g = &mine[i];
		maybe = history_generation_may_contain(&where, fp);
	}
	pfree(mine);
	return maybe;
}

/* ---------------------------------------------------------------------
 * Folds: the cleanup's retire step (bucket.c), with SPI connected, as
 * the owner of the extension's tables
 * ---------------------------------------------------------------------
 */

/*
 * A read of the fold, with a snapshot taken now: the chunks and generations
 * as the last fold left them, whatever snapshot the cleanup's transaction
 * holds (an earlier fold of the same transaction, or one committed since a
 * repeatable read transaction began), so that a fold never writes back a
 * chunk without bits an earlier fold set.  Returns SPI's code.
 */
static int
history_select(const char *sql, int nargs, Oid *types, Datum *values, long tcount)
{
	SPIPlanPtr	plan = SPI_prepare(sql, nargs, types);
	int			rc;

	if (plan == NULL)
		elog(ERROR, "could not prepare: %s", sql);
	rc = SPI_execute_snapshot(plan, values, NULL, GetLatestSnapshot(), InvalidSnapshot,
							  false, false, tcount);
	SPI_freeplan(plan);
	return rc;
}

/* A history, as the fold needs it. */
typedef struct HistoryScope
{
	int32		history_id;
	double		window_secs;
	double		rate;
	TimestampTz cutoff;			/* claims that expired before it are not
								 * folded */
	int64		count;			/* claims of the bucket to fold */
} HistoryScope;

/*
 * Where a fold writes: dedup.history_generations and dedup.history_blocks,
 * or on a Citus cluster their shards of one shard index, whose rows carry
 * the part of that index (a key it holds) and whose generations are
 * numbered by the node that opens them.
 */
typedef struct HistoryPlace
{
	const char *gens;			/* qualified and quoted */
	const char *blocks;
	bool		cluster;
	DedupFingerprint part;
	int32		hash_min;		/* the shard's range of hashes */
	int32		hash_max;
	int64		base;			/* the node's group + 1, in the high bits */
} HistoryPlace;

static const HistoryPlace history_here = {"dedup.history_generations", "dedup.history_blocks", false};

/* Whether a row of a bucket is a claim to fold into h; its fingerprint if so. */
static const DedupFingerprint *
history_row_for(TupleTableSlot *slot, const HistoryScope *h)
{
	bool		isnull;
	Datum		d = slot_getattr(slot, Anum_claims_history, &isnull);

	if (isnull || DatumGetInt32(d) != h->history_id)
		return NULL;
	(void) slot_getattr(slot, Anum_claims_record, &isnull);
	if (!isnull)
		return NULL;
	if (DatumGetTimestampTz(slot_getattr(slot, Anum_key_expires_at, &isnull)) <= h->cutoff)
		return NULL;
	return (const DedupFingerprint *) DatumGetPointer(slot_getattr(slot, Anum_key_key, &isnull));
}

/* Count the claims of a bucket to fold into each history. */
static void
history_count_bucket(Relation bucket, Snapshot snapshot, HistoryScope *scopes, int nscopes)
{
	TableScanDesc scan = table_beginscan(bucket, snapshot, 0, NULL);
	TupleTableSlot *slot = table_slot_create(bucket, NULL);

	while (table_scan_getnextslot(scan, ForwardScanDirection, slot))
	{
		CHECK_FOR_INTERRUPTS();
		for (int i = 0; i < nscopes; i++)
		{
			if (history_row_for(slot, &scopes[i]) != NULL)
			{
				scopes[i].count++;
				break;
			}
		}
	}
	ExecDropSingleTupleTableSlot(slot);
	table_endscan(scan);
}

/*
 * A history's slice that ends at slice_end: the keys folded into it, the
 * sum of its generations' rates, and how many it has.
 */
static void
history_slice(const HistoryPlace *place, int32 history_id, TimestampTz slice_end, int64 *keys,
			  double *rates, int64 *generations)
{
	Oid			types[2] = {INT4OID, TIMESTAMPTZOID};
	Datum		values[2] = {Int32GetDatum(history_id), TimestampTzGetDatum(slice_end)};
	HeapTuple	t;
	TupleDesc	d;
	bool		isnull;
	Datum		v;

	if (history_select(psprintf("SELECT pg_catalog.sum(keys)::bigint, pg_catalog.sum(rate), pg_catalog.count(*)"
								" FROM %s"
								" WHERE history_id OPERATOR(pg_catalog.=) $1"
								" AND slice_end OPERATOR(pg_catalog.=) $2", place->gens),
					   2, types, values, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not read the generations of history %d", history_id);
	t = SPI_tuptable->vals[0];
	d = SPI_tuptable->tupdesc;
	v = SPI_getbinval(t, d, 1, &isnull);
	*keys = isnull ? 0 : DatumGetInt64(v);
	v = SPI_getbinval(t, d, 2, &isnull);
	*rates = isnull ? 0 : DatumGetFloat8(v);
	*generations = DatumGetInt64(SPI_getbinval(t, d, 3, &isnull));
}

/*
 * The generation a fold of h goes into: the open one, or a new one.
 *
 * Rates.  A look-up reads the generations of at most two slices, the open
 * one and the one before it, so a slice's generations must leave the other
 * slice its share of the scope's rate h->rate.  A slice's first generation
 * is given h->rate / 2, or less when the slice before it still kept took
 * more than half (h->rate less its generations' rates: it grew); it is
 * sized for the keys that slice took, or for a history's first slice the
 * keys of the fold (a burst of a backlog must not be taken for the rate of
 * a whole window).  A fold that would overfill the open generation opens
 * another in the same slice, twice the keys, at a quarter of the slice's
 * first rate and then half the last: a slice's rates add up to at most 1.5
 * times its first, 3/4 of the scope's rate.  So while both slices live,
 * their rates add up to at most the scope's rate when each slice took as
 * many keys as the one before it, or the first slice grew from its first
 * fold; at most 1.25 times it after a rise over the slice before.
 */
static void
history_open_generation(const HistoryPlace *place, const HistoryScope *h, HistoryGeneration *g)
{
	Oid			types[1] = {INT4OID};
	Datum		values[1] = {Int32GetDatum(h->history_id)};
	TimestampTz now = GetCurrentTimestamp();
	bool		found = false;
	bool		any = false;
	double		rate;
	int64		capacity;
	TimestampTz slice_end;
	double		bits_per_key;
	bool		isnull;

	if (history_select(psprintf("SELECT generation, slice_end, rate, k, nblocks, capacity, keys"
								" FROM %s"
								" WHERE history_id OPERATOR(pg_catalog.=) $1"
								" ORDER BY generation DESC LIMIT 1", place->gens),
					   1, types, values, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not read the generations of history %d", h->history_id);
	if (SPI_processed == 1)
	{
		HeapTuple	t = SPI_tuptable->vals[0];
		TupleDesc	d = SPI_tuptable->tupdesc;

		g->generation = DatumGetInt64(SPI_getbinval(t, d, 1, &isnull));
		g->slice_end = DatumGetTimestampTz(SPI_getbinval(t, d, 2, &isnull));
		g->rate = DatumGetFloat8(SPI_getbinval(t, d, 3, &isnull));
		g->k = DatumGetInt32(SPI_getbinval(t, d, 4, &isnull));
		g->nblocks = (uint32) DatumGetInt32(SPI_getbinval(t, d, 5, &isnull));
		g->capacity = DatumGetInt64(SPI_getbinval(t, d, 6, &isnull));
		g->keys = DatumGetInt64(SPI_getbinval(t, d, 7, &isnull));
		any = true;
		found = g->slice_end > now;
	}
	if (found && g->keys + h->count <= g->capacity)
		return;					/* the open generation takes the fold */

	if (found)
	{
		/*
		 * full before its slice ends: twice the keys, a quarter then half the
		 * rate
		 */
		int64		keys;
		double		rates;
		int64		generations;

		history_slice(place, h->history_id, g->slice_end, &keys, &rates, &generations);
		rate = generations <= 1 ? g->rate / 4 : g->rate / 2;
		capacity = Max(h->count, g->capacity * 2);
		slice_end = g->slice_end;
	}
	else
	{
		/*
		 * A new slice: as many keys as the last slice took, if there was one,
		 * and what its rates leave of the scope's while it is kept; else the
		 * fold's keys
		 */
		int64		last_keys = 0;
		double		last_rates = 0;
		int64		generations = 0;

		if (any)
			history_slice(place, h->history_id, g->slice_end, &last_keys, &last_rates, &generations);
		if (any && g->slice_end + (TimestampTz) (h->window_secs * USECS_PER_SEC) <= now)
			last_rates = 0;		/* gone before this slice takes a fold */

		/*
		 * (at least a quarter, should the scope's rate have been lowered
		 * since)
		 */
		rate = Max(h->rate / 4, Min(h->rate / 2, h->rate - last_rates));
		capacity = last_keys > 0 ? last_keys : h->count;
		slice_end = now + (TimestampTz) (h->window_secs * USECS_PER_SEC);
	}
	capacity = Min(Max(capacity, Max(h->count, HISTORY_MIN_CAPACITY)), HISTORY_MAX_CAPACITY);
	history_geometry(rate, &bits_per_key, &g->k);
	g->nblocks = (uint32) Max(1, ceil(capacity * bits_per_key / HISTORY_BLOCK_BITS));
	g->rate = rate;
	g->capacity = capacity;
	g->slice_end = slice_end;
	g->keys = 0;
	if (place->cluster)
	{
		Oid			itypes[11] = {INT4OID, TIMESTAMPTZOID, TIMESTAMPTZOID, FLOAT8OID, INT4OID,
		INT4OID, INT8OID, INT8OID, dedup_catalog_fingerprint_type(), INT4OID, INT4OID};
		Datum		ivalues[11];

		/*
		 * numbered by this node: its group in the high bits, its sequence
		 * below
		 */
		ivalues[0] = Int32GetDatum(h->history_id);
		ivalues[1] = TimestampTzGetDatum(now);
		ivalues[2] = TimestampTzGetDatum(slice_end);
		ivalues[3] = Float8GetDatum(rate);
		ivalues[4] = Int32GetDatum(g->k);
		ivalues[5] = Int32GetDatum((int32) g->nblocks);
		ivalues[6] = Int64GetDatum(capacity);
		ivalues[7] = Int64GetDatum(place->base);
		ivalues[8] = PointerGetDatum(&place->part);
		ivalues[9] = Int32GetDatum(place->hash_min);
		ivalues[10] = Int32GetDatum(place->hash_max);
		if (SPI_execute_with_args(psprintf("INSERT INTO %s"
										   " (generation, history_id, opened_at, slice_end, rate, k, nblocks, capacity, part,"
										   "  hash_min, hash_max)"
										   " VALUES ($8 OPERATOR(pg_catalog.+)"
										   "  pg_catalog.nextval('dedup.history_generations_seq'),"
										   "  $1, $2, $3, $4, $5, $6, $7, $9, $10, $11) RETURNING generation", place->gens),
								  11, itypes, ivalues, NULL, false, 0) != SPI_OK_INSERT_RETURNING)
			elog(ERROR, "could not open a generation of history %d", h->history_id);
		g->generation = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0],
													SPI_tuptable->tupdesc, 1, &isnull));
	}
	else
	{
		Oid			itypes[7] = {INT4OID, TIMESTAMPTZOID, TIMESTAMPTZOID, FLOAT8OID, INT4OID,
		INT4OID, INT8OID};
		Datum		ivalues[7];

		ivalues[0] = Int32GetDatum(h->history_id);
		ivalues[1] = TimestampTzGetDatum(now);
		ivalues[2] = TimestampTzGetDatum(slice_end);
		ivalues[3] = Float8GetDatum(rate);
		ivalues[4] = Int32GetDatum(g->k);
		ivalues[5] = Int32GetDatum((int32) g->nblocks);
		ivalues[6] = Int64GetDatum(capacity);
		if (SPI_execute_with_args("INSERT INTO dedup.history_generations"
								  " (history_id, opened_at, slice_end, rate, k, nblocks, capacity)"
								  " VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING generation",
								  7, itypes, ivalues, NULL, false, 0) != SPI_OK_INSERT_RETURNING)
			elog(ERROR, "could not open a generation of history %d", h->history_id);
		g->generation = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0],
													SPI_tuptable->tupdesc, 1, &isnull));
	}
}

/*
 * Fold the claims of a bucket into generation g of history h: in passes
 * over ranges of its chunks that fit in maintenance_work_mem, each reading
 * the range's chunks, setting the bits of the bucket's keys that fall in
 * it, and writing back the chunks it changed.
 */
static void
history_fold_into(const HistoryPlace *place, Relation bucket, Snapshot snapshot,
				  const HistoryScope *h, HistoryGeneration *g)
{
	int64		nchunks = ((int64) g->nblocks + HISTORY_CHUNK_BLOCKS - 1) / HISTORY_CHUNK_BLOCKS;
	int64		per_pass = Max(1, (int64) maintenance_work_mem * 1024 / HISTORY_CHUNK_BYTES);
	Oid			rtypes[3] = {INT8OID, INT4OID, INT4OID};
	Oid			wtypes[4] = {INT8OID, INT4OID, BYTEAOID, dedup_catalog_fingerprint_type()};
	SPIPlanPtr	write;

	if (place->cluster)
		write = SPI_prepare(psprintf("INSERT INTO %s AS b (generation, chunk, bits, part)"
									 " VALUES ($1, $2, $3, $4) ON CONFLICT (generation, chunk, part)"
									 " DO UPDATE SET bits = excluded.bits", place->blocks), 4, wtypes);
	else
		write = SPI_prepare("INSERT INTO dedup.history_blocks AS b (generation, chunk, bits)"
							" VALUES ($1, $2, $3) ON CONFLICT (generation, chunk)"
							" DO UPDATE SET bits = excluded.bits", 3, wtypes);
	if (write == NULL)
		elog(ERROR, "could not prepare the write of a history chunk");

	for (int64 first = 0; first < nchunks; first += per_pass)
	{
		int64		last = Min(nchunks, first + per_pass);
		int64		n = last - first;
		uint8	   *bits = palloc_extended((Size) n * HISTORY_CHUNK_BYTES, MCXT_ALLOC_HUGE | MCXT_ALLOC_ZERO);
		bool	   *dirty = palloc0(sizeof(bool) * n);
		Datum		rvalues[3];
		TableScanDesc scan;
		TupleTableSlot *slot;

		/* the range's chunks as they are */
		rvalues[0] = Int64GetDatum(g->generation);
		rvalues[1] = Int32GetDatum((int32) first);
		rvalues[2] = Int32GetDatum((int32) last);
		if (history_select(psprintf("SELECT chunk, bits FROM %s"
									" WHERE generation OPERATOR(pg_catalog.=) $1"
									" AND chunk OPERATOR(pg_catalog.>=) $2"
									" AND chunk OPERATOR(pg_catalog.<) $3", place->blocks),
						   3, rtypes, rvalues, 0) != SPI_OK_SELECT)
			elog(ERROR, "could not read generation " INT64_FORMAT, g->generation);
		for (uint64 r = 0; r < SPI_processed; r++)
		{
			bool		isnull;
			int32		chunk = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[r],
															SPI_tuptable->tupdesc, 1, &isnull));
			bytea	   *b = DatumGetByteaPP(SPI_getbinval(SPI_tuptable->vals[r],
														  SPI_tuptable->tupdesc, 2, &isnull));

			memcpy(bits + (Size) (chunk - first) * HISTORY_CHUNK_BYTES, VARDATA_ANY(b),
				   Min(VARSIZE_ANY_EXHDR(b), HISTORY_CHUNK_BYTES));
		}
		SPI_freetuptable(SPI_tuptable);

		/* the bucket's keys that fall in the range */
		scan = table_beginscan(bucket, snapshot, 0, NULL);
		slot = table_slot_create(bucket, NULL);
		while (table_scan_getnextslot(scan, ForwardScanDirection, slot))
		{
			const DedupFingerprint *fp = history_row_for(slot, h);
			uint32		block;
			int64		chunk;

			CHECK_FOR_INTERRUPTS();
			if (fp == NULL)
				continue;
			block = dedup_filter_block_of(fp, g->nblocks);
			chunk = block / HISTORY_CHUNK_BLOCKS;
			if (chunk < first || chunk >= last)
				continue;
			dedup_filter_set(bits + (Size) (chunk - first) * HISTORY_CHUNK_BYTES +
							 (Size) (block % HISTORY_CHUNK_BLOCKS) * HISTORY_BLOCK_BYTES,
							 fp, g->k, HISTORY_WIDTH);
			dirty[chunk - first] = true;
		}
		ExecDropSingleTupleTableSlot(slot);
		table_endscan(scan);

		/* the chunks it changed; the last one is as long as its blocks */
		for (int64 c = 0; c < n; c++)
		{
			int64		blocks = Min((int64) HISTORY_CHUNK_BLOCKS,
									 (int64) g->nblocks - (first + c) * HISTORY_CHUNK_BLOCKS);
			Size		len = (Size) blocks * HISTORY_BLOCK_BYTES;
			bytea	   *b;
			Datum		wvalues[4];

			if (!dirty[c])
				continue;
			b = palloc(VARHDRSZ + len);
			SET_VARSIZE(b, VARHDRSZ + len);
			memcpy(VARDATA(b), bits + (Size) c * HISTORY_CHUNK_BYTES, len);
			wvalues[0] = Int64GetDatum(g->generation);
			wvalues[1] = Int32GetDatum((int32) (first + c));
			wvalues[2] = PointerGetDatum(b);
			wvalues[3] = PointerGetDatum(&place->part);
			if (SPI_execute_plan(write, wvalues, NULL, false, 0) != SPI_OK_INSERT)
				elog(ERROR, "could not write a chunk of generation " INT64_FORMAT, g->generation);
			pfree(b);
		}
		pfree(bits);
		pfree(dirty);
	}
	SPI_freeplan(write);

	{
		Oid			types[2] = {INT8OID, INT8OID};
		Datum		values[2] = {Int64GetDatum(g->generation), Int64GetDatum(h->count)};

		if (SPI_execute_with_args(psprintf("UPDATE %s"
										   " SET keys = keys OPERATOR(pg_catalog.+) $2"
										   " WHERE generation OPERATOR(pg_catalog.=) $1", place->gens),
								  2, types, values, NULL, false, 0) != SPI_OK_UPDATE)
			elog(ERROR, "could not count the keys of generation " INT64_FORMAT, g->generation);
	}
}

/* The scopes that have a history, as the fold needs them; how many. */
static int
history_scopes(HistoryScope **result)
{
	HistoryScope *scopes;
	int			nscopes;

	if (history_select("SELECT history_id, pg_catalog.date_part('epoch', history),"
					   " false_positive_rate, pg_catalog.now() OPERATOR(pg_catalog.-) history"
					   " FROM dedup.scopes WHERE history_id IS NOT NULL AND history IS NOT NULL",
					   0, NULL, NULL, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read the histories of dedup.scopes");
	nscopes = (int) SPI_processed;
	scopes = palloc0(sizeof(HistoryScope) * Max(nscopes, 1));
	for (int i = 0; i < nscopes; i++)
	{
		HeapTuple	t = SPI_tuptable->vals[i];
		TupleDesc	d = SPI_tuptable->tupdesc;
		bool		isnull;

		scopes[i].history_id = DatumGetInt32(SPI_getbinval(t, d, 1, &isnull));
		scopes[i].window_secs = DatumGetFloat8(SPI_getbinval(t, d, 2, &isnull));
		scopes[i].rate = DatumGetFloat8(SPI_getbinval(t, d, 3, &isnull));
		scopes[i].cutoff = DatumGetTimestampTz(SPI_getbinval(t, d, 4, &isnull));
	}
	SPI_freetuptable(SPI_tuptable);
	*result = scopes;
	return nscopes;
}

/*
 * Fold the claims of bucket (a bucket's table, or a shard of it) into the
 * histories of their scopes kept at place, with a snapshot taken now:
 * each scope's keys counted, then written into a generation opened for
 * them.  Returns the keys folded.
 */
static int64
history_fold_bucket(const HistoryPlace *place, Relation bucket, HistoryScope *scopes, int nscopes)
{
	Snapshot	snapshot = RegisterSnapshot(GetLatestSnapshot());
	int64		folded = 0;

	history_count_bucket(bucket, snapshot, scopes, nscopes);
	for (int i = 0; i < nscopes; i++)
	{
		HistoryGeneration g;

		if (scopes[i].count == 0)
			continue;
		history_open_generation(place, &scopes[i], &g);
		history_fold_into(place, bucket, snapshot, &scopes[i], &g);
		folded += scopes[i].count;
	}
	UnregisterSnapshot(snapshot);
	return folded;
}

/*
 * Fold the claims of a bucket about to be retired into the histories of
 * their scopes; returns the keys folded.  Claims of a scope that has no
 * history any more, and those that expired a window ago or more, are left.
 */
int64
dedup_history_fold(Oid bucket_relid)
{
	Oid			gens = dedup_catalog_relation_lookup(DEDUP_REL_HISTORY_GENERATIONS);
	Relation	bucket;
	HistoryScope *scopes;
	int			nscopes;
	int64		folded = 0;

	if (!OidIsValid(gens))
		return 0;
	nscopes = history_scopes(&scopes);
	if (nscopes == 0)
		return 0;

	bucket = table_open(bucket_relid, AccessShareLock);
	if (RelationGetDescr(bucket)->natts < Anum_claims_history)
	{
		table_close(bucket, AccessShareLock);
		return 0;
	}
	folded = history_fold_bucket(&history_here, bucket, scopes, nscopes);
	table_close(bucket, AccessShareLock);
	if (folded > 0)
		CacheInvalidateRelcacheByRelid(gens);
	return folded;
}

/*
 * Delete the generations whose slice ended a window ago, and those of
 * scopes that have no history any more: each whole, its row and its
 * chunks.  Returns how many went.
 */
int64
dedup_history_expire(void)
{
	Oid			gens = dedup_catalog_relation_lookup(DEDUP_REL_HISTORY_GENERATIONS);
	uint64		n;
	int64	   *gone;
	Oid			types[1] = {INT8OID};

	if (!OidIsValid(gens))
		return 0;
	if (SPI_execute("DELETE FROM dedup.history_generations AS g"
					" WHERE NOT EXISTS (SELECT FROM dedup.scopes AS s"
					"  WHERE s.history_id OPERATOR(pg_catalog.=) g.history_id"
					"  AND s.history IS NOT NULL"
					"  AND g.slice_end OPERATOR(pg_catalog.+) s.history"
					"      OPERATOR(pg_catalog.>) pg_catalog.now())"
					" RETURNING g.generation", false, 0) != SPI_OK_DELETE_RETURNING)
		elog(ERROR, "could not delete the generations of histories that passed");
	n = SPI_processed;
	if (n == 0)
		return 0;
	gone = palloc(sizeof(int64) * n);
	for (uint64 i = 0; i < n; i++)
	{
		bool		isnull;

		gone[i] = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc,
											  1, &isnull));
	}
	SPI_freetuptable(SPI_tuptable);
	for (uint64 i = 0; i < n; i++)
	{
		Datum		values[1] = {Int64GetDatum(gone[i])};

		if (SPI_execute_with_args("DELETE FROM dedup.history_blocks"
								  " WHERE generation OPERATOR(pg_catalog.=) $1",
								  1, types, values, NULL, false, 0) != SPI_OK_DELETE)
			elog(ERROR, "could not delete generation " INT64_FORMAT, gone[i]);
		dedup_filter_history_free(gone[i]);
	}
	CacheInvalidateRelcacheByRelid(gens);
	return (int64) n;
}

/* ---------------------------------------------------------------------
 * On a Citus cluster
 *
 * dedup_distribute() distributes dedup.history_generations and
 * dedup.history_blocks by a column part, co-located with dedup.claims, and
 * makes dedup.history_folds: each shard of dedup.claims keeps the filters of
 * its own keys in its shards of these tables, of the same shard index, on
 * the same node (their rows carry the part of that index, the key of its
 * outbox partition, which hashes into it).  So a look-up reads only the
 * key's shards, on the key's node, under the lock a call holds on the
 * shard's metadata, and a shard move carries the filters with the claims.
 * The fold of a sealed bucket runs on each node, over its shards of the
 * bucket, each shard once (a row of dedup.history_folds, in that shard too,
 * written in the fold's transaction); the coordinator retires the bucket
 * (no node reads it any more) only once every shard's fold committed,
 * wherever the shard is by then (dedup.bucket_cluster_step).  A shard moved
 * before its fold is folded where it arrives; one moved after carries its
 * filter and its row of dedup.history_folds.
 *
 * A split does not: Citus sends every row of the parent's generations to the
 * one child whose range holds their part, and a Bloom filter cannot be split
 * by key.  So each generation records the range of hashes it may hold (its
 * shard's when it opened: hash_min, hash_max), and the coordinator's cleanup,
 * before it folds (dedup.history_cluster_repair, its seal step), copies a
 * generation whose range passes its shard's into every other shard its range
 * overlaps, under that shard's part, and narrows each copy to its shard's
 * range.  Until that pass, the children must not answer new for a key the
 * parent folded: dedup.history_spans, a reference table (on every node),
 * lists the shards whose histories are whole for their range, written by
 * the same pass before any fold into them; a look-up in a shard that a span
 * of another shard overlaps (a split not yet repaired) fails with 55000, and
 * a fold skips a shard that has no span of its own, or such a span over it.
 * ---------------------------------------------------------------------
 */

/*
 * Whether a shard of dedup.claims has its histories whole for its range: no
 * span of another shard overlaps it, and, when own, it has a span of its own.
 */
static bool
history_shard_whole(int64 shardid, int32 min, int32 max, bool own)
{
	Oid			relid = dedup_catalog_relation_lookup(DEDUP_REL_HISTORY_SPANS);
	Relation	rel;
	Snapshot	snapshot;
	SysScanDesc scan;
	HeapTuple	tuple;
	bool		found = false;
	bool		other = false;

	if (!OidIsValid(relid))
		return !own;
	rel = table_open(relid, AccessShareLock);
	snapshot = RegisterSnapshot(GetLatestSnapshot());
	scan = systable_beginscan(rel, InvalidOid, false, snapshot, 0, NULL);
	while ((tuple = systable_getnext(scan)) != NULL && !other)
	{
		TupleDesc	desc = RelationGetDescr(rel);
		bool		isnull;
		int64		id = DatumGetInt64(heap_getattr(tuple, Anum_spans_shardid, desc, &isnull));
		int32		lo = DatumGetInt32(heap_getattr(tuple, Anum_spans_hash_min, desc, &isnull));
		int32		hi = DatumGetInt32(heap_getattr(tuple, Anum_spans_hash_max, desc, &isnull));

		if (id == shardid)
			found = true;
		else if (lo <= max && hi >= min)
			other = true;
	}
	systable_endscan(scan);
	UnregisterSnapshot(snapshot);
	table_close(rel, AccessShareLock);
	return !other && (found || !own);
}

/* A shard of one of the histories' tables here, of a key's shard index. */
static void
history_shard_of(DedupRelation table, const char *relname, const DedupFingerprint *fp,
				 Oid *heap, Oid *index)
{
	if (!dedup_shards_bucket_shard(dedup_catalog_relation_lookup(table), relname, fp, heap, index))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("the key's shard of \"%s.%s\" is not on this node", DEDUP_INTERNAL_SCHEMA, relname),
				 errdetail("The histories' tables are distributed by part, co-located with dedup.claims, by dedup_distribute()."),
				 errhint("Run the call again; if this goes on, check that dedup.%s is co-located with dedup.claims.", relname)));
}

/* Whether a cluster's history may hold a key, from the key's shards here. */
static bool
history_cluster_may_contain(int32 history_id, const DedupFingerprint *fp)
{
	Oid			gheap;
	Oid			gindex;
	HistoryBlocks where;
	HistoryGeneration *mine;
	int			n;
	bool		maybe = false;
	int64		shardid;
	int32		min;
	int32		max;

	dedup_shards_range(DEDUP_REL_CLAIMS, fp, &shardid, &min, &max);
	if (!history_shard_whole(shardid, min, max, false))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("the history of the key's shard is not whole: the shard was split, and its filters not yet copied"),
				 errdetail("Shard " INT64_FORMAT " of \"%s.claims\" comes from a split of a shard whose histories' filters the coordinator's cleanup has not yet copied to it: a key folded before the split cannot be told from a new one there.",
						   shardid, DEDUP_INTERNAL_SCHEMA),
				 errhint("Retry after the coordinator's next cleanup pass (CALL dedup_cleanup() on the coordinator runs one).")));
	history_shard_of(DEDUP_REL_HISTORY_GENERATIONS, "history_generations", fp, &gheap, &gindex);
	history_shard_of(DEDUP_REL_HISTORY_BLOCKS, "history_blocks", fp, &where.heap, &where.pkey);
	n = history_shard_generations(gheap, history_id, &mine);
	for (int i = 0; i < n && !maybe; i++)
	{
		where.g = &mine[i];
		maybe = history_generation_may_contain(&where, fp);
	}
	pfree(mine);
	return maybe;
}

/* Whether a generation is still, at that version, in a shard here. */
static bool
history_cluster_generation_is(int64 generation, TimestampTz opened_at, int64 version)
{
	DedupFingerprint *parts;
	bool	   *local;
	int			nparts = dedup_shards_partitions(&parts, &local);
	bool		found = false;

	for (int i = 0; i < nparts && !found; i++)
	{
		Oid			heap;
		Oid			index;
		HistoryGeneration *list;
		int			n;

		if (!local[i] ||
			!dedup_shards_bucket_shard(dedup_catalog_relation_lookup(DEDUP_REL_HISTORY_GENERATIONS),
									   "history_generations", &parts[i], &heap, &index))
			continue;
		n = history_shard_generations(heap, 0, &list);
		for (int j = 0; j < n; j++)
			if (list[j].generation == generation)
				found = list[j].opened_at == opened_at && list[j].keys == version;
		pfree(list);
	}
	return found;
}

/* The qualified name of a relation of schema dedup, for SPI */
static const char *
history_shard_name(Oid relid)
{
	return quote_qualified_identifier(DEDUP_INTERNAL_SCHEMA, get_rel_name(relid));
}

/*
 * dedup.history_fold_node(bucket): fold this node's shards of a sealed
 * bucket (its claims of scopes with a history) into the histories' shards of
 * the same index, each shard once (dedup.history_folds); returns the keys
 * folded.  The coordinator's cleanup calls it on every node, and retires
 * the bucket once every shard of it was folded (bucket_cluster_step).  Each
 * shard's fold holds Citus's lock on the shard's metadata, so that a move
 * of the shard waits for it, and carries what it wrote.
 */
PG_FUNCTION_INFO_V1(dedup_history_fold_node);
Datum
dedup_history_fold_node(PG_FUNCTION_ARGS)
{
	int32		number = PG_GETARG_INT32(0);
	const char *relname = number == 0 ? "claims" : psprintf("claims_%d", number);
	Oid			nsp = get_namespace_oid(DEDUP_INTERNAL_SCHEMA, false);
	Oid			shell = get_relname_relid(relname, nsp);
	Oid			folds = get_relname_relid("history_folds", nsp);
	DedupFingerprint *parts;
	bool	   *local;
	int			nparts;
	HistoryScope *scopes;
	int			nscopes;
	int64		folded = 0;
	int64		base;
	int			save_nestlevel;
	bool		isnull;

	if (!dedup_catalog_relation_hashed(DEDUP_REL_CLAIMS) || !OidIsValid(folds))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("the histories are not distributed on this node"),
				 errhint("dedup.history_fold_node() is the cluster's cleanup's: run SELECT dedup_distribute() on the coordinator.")));
	if (!OidIsValid(shell))
		PG_RETURN_INT64(0);		/* dropped: nothing left to fold */
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	/* the shards are written here as tables of this node's own */
	save_nestlevel = NewGUCNestLevel();
	(void) set_config_option("citus.enable_manual_changes_to_shards", "on", PGC_USERSET,
							 PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
	if (SPI_execute("SELECT groupid FROM pg_catalog.pg_dist_local_group", true, 1) != SPI_OK_SELECT ||
		SPI_processed != 1)
		elog(ERROR, "could not read this node's group");
	base = (DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull)) + (int64) 1) << 48;
	nscopes = history_scopes(&scopes);
	nparts = dedup_shards_partitions(&parts, &local);
	for (int i = 0; i < nparts; i++)
	{
		Oid			bheap;
		Oid			bindex;
		Oid			gheap;
		Oid			gindex;
		Oid			blheap;
		Oid			blindex;
		Oid			fheap;
		Oid			findex;
		HistoryPlace place;
		Relation	bucket;
		int64		keys = 0;
		Oid			types[3] = {INT4OID, dedup_catalog_fingerprint_type(), INT8OID};
		Datum		values[3];
		int64		shardid;

		if (!local[i])
			continue;

		/*
		 * the shard's metadata, until this transaction ends (40001 if it
		 * moved)
		 */
		dedup_shards_lock_key(DEDUP_REL_CLAIMS, &parts[i]);
		dedup_shards_range(DEDUP_REL_CLAIMS, &parts[i], &shardid, &place.hash_min, &place.hash_max);

		/*
		 * not into a shard whose span the coordinator did not write yet, or a
		 * split of it did not repair: a later pass, the bucket read until
		 */
		if (!history_shard_whole(shardid, place.hash_min, place.hash_max, true))
			continue;
		history_shard_of(DEDUP_REL_HISTORY_GENERATIONS, "history_generations", &parts[i], &gheap, &gindex);
		history_shard_of(DEDUP_REL_HISTORY_BLOCKS, "history_blocks", &parts[i], &blheap, &blindex);
		if (!dedup_shards_bucket_shard(folds, "history_folds", &parts[i], &fheap, &findex) ||
			!dedup_shards_bucket_shard(shell, relname, &parts[i], &bheap, &bindex))
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_TABLE),
					 errmsg("a shard of bucket %d or of \"%s.history_folds\" is not on this node",
							number, DEDUP_INTERNAL_SCHEMA),
					 errdetail("Citus's metadata places the shard of part %d of dedup.claims here.", i)));
		values[0] = Int32GetDatum(number);
		values[1] = PointerGetDatum(&parts[i]);
		if (history_select(psprintf("SELECT FROM %s WHERE bucket OPERATOR(pg_catalog.=) $1",
									history_shard_name(fheap)),
						   1, types, values, 1) != SPI_OK_SELECT)
			elog(ERROR, "could not read the folds of bucket %d", number);
		if (SPI_processed > 0)
			continue;			/* folded before, here or on another node */

		place.gens = history_shard_name(gheap);
		place.blocks = history_shard_name(blheap);
		place.cluster = true;
		place.part = parts[i];
		place.base = base;
		bucket = table_open(bheap, AccessShareLock);
		for (int j = 0; j < nscopes; j++)
			scopes[j].count = 0;
		keys += history_fold_bucket(&place, bucket, scopes, nscopes);
		table_close(bucket, AccessShareLock);
		values[2] = Int64GetDatum(keys);
		if (SPI_execute_with_args(psprintf("INSERT INTO %s (bucket, part, keys) VALUES ($1, $2, $3)",
										   history_shard_name(fheap)),
								  3, types, values, NULL, false, 0) != SPI_OK_INSERT)
			elog(ERROR, "could not note the fold of bucket %d", number);
		folded += keys;
	}
	AtEOXact_GUC(true, save_nestlevel);
	SPI_finish();
	PG_RETURN_INT64(folded);
}

/* ---------------------------------------------------------------------
 * SQL functions
 * ---------------------------------------------------------------------
 */

/*
 * dedup_seen(scope text, key <text|bytea|uuid|dedup_fingerprint|bigint>): why a
 * claim of the key would be answered as it would now, without claiming:
 * 'exact' (a live claim), 'history' (an expired claim within the history
 * window, or a generation that may hold the key), or 'absent'.  A claim
 * written by a transaction still in progress is not seen.
 */
static Datum
history_seen(FunctionCallInfo fcinfo, int16 typlen)
{
	DedupScopeSettings settings;
	text	   *scope;
	Datum		route_result;
	DedupFingerprint fp;
	KeyStore	ks;
	KeyRow		row;
	const char *answer = "absent";

	if (dedup_routing_route(fcinfo, DEDUP_REL_CLAIMS, DEDUP_ROUTE_KEY, typlen, &route_result))
		return route_result;
	scope = dedup_scope_of_call(fcinfo, "scope", NULL, DEDUP_PRIV_USAGE, &settings);

	dedup_fingerprint_key_arg(fcinfo, 1, scope, typlen, &fp);
	key_store_open(&ks, DEDUP_REL_CLAIMS, scope, &fp, false);
	key_store_use_history(&ks, &settings);
	if (key_store_read(&ks, &fp, &row) == KEY_LIVE)
		answer = "exact";
	else if (key_store_history_seen(&ks, &fp, &row))
		answer = "history";
	key_store_close(&ks);
	PG_RETURN_TEXT_P(cstring_to_text(answer));
}

PG_FUNCTION_INFO_V1(dedup_seen_varlena);
Datum
dedup_seen_varlena(PG_FUNCTION_ARGS)
{
	return history_seen(fcinfo, -1);
}

PG_FUNCTION_INFO_V1(dedup_seen_fixed);
Datum
dedup_seen_fixed(PG_FUNCTION_ARGS)
{
	return history_seen(fcinfo, DEDUP_FINGERPRINT_LEN);
}

PG_FUNCTION_INFO_V1(dedup_seen_int8);
Datum
dedup_seen_int8(PG_FUNCTION_ARGS)
{
	return history_seen(fcinfo, sizeof(int64));
}

/*
 * dedup_history on a Citus cluster: the generations of every shard, read
 * through Citus from any node, as the owner of the histories' tables.
 */
static void
history_cluster_list(ReturnSetInfo *rsinfo, const DedupScopeSettings *settings)
{
	Oid			owner = dedup_catalog_relation_owner(DEDUP_REL_HISTORY_GENERATIONS);
	Oid			save_userid;
	int			save_sec_context;
	int			save_nestlevel;
	Oid			types[2] = {INT4OID, INT8OID};
	Datum		args[2] = {Int32GetDatum(settings->history_id), Int64GetDatum(HISTORY_BLOCK_BYTES)};

	GetUserIdAndSecContext(&save_userid, &save_sec_context);
	SetUserIdAndSecContext(owner, save_sec_context | SECURITY_LOCAL_USERID_CHANGE);
	save_nestlevel = NewGUCNestLevel();
	(void) set_config_option("search_path", "pg_catalog, pg_temp", PGC_USERSET,
							 PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (SPI_execute_with_args("SELECT generation, opened_at, slice_end, rate, k, capacity, keys,"
							  " nblocks::bigint OPERATOR(pg_catalog.*) $2"
							  " FROM dedup.history_generations WHERE history_id OPERATOR(pg_catalog.=) $1"
							  " ORDER BY generation",
							  2, types, args, NULL, true, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read the generations of history %d", settings->history_id);
	for (uint64 r = 0; r < SPI_processed; r++)
	{
		HeapTuple	t = SPI_tuptable->vals[r];
		TupleDesc	d = SPI_tuptable->tupdesc;
		Datum		values[9];
		bool		nulls[9] = {false};
		bool		isnull;

		values[0] = SPI_getbinval(t, d, 1, &isnull);
		values[1] = SPI_getbinval(t, d, 2, &isnull);
		values[2] = SPI_getbinval(t, d, 3, &isnull);
		values[3] = TimestampTzGetDatum(dedup_check_timestamp_plus(DatumGetTimestampTz(values[2]),
																   &settings->history));
		values[4] = SPI_getbinval(t, d, 4, &isnull);
		values[5] = SPI_getbinval(t, d, 5, &isnull);
		values[6] = SPI_getbinval(t, d, 6, &isnull);
		values[7] = SPI_getbinval(t, d, 7, &isnull);
		values[8] = SPI_getbinval(t, d, 8, &isnull);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	SPI_finish();
	AtEOXact_GUC(true, save_nestlevel);
	SetUserIdAndSecContext(save_userid, save_sec_context);
}

/* dedup_history(scope text): the generations of a scope's history. */
PG_FUNCTION_INFO_V1(dedup_history);
Datum
dedup_history(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	DedupScopeSettings settings;

	(void) dedup_scope_of_call(fcinfo, "scope", NULL, DEDUP_PRIV_USAGE, &settings);
	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
	if (settings.history_id != 0 && dedup_catalog_relation_hashed(DEDUP_REL_CLAIMS))
	{
		history_cluster_list(rsinfo, &settings);
		return (Datum) 0;
	}
	if (settings.history_id == 0 || !history_list_read())
		return (Datum) 0;
	for (int i = 0; i < history_count; i++)
	{
		const HistoryGeneration *g = &history_list[i];
		Datum		values[9];
		bool		nulls[9] = {false};

		if (g->history_id != settings.history_id)
			continue;
		values[0] = Int64GetDatum(g->generation);
		values[1] = TimestampTzGetDatum(g->opened_at);
		values[2] = TimestampTzGetDatum(g->slice_end);
		values[3] = TimestampTzGetDatum(dedup_check_timestamp_plus(g->slice_end, &settings.history));
		values[4] = Float8GetDatum(g->rate);
		values[5] = Int32GetDatum(g->k);
		values[6] = Int64GetDatum(g->capacity);
		values[7] = Int64GetDatum(g->keys);
		values[8] = Int64GetDatum((int64) g->nblocks * HISTORY_BLOCK_BYTES);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}
