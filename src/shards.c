/*-------------------------------------------------------------------------
 *
 * shards.c
 *	  dedup on a Citus cluster: which shard, on which node, holds a key.
 *
 * dedup_distribute() (sql/functions/cluster.sql) distributes dedup.claims
 * and dedup.streams by their key, the fingerprint of (scope, key), into
 * co-located shards, and makes dedup.scopes and dedup.grants reference
 * tables.  Citus finds a key's shard by the fingerprint's hash
 * (dedup_fingerprint_hash, the type's hash operator class) within the
 * shards' ranges in pg_dist_shard; this file does the same, from a copy of
 * those ranges and of which of them have their placement on this node
 * (read from Citus's metadata by citus.c), kept per backend and dropped
 * at any invalidation of the shell table (Citus sends one whenever a shard
 * or placement of it changes): the shell is one of the relations catalog.c
 * looks up, and the maps are read again whenever catalog.c forgot them
 * (dedup_catalog_relation_generation).  An invalidation of a shard a map holds
 * makes catalog.c forget its relations too (shard_relcache_callback).
 *
 * On the node of the shard, dedup_shards_shard_open() opens the shard's
 * table and primary key (claims_<shardid>, claims_pkey_<shardid>) under
 * the lock Citus's own writers take on the shard's metadata (ShareLock;
 * moving a shard takes it in ExclusiveLock before the switch), and checks
 * once it is held that the placement is still here: a call never writes a
 * shard that has moved away.  If it has, the call fails with 40001, so that
 * the caller runs its transaction again.  The node that forwards a call
 * (routing.c) takes the same lock first, so that Citus sends it to the
 * shard's node as of the transaction's other statements.
 *
 * The outbox is partitioned by the same map: one partition a shard of
 * dedup.claims, named by a part (dedup_shards_outbox_part), a fingerprint whose
 * hash falls in the shard's range.
 *
 * Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/relation.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"

#include "catalog.h"
#include "citus.h"
#include "fingerprint.h"
#include "shards.h"

/*
 * Citus's lock on the metadata of a shard of a hash-distributed table: an
 * advisory tag of its class 8 on (shard index, colocation id), the same for
 * every co-located shard of that index (SET_LOCKTAG_COLOCATED_SHARDS_METADATA_RESOURCE)
 */
#define CLUSTER_LOCKTAG_COLOCATED_SHARDS_METADATA 8

/* One shard of a table distributed by hash (citus.c reads them) */
typedef DedupCitusShard ClusterShard;

/* The shards of a table distributed by hash, as this backend last read them */
typedef struct ClusterMap
{
	bool		valid;
	int			nshards;
	ClusterShard *shards;		/* by range, in TopMemoryContext */
} ClusterMap;

static ClusterMap cluster_maps[DEDUP_NUM_RELATIONS];

static uint64 cluster_resets = 0;
static uint64 cluster_catalog_generation = 0;	/* catalog.c's, when last
												 * synced */
static bool cluster_callback_registered = false;

/* The primary key of one of dedup's distributed tables */
static DedupRelation
cluster_pkey_of(DedupRelation table)
{
	return table == DEDUP_REL_OUTBOX ? DEDUP_REL_OUTBOX_PKEY : table + 1;
}

/* A shard of one of dedup's key tables or their primary keys on this node, or none */
static Oid
cluster_key_shard_relid(DedupRelation rel, int64 shardid)
{
	return dedup_catalog_shard_relid(get_rel_name(dedup_catalog_relation_lookup(rel)), shardid);
}

/* Forget every shard map: an invalidation came, or catalog.c forgot its relations. */
static void
dedup_cluster_reset(void)
{
	for (int i = 0; i < DEDUP_NUM_RELATIONS; i++)
		cluster_maps[i].valid = false;
	cluster_resets++;
}

/*
 * The maps are of relations catalog.c looked up: forget them when it forgot
 * those (an invalidation of the shell table, of any of dedup's relations,
 * or of all), as soon as a map is used after.
 */
static void
cluster_sync(void)
{
	uint64		generation = dedup_catalog_relation_generation();

	if (generation != cluster_catalog_generation)
	{
		cluster_catalog_generation = generation;
		dedup_cluster_reset();
	}
}

/* How many times the shard maps were forgotten: what was checked against them holds while it stays. */
uint64
dedup_shards_generation(void)
{
	cluster_sync();
	return cluster_resets;
}

/* Whether a relation is one of the shards a map holds (its invalidation resets). */
static bool
dedup_cluster_forget(Oid relid)
{
	for (int i = 0; i < DEDUP_NUM_RELATIONS; i++)
	{
		ClusterMap *map = &cluster_maps[i];

		for (int j = 0; map->valid && j < map->nshards; j++)
			if (map->shards[j].heap == relid || map->shards[j].index == relid)
				return true;
	}
	return false;
}

/*
 * At the invalidation of a shard a map holds, or of every relation, forget
 * the maps, and catalog.c's relations with them.
 */
static void
shard_relcache_callback(Datum arg, Oid relid)
{
	if (!OidIsValid(relid) || dedup_cluster_forget(relid))
	{
		dedup_cluster_reset();
		dedup_catalog_relation_reset();
	}
}

/* The map of a table distributed by hash, read when not valid. */
static ClusterMap *
cluster_map(DedupRelation table)
{
	ClusterMap *map = &cluster_maps[table];

	if (!cluster_callback_registered)
	{
		dedup_catalog_relcache_register(shard_relcache_callback);
		cluster_callback_registered = true;
	}
	cluster_sync();
	while (!map->valid)
	{
		uint64		resets = cluster_resets;
		Oid			relid = dedup_catalog_relation_lookup(table);
		MemoryContext old;
		ClusterShard *shards;
		int			n;

		if (!dedup_catalog_relation_hashed(table))
			elog(ERROR, "dedup.%s is not distributed by hash", get_rel_name(relid));
		old = MemoryContextSwitchTo(TopMemoryContext);
		n = dedup_citus_shards(relid, &shards);
		MemoryContextSwitchTo(old);
		if (n == 0)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("table \"%s.%s\" is distributed but has no shards",
							DEDUP_INTERNAL_SCHEMA, get_rel_name(relid))));
		cluster_sync();
		if (resets != cluster_resets)
		{
			pfree(shards);
			continue;			/* an invalidation came while it was read */
		}
		if (map->shards)
			pfree(map->shards);
		map->shards = shards;
		map->nshards = n;
		map->valid = true;
	}
	return map;
}

/* The shard of a key: the one whose range holds the fingerprint's hash. */
static ClusterShard *
cluster_shard_of(DedupRelation table, const DedupFingerprint *fp)
{
	ClusterMap *map = cluster_map(table);
	int32		hash = DatumGetInt32(DirectFunctionCall1(dedup_fingerprint_hash,
														 PointerGetDatum(fp)));
	int			lo = 0;
	int			hi = map->nshards - 1;

	while (lo < hi)
	{
		int			mid = lo + (hi - lo + 1) / 2;

		if (map->shards[mid].min <= hash)
			lo = mid;
		else
			hi = mid - 1;
	}
	if (hash < map->shards[lo].min || hash > map->shards[lo].max)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("no shard of \"%s.%s\" holds hash %d", DEDUP_INTERNAL_SCHEMA,
						get_rel_name(dedup_catalog_relation_lookup(table)), hash),
				 errdetail("The shards' ranges in pg_dist_shard do not cover every hash.")));
	return &map->shards[lo];
}

/* Where a key's shard is: its node group and shard id, and whether it is here. */
void
dedup_shards_place(DedupRelation table, const DedupFingerprint *fp, DedupShardPlace *place)
{
	ClusterShard *shard = cluster_shard_of(table, fp);

	place->group = shard->group;
	place->shardid = shard->shardid;
	place->local = shard->local;
}

/* A key's shard is not here, where it must be: 40001, to run the transaction again. */
void
dedup_shards_not_here(DedupRelation table, int64 shardid)
{
	ereport(ERROR,
			(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
			 errmsg("the shard of the key is not on this node"),
			 errdetail("Shard " INT64_FORMAT " of \"%s.%s\" moved to another node while the call was routed, or dedup.call_on_shard is not distributed.",
					   shardid, DEDUP_INTERNAL_SCHEMA, get_rel_name(dedup_catalog_relation_lookup(table))),
			 errhint("Run the transaction again; if this goes on, run SELECT dedup_distribute() on the coordinator.")));
}

/*
 * Take Citus's lock on a shard's metadata in ShareLock, as its writers do,
 * until the transaction ends, and the invalidations that came meanwhile: a
 * shard move holds it in ExclusiveLock from before its last catch-up until
 * its new placement commits.
 */
static void
cluster_lock_shard(const ClusterShard *shard)
{
	LOCKTAG		tag;

	SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, (uint32) shard->shardindex, (uint32) shard->colocationid,
						 CLUSTER_LOCKTAG_COLOCATED_SHARDS_METADATA);
	(void) LockAcquire(&tag, ShareLock, false, false);
	AcceptInvalidationMessages();
}

/*
 * The shard of key fp, which must be on this node (40001 otherwise), with
 * its metadata lock taken (cluster_lock_shard); NULL when the key's shard
 * changed meanwhile (a split): look again.
 */
static ClusterShard *
cluster_shard_locked(DedupRelation table, const DedupFingerprint *fp)
{
	ClusterShard *shard = cluster_shard_of(table, fp);
	int64		shardid = shard->shardid;

	if (!shard->local)
		dedup_shards_not_here(table, shardid);
	cluster_lock_shard(shard);
	shard = cluster_shard_of(table, fp);
	if (shard->shardid != shardid)
		return NULL;
	if (!shard->local)
		dedup_shards_not_here(table, shardid);
	return shard;
}

/*
 * Open the shard of a key's table (dedup.claims or dedup.streams) on this
 * node, and its primary key, with lockmode, after taking Citus's lock on the
 * shard's metadata as its writers do: once it is held, a move of the shard
 * has either not switched yet (and waits for this transaction) or is seen.
 */
void
dedup_shards_shard_open(DedupRelation table, const DedupFingerprint *fp,
						LOCKMODE lockmode, Relation *heap, Relation *index)
{
	for (;;)
	{
		ClusterShard *shard = cluster_shard_locked(table, fp);
		int64		shardid;

		if (shard == NULL)
			continue;
		shardid = shard->shardid;
		if (!OidIsValid(shard->heap))
		{
			Oid			heapid = cluster_key_shard_relid(table, shardid);
			Oid			indexid = cluster_key_shard_relid(cluster_pkey_of(table), shardid);

			if (!OidIsValid(heapid) || !OidIsValid(indexid))
				ereport(ERROR,
						(errcode(ERRCODE_UNDEFINED_TABLE),
						 errmsg("shard " INT64_FORMAT " of \"%s.%s\" has no table or primary key on this node",
								shardid, DEDUP_INTERNAL_SCHEMA, get_rel_name(dedup_catalog_relation_lookup(table))),
						 errdetail("Citus's metadata places it here.")));

			/*
			 * looking names up may take in invalidations: look the shard up
			 * again
			 */
			shard = cluster_shard_of(table, fp);
			if (shard->shardid != shardid)
				continue;
			shard->heap = heapid;
			shard->index = indexid;
		}
		LockRelationOid(shard->heap, lockmode);
		LockRelationOid(shard->index, lockmode);
		shard = cluster_shard_of(table, fp);
		if (shard->shardid != shardid || !OidIsValid(shard->heap))
			continue;			/* reset while locking: look again */
		*heap = relation_open(shard->heap, NoLock);
		*index = index_open(shard->index, NoLock);
		return;
	}
}

/*
 * The tables of a key table's shards that are on this node, for the
 * cleanup, up to max of them; the number of them.
 */
int
dedup_shards_local_shards(DedupRelation table, Oid *heaps, int max)
{
	ClusterMap *map = cluster_map(table);
	int			n = 0;

	for (int i = 0; i < map->nshards && n < max; i++)
	{
		if (map->shards[i].local)
		{
			Oid			relid = cluster_key_shard_relid(table, map->shards[i].shardid);

			if (OidIsValid(relid))
				heaps[n++] = relid;
		}
	}
	return n;
}

/*
 * Hold Citus's lock on the metadata of the shard of key fp (of a distributed
 * table), which must be on this node, until the transaction ends, as its
 * writers do: for calls that work in the shard through SQL (the outbox's
 * relay), so that a move of the shard waits for them, or they fail (40001)
 * when it switched first.
 */
void
dedup_shards_lock_key(DedupRelation table, const DedupFingerprint *fp)
{
	while (cluster_shard_locked(table, fp) == NULL)
		;
}

/*
 * Take Citus's lock on the metadata of the shard of key fp here, wherever
 * the shard is, until the transaction ends: before a call is sent to its
 * node, as Citus's executor does before it sends a write.
 */
void
dedup_shards_lock_remote(DedupRelation table, const DedupFingerprint *fp)
{
	cluster_lock_shard(cluster_shard_of(table, fp));
}

/* Whether the shard of key fp of a distributed table is on this node. */
bool
dedup_shards_is_local(DedupRelation table, const DedupFingerprint *fp)
{
	return cluster_shard_of(table, fp)->local;
}

/* ---------------------------------------------------------------------
 * The outbox's partitions: one a shard of dedup.claims
 * ---------------------------------------------------------------------
 */

/*
 * The part of partition number n: the number's 4 bytes, big-endian, then
 * zeros (outbox.c numbers a batch by it; a database that is not a cluster
 * has partition 0 alone).
 */
void
dedup_shards_outbox_part(uint32 n, DedupFingerprint *part)
{
	memset(part->bytes, 0, DEDUP_FINGERPRINT_LEN);
	part->bytes[0] = (n >> 24) & 0xff;
	part->bytes[1] = (n >> 16) & 0xff;
	part->bytes[2] = (n >> 8) & 0xff;
	part->bytes[3] = n & 0xff;
}

/*
 * The partition a shard holds: the number k of the first part (k's 4
 * bytes, big-endian, then zeros: dedup_shards_outbox_part) whose hash falls in the shard's
 * range, so that Citus keeps the rows of the partition in that shard, with
 * the claims (and a business table's rows) of the keys it holds.  Found
 * once per shard map; a batch's id has room for numbers below 2^16.
 */
static int32
cluster_partition_of_shard(ClusterShard *shard)
{
	DedupFingerprint part;

	for (uint32 k = 0; shard->partition < 0; k++)
	{
		int32		hash;

		if (k > DEDUP_OUTBOX_MAX_PARTITION)
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("shard " INT64_FORMAT " of dedup.claims has no outbox partition below %d",
							shard->shardid, DEDUP_OUTBOX_MAX_PARTITION + 1),
					 errdetail("The outbox's partitions are numbered below %d, and no number that low falls in the shard's range of hashes.",
							   DEDUP_OUTBOX_MAX_PARTITION + 1),
					 errhint("Distribute dedup's tables with fewer shards.")));
		dedup_shards_outbox_part(k, &part);
		hash = DatumGetInt32(DirectFunctionCall1(dedup_fingerprint_hash, PointerGetDatum(&part)));
		if (hash >= shard->min && hash <= shard->max)
			shard->partition = (int32) k;
	}
	return shard->partition;
}

/*
 * The part of the outbox partition that holds the events of an aggregate,
 * of fingerprint afp: the partition of the shard of dedup.claims that holds
 * afp.
 */
void
dedup_shards_partition(const DedupFingerprint *afp, DedupFingerprint *part)
{
	dedup_shards_outbox_part(cluster_partition_of_shard(cluster_shard_of(DEDUP_REL_CLAIMS, afp)), part);
}

/*
 * Every partition of the outbox, one a shard of dedup.claims, in the
 * shards' order, as parts; *local[i] says whether part i is on this node.
 * Returns how many.  A part is also a key of its shard, which a call that
 * goes to every shard (dedup_streams) is forwarded by.
 */
int
dedup_shards_partitions(DedupFingerprint **parts, bool **local)
{
	ClusterMap *map = cluster_map(DEDUP_REL_CLAIMS);
	int			n = map->nshards;

	*parts = palloc(sizeof(DedupFingerprint) * n);
	*local = palloc(sizeof(bool) * n);
	for (int i = 0; i < n; i++)
	{
		dedup_shards_outbox_part(cluster_partition_of_shard(&map->shards[i]), &(*parts)[i]);
		(*local)[i] = map->shards[i].local;
	}
	return n;
}


/* ---------------------------------------------------------------------
 * The time buckets of dedup.claims on a cluster (bucket.c): each a table
 * distributed by key and co-located with dedup.claims (claims_N), so that
 * a key's shard of every bucket has the same index among its table's
 * shards as the key's shard of dedup.claims, on the same node.
 * ---------------------------------------------------------------------
 */

/* The shards of a bucket's table, by range, as this backend last read them */
typedef struct ClusterBucketMap
{
	Oid			shell;			/* the bucket's distributed table */
	uint64		resets;			/* cluster_resets when read */
	int			nshards;
	int64	   *shardids;		/* by range, in TopMemoryContext */
} ClusterBucketMap;

#define CLUSTER_MAX_BUCKET_MAPS 128
static ClusterBucketMap cluster_bucket_maps[CLUSTER_MAX_BUCKET_MAPS];
static int	cluster_bucket_next = 0;

/* The shard ids of a bucket's table, by range; read again after any reset. */
static ClusterBucketMap *
cluster_bucket_map(Oid shell)
{
	ClusterBucketMap *map = NULL;

	cluster_sync();
	for (int i = 0; i < CLUSTER_MAX_BUCKET_MAPS; i++)
		if (cluster_bucket_maps[i].shell == shell)
			map = &cluster_bucket_maps[i];
	if (map == NULL)
	{
		map = &cluster_bucket_maps[cluster_bucket_next];
		cluster_bucket_next = (cluster_bucket_next + 1) % CLUSTER_MAX_BUCKET_MAPS;
		if (map->shardids)
			pfree(map->shardids);
		map->shardids = NULL;
		map->shell = shell;
		map->resets = cluster_resets - 1;
	}
	while (map->resets != cluster_resets)
	{
		uint64		resets = cluster_resets;
		DedupCitusShard *shards;
		int			n = dedup_citus_shards(shell, &shards);
		int64	   *ids = MemoryContextAlloc(TopMemoryContext, sizeof(int64) * Max(n, 1));

		for (int i = 0; i < n; i++)
			ids[i] = shards[i].shardid;
		pfree(shards);
		if (map->shardids)
			pfree(map->shardids);
		map->shardids = ids;
		map->nshards = n;
		cluster_sync();
		map->resets = resets;
	}
	return map;
}

/*
 * The relations here of a key's shard of a bucket's table (shell, named
 * relname: claims_N), its table and primary key; false when the bucket has
 * no such shard here (its table was dropped, or is not co-located).  Call it
 * once the key's shard is known to be here, its metadata locked
 * (dedup_shards_lock_key): co-located shards share that lock.
 */
bool
dedup_shards_bucket_shard(Oid shell, const char *relname, const DedupFingerprint *fp,
						  Oid *heap, Oid *index)
{
	ClusterShard *shard = cluster_shard_of(DEDUP_REL_CLAIMS, fp);
	int			shardindex = shard->shardindex;
	int			nclaims = cluster_map(DEDUP_REL_CLAIMS)->nshards;
	ClusterBucketMap *map = cluster_bucket_map(shell);
	int64		shardid;

	if (map->nshards != nclaims || shardindex >= map->nshards)
		return false;
	shardid = map->shardids[shardindex];
	*heap = dedup_catalog_shard_relid(relname, shardid);
	*index = dedup_catalog_shard_relid(psprintf("%s_pkey", relname), shardid);
	return OidIsValid(*heap) && OidIsValid(*index);
}

/*
 * The tables and primary keys of a bucket's shards on this node, up to max
 * of them; the number of them.  The shards here are those of dedup.claims's
 * shards here, by index (co-located).
 */
int
dedup_shards_bucket_local_shards(Oid shell, const char *relname, Oid *heaps, Oid *indexes,
								 int max)
{
	ClusterMap *claims = cluster_map(DEDUP_REL_CLAIMS);
	ClusterBucketMap *map = cluster_bucket_map(shell);
	int			n = 0;

	if (map->nshards != claims->nshards)
		return 0;
	for (int i = 0; i < claims->nshards && n < max; i++)
	{
		Oid			heap;
		Oid			index;

		if (!claims->shards[i].local)
			continue;
		heap = dedup_catalog_shard_relid(relname, map->shardids[i]);
		index = dedup_catalog_shard_relid(psprintf("%s_pkey", relname), map->shardids[i]);
		if (OidIsValid(heap) && OidIsValid(index))
		{
			heaps[n] = heap;
			if (indexes)
				indexes[n] = index;
			n++;
		}
	}
	return n;
}
