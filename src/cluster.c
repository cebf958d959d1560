/*-------------------------------------------------------------------------
 *
 * cluster.c
 *	  dedup on a Citus cluster: which shard, on which node, holds a key.
 *
 * dedup_distribute() (sql/functions/cluster.sql) distributes dedup.claims
 * and dedup.streams by their key, the fingerprint of (scope, key), into
 * co-located shards, and makes dedup.scopes and dedup.grants reference
 * tables.  Citus finds a key's shard by the fingerprint's hash
 * (dedup_fingerprint_hash, the type's hash operator class) within the
 * shards' ranges in pg_dist_shard; this file does the same, from a copy of
 * those ranges and of which of them have their placement on this node, kept
 * per backend and dropped at any invalidation of the shell table (Citus
 * sends one whenever a shard or placement of it changes).
 *
 * A call (dedup_claim, dedup_begin, dedup_advance, ...) made on a node that
 * does not hold its key's shard is forwarded: dedup_cluster_route() sends
 * it, arguments as text, through dedup_call_on_shard(key, function, args),
 * a function Citus delegates to the node of the key's shard (distributed by
 * its first argument, co-located with dedup.claims, force_delegation so that
 * it is delegated inside transactions too).  There the same function runs
 * again, finds the shard local and works on it, in the caller's
 * transaction: a business row of a table co-located with dedup.claims,
 * written in the same transaction, makes it a single-node transaction.
 *
 * On the node of the shard, dedup_cluster_shard_open() opens the shard's
 * table and primary key (claims_<shardid>, claims_pkey_<shardid>) under
 * the lock Citus's own writers take on the shard's metadata (ShareLock;
 * moving a shard takes it in ExclusiveLock before the switch), and checks
 * once it is held that the placement is still here: a call never writes a
 * shard that has moved away.  If it has, the call fails with 40001, so that
 * the caller runs its transaction again.  The node that forwards a call
 * takes the same lock first, so that Citus sends it to the shard's node as
 * of the transaction's other statements.
 *
 * A batch (dedup_cluster_batch) goes in runs: each shard of this node, and
 * each other node, whose keys are sent there as a call of their own.  A
 * transaction that sent a call and wrote on this node commits with Citus's
 * two-phase commit (cluster_xact_callback).
 *
 * Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/relation.h"
#include "access/xact.h"
#include "access/table.h"
#include "catalog/dependency.h"
#include "catalog/namespace.h"
#include "catalog/pg_extension.h"
#include "catalog/pg_namespace_d.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/regproc.h"
#include "utils/rel.h"

#include "dedup.h"
#include "cluster.h"
#include "store.h"

extern Datum dedup_fingerprint_hash(PG_FUNCTION_ARGS);

/*
 * Citus's lock on the metadata of a shard of a hash-distributed table: an
 * advisory tag of its class 8 on (shard index, colocation id), the same for
 * every co-located shard of that index (SET_LOCKTAG_COLOCATED_SHARDS_METADATA_RESOURCE)
 */
#define CLUSTER_LOCKTAG_COLOCATED_SHARDS_METADATA 8

/* One shard of a table distributed by hash */
typedef struct ClusterShard
{
	int32		min;			/* the range of hashes it holds */
	int32		max;
	int64		shardid;
	int32		colocationid;	/* of its table */
	int32		shardindex;		/* its place among the table's shards, by range */
	int32		group;			/* the node group of its placement (of a hash-distributed table: one) */
	bool		local;			/* its placement is on this node */
	int32		partition;		/* the outbox partition it holds, once found; -1 before */
	Oid			heap;			/* its table here, once looked up */
	Oid			index;			/* its primary key here, once looked up */
} ClusterShard;

typedef struct ClusterMap
{
	bool		valid;
	int			nshards;
	ClusterShard *shards;		/* by range, in TopMemoryContext */
} ClusterMap;

static ClusterMap cluster_maps[DEDUP_NUM_RELATIONS];

/* Where a key's shard is: its node (group) and shard, and whether that is here */
typedef struct ClusterPlace
{
	int32		group;
	int64		shardid;
	bool		local;
} ClusterPlace;

static void cluster_not_here(DedupRelation table, int64 shardid);
static uint64 cluster_resets = 0;

/* set while dedup_call_on_shard runs a forwarded call: it is not forwarded again */
static bool cluster_forwarded = false;
static DedupFingerprint cluster_forwarded_key;	/* the key it was routed by */

/* this transaction sent a call to another node (reset at its end) */
static bool cluster_sent_in_xact = false;
static bool cluster_callback_registered = false;

/* ---------------------------------------------------------------------
 * Citus's catalogs
 * ---------------------------------------------------------------------
 */

/*
 * Citus's kind of a relation: its row of pg_dist_partition, read without
 * Citus's code, so that dedup works (as a single node) where Citus is not
 * installed.
 */
DedupCitusKind
dedup_cluster_kind(Oid relid)
{
	Oid			catalog = get_relname_relid("pg_dist_partition", PG_CATALOG_NAMESPACE);
	Relation	rel;
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tuple;
	DedupCitusKind kind = DEDUP_CITUS_NONE;

	if (!OidIsValid(catalog) || !OidIsValid(relid))
		return DEDUP_CITUS_NONE;
	rel = table_open(catalog, AccessShareLock);
	/* its first column, logicalrelid; its second, partmethod */
	ScanKeyInit(&key, 1, BTEqualStrategyNumber, F_OIDEQ, ObjectIdGetDatum(relid));
	scan = systable_beginscan(rel, InvalidOid, false, NULL, 1, &key);
	tuple = systable_getnext(scan);
	if (HeapTupleIsValid(tuple))
	{
		bool		isnull;
		Datum		method = heap_getattr(tuple, 2, RelationGetDescr(rel), &isnull);

		kind = !isnull && DatumGetChar(method) == 'h' ? DEDUP_CITUS_HASH : DEDUP_CITUS_SINGLE;
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	return kind;
}

/*
 * The shards of a distributed table, by range, with whether each has its
 * placement on this node: the query Citus's metadata answers on every node
 * that has it (the coordinator, and workers, which Citus gives it).
 */
static int
cluster_read_shards(Oid relid, ClusterShard **result)
{
	Oid			argtypes[1] = {OIDOID};
	Datum		args[1] = {ObjectIdGetDatum(relid)};
	MemoryContext caller = CurrentMemoryContext;
	int			n;
	ClusterShard *shards;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (SPI_execute_with_args("SELECT s.shardid,"
							  "  coalesce(s.shardminvalue, '-2147483648')::pg_catalog.int4,"
							  "  coalesce(s.shardmaxvalue, '2147483647')::pg_catalog.int4,"
							  "  EXISTS (SELECT FROM pg_catalog.pg_dist_placement p"
							  "          WHERE p.shardid = s.shardid AND p.groupid ="
							  "                (SELECT groupid FROM pg_catalog.pg_dist_local_group)),"
							  "  (SELECT colocationid FROM pg_catalog.pg_dist_partition d WHERE d.logicalrelid = $1),"
							  "  coalesce((SELECT min(p.groupid) FROM pg_catalog.pg_dist_placement p"
							  "            WHERE p.shardid = s.shardid), -1)"
							  " FROM pg_catalog.pg_dist_shard s WHERE s.logicalrelid = $1"
							  " ORDER BY 2",
							  1, argtypes, args, NULL, true, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read the shards of relation %u", relid);
	n = (int) SPI_processed;
	shards = MemoryContextAllocZero(caller, sizeof(ClusterShard) * Max(n, 1));
	for (int i = 0; i < n; i++)
	{
		HeapTuple	tuple = SPI_tuptable->vals[i];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		bool		isnull;

		shards[i].shardid = DatumGetInt64(SPI_getbinval(tuple, desc, 1, &isnull));
		shards[i].min = DatumGetInt32(SPI_getbinval(tuple, desc, 2, &isnull));
		shards[i].max = DatumGetInt32(SPI_getbinval(tuple, desc, 3, &isnull));
		shards[i].local = DatumGetBool(SPI_getbinval(tuple, desc, 4, &isnull));
		shards[i].group = DatumGetInt32(SPI_getbinval(tuple, desc, 6, &isnull));
		shards[i].colocationid = DatumGetInt32(SPI_getbinval(tuple, desc, 5, &isnull));
		shards[i].shardindex = i;
		shards[i].partition = -1;
	}
	SPI_finish();
	*result = shards;
	return n;
}

/* A shard's relation on this node: NAME_SHARDID in dedup's schema, or none */
static Oid
cluster_shard_relid(const char *relname, int64 shardid)
{
	Oid			nsp = get_namespace_oid(DEDUP_INTERNAL_SCHEMA, true);
	char	   *name = psprintf("%s_" INT64_FORMAT, relname, shardid);
	Oid			relid = OidIsValid(nsp) ? get_relname_relid(name, nsp) : InvalidOid;

	pfree(name);
	return relid;
}

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
	return cluster_shard_relid(get_rel_name(dedup_relation_lookup(rel)), shardid);
}

/*
 * The relation on this node of a table Citus keeps in one shard (a
 * reference table), named as relname's shard; *local says whether its
 * placement is here.
 */
Oid
dedup_cluster_single_shard(Oid relid, const char *relname, bool *local)
{
	ClusterShard *shards;
	int			n = cluster_read_shards(relid, &shards);
	Oid			result = InvalidOid;

	*local = (n == 1 && shards[0].local);
	if (*local)
		result = cluster_shard_relid(relname, shards[0].shardid);
	pfree(shards);
	return result;
}

/* How many times the shard maps were forgotten: what was checked against them holds while it stays. */
uint64
dedup_cluster_generation(void)
{
	return cluster_resets;
}

/* Forget every shard map: an invalidation came (dedup.c's callback). */
void
dedup_cluster_reset(void)
{
	for (int i = 0; i < DEDUP_NUM_RELATIONS; i++)
		cluster_maps[i].valid = false;
	cluster_resets++;
}

/* Whether a relation is one of the shards a map holds (its invalidation resets). */
bool
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

/* The map of a table distributed by hash, read when not valid. */
static ClusterMap *
cluster_map(DedupRelation table)
{
	ClusterMap *map = &cluster_maps[table];

	while (!map->valid)
	{
		uint64		resets = cluster_resets;
		Oid			relid = dedup_relation_lookup(table);
		MemoryContext old;
		ClusterShard *shards;
		int			n;

		if (!dedup_relation_hashed(table))
			elog(ERROR, "dedup.%s is not distributed by hash", get_rel_name(relid));
		old = MemoryContextSwitchTo(TopMemoryContext);
		n = cluster_read_shards(relid, &shards);
		MemoryContextSwitchTo(old);
		if (n == 0)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("table \"%s.%s\" is distributed but has no shards",
							DEDUP_INTERNAL_SCHEMA, get_rel_name(relid))));
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
						get_rel_name(dedup_relation_lookup(table)), hash),
				 errdetail("The shards' ranges in pg_dist_shard do not cover every hash.")));
	return &map->shards[lo];
}

/* Where a key's shard is: its node group and shard id, and whether it is here. */
static void
cluster_place(DedupRelation table, const DedupFingerprint *fp, ClusterPlace *place)
{
	ClusterShard *shard = cluster_shard_of(table, fp);

	place->group = shard->group;
	place->shardid = shard->shardid;
	place->local = shard->local;
	if (!shard->local && cluster_forwarded)
		cluster_not_here(table, shard->shardid);
}

static void
cluster_not_here(DedupRelation table, int64 shardid)
{
	ereport(ERROR,
			(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
			 errmsg("the shard of the key is not on this node"),
			 errdetail("Shard " INT64_FORMAT " of \"%s.%s\" moved to another node while the call was routed, or dedup_call_on_shard is not distributed.",
					   shardid, DEDUP_INTERNAL_SCHEMA, get_rel_name(dedup_relation_lookup(table))),
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
		cluster_not_here(table, shardid);
	cluster_lock_shard(shard);
	shard = cluster_shard_of(table, fp);
	if (shard->shardid != shardid)
		return NULL;
	if (!shard->local)
		cluster_not_here(table, shardid);
	return shard;
}

/*
 * Open the shard of a key's table (dedup.claims or dedup.streams) on this
 * node, and its primary key, with lockmode, after taking Citus's lock on the
 * shard's metadata as its writers do: once it is held, a move of the shard
 * has either not switched yet (and waits for this transaction) or is seen.
 */
void
dedup_cluster_shard_open(DedupRelation table, const DedupFingerprint *fp,
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
								shardid, DEDUP_INTERNAL_SCHEMA, get_rel_name(dedup_relation_lookup(table))),
						 errdetail("Citus's metadata places it here.")));
			/* looking names up may take in invalidations: look the shard up again */
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
dedup_cluster_local_shards(DedupRelation table, Oid *heaps, int max)
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

/* ---------------------------------------------------------------------
 * The outbox's partitions: one a shard of dedup.claims
 * ---------------------------------------------------------------------
 */

/*
 * The partition a shard holds: the number k of the first part (k's 4
 * bytes, big-endian, then zeros; outbox.c) whose hash falls in the shard's
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
		dedup_outbox_part(k, &part);
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
dedup_cluster_partition(const DedupFingerprint *afp, DedupFingerprint *part)
{
	dedup_outbox_part(cluster_partition_of_shard(cluster_shard_of(DEDUP_REL_CLAIMS, afp)), part);
}

/*
 * Every partition of the outbox, one a shard of dedup.claims, in the
 * shards' order, as parts; *local[i] says whether part i is on this node.
 * Returns how many.  A part is also a key of its shard, which a call that
 * goes to every shard (dedup_streams) is forwarded by.
 */
int
dedup_cluster_partitions(DedupFingerprint **parts, bool **local)
{
	ClusterMap *map = cluster_map(DEDUP_REL_CLAIMS);
	int			n = map->nshards;

	*parts = palloc(sizeof(DedupFingerprint) * n);
	*local = palloc(sizeof(bool) * n);
	for (int i = 0; i < n; i++)
	{
		dedup_outbox_part(cluster_partition_of_shard(&map->shards[i]), &(*parts)[i]);
		(*local)[i] = map->shards[i].local;
	}
	return n;
}

/* ---------------------------------------------------------------------
 * Forwarding a call to the node of its key's shard
 * ---------------------------------------------------------------------
 */

/*
 * The key a call running here was forwarded by (dedup_call_on_shard), or
 * NULL when it was not forwarded.
 */
const DedupFingerprint *
dedup_cluster_forwarded_key(void)
{
	return cluster_forwarded ? &cluster_forwarded_key : NULL;
}

/* The columns of a row of a forwarded call's result, as C strings (NULL for NULL) */
char **
dedup_cluster_row_values(ArrayType *row, int *n)
{
	Datum	   *elems;
	bool	   *nulls;
	char	  **values;

	deconstruct_array(row, TEXTOID, -1, false, TYPALIGN_INT, &elems, &nulls, n);
	values = palloc0(sizeof(char *) * Max(*n, 1));
	for (int i = 0; i < *n; i++)
		values[i] = nulls[i] ? NULL : TextDatumGetCString(elems[i]);
	return values;
}

/*
 * Add the rows of a forwarded call to a set-returning function's result
 * (materialized); returns how many.
 */
int
dedup_cluster_put_rows(ReturnSetInfo *rsinfo, List *rows)
{
	AttInMetadata *meta = TupleDescGetAttInMetadata(rsinfo->setDesc);
	ListCell   *lc;

	foreach(lc, rows)
	{
		int			n;
		char	  **values = dedup_cluster_row_values(lfirst(lc), &n);

		if (n != rsinfo->setDesc->natts)
			elog(ERROR, "a forwarded call returned %d columns, not %d", n, rsinfo->setDesc->natts);
		tuplestore_puttuple(rsinfo->setResult, BuildTupleFromCStrings(meta, values));
	}
	return list_length(rows);
}

/* The result of a forwarded call, from its rows, as the call itself returns it */
static Datum
cluster_result(FunctionCallInfo fcinfo, List *rows)
{
	Oid			rettype;
	TupleDesc	tupdesc;
	TypeFuncClass class;
	char	  **values;
	int			n = 0;

	if (get_func_retset(fcinfo->flinfo->fn_oid))
	{
		InitMaterializedSRF(fcinfo, 0);
		(void) dedup_cluster_put_rows((ReturnSetInfo *) fcinfo->resultinfo, rows);
		return (Datum) 0;
	}
	class = get_call_result_type(fcinfo, &rettype, &tupdesc);
	if (rows == NIL)
	{
		fcinfo->isnull = true;
		return (Datum) 0;
	}
	values = dedup_cluster_row_values(linitial(rows), &n);
	if (class == TYPEFUNC_COMPOSITE)
	{
		if (n != tupdesc->natts)
			elog(ERROR, "a forwarded call returned %d columns, not %d", n, tupdesc->natts);
		return HeapTupleGetDatum(BuildTupleFromCStrings(TupleDescGetAttInMetadata(BlessTupleDesc(tupdesc)),
														values));
	}
	if (rettype == VOIDOID)
		return (Datum) 0;
	if (n != 1 || values[0] == NULL)
	{
		fcinfo->isnull = true;
		return (Datum) 0;
	}
	else
	{
		Oid			input;
		Oid			ioparam;

		getTypeInputInfo(rettype, &input, &ioparam);
		return OidInputFunctionCall(input, values[0], ioparam, -1);
	}
}

/*
 * A transaction that sent a call to another node and wrote here too commits
 * with two-phase commit.  Citus uses it only for the writes it knows of (its
 * own tables' placements, several nodes); with one remote node and writes
 * of tables it does not manage here (a business table of this node, dedup's
 * outbox), it commits the remote part alone first, and a node that fails
 * during that COMMIT leaves the two parts apart: a claim without its
 * business row.  So, before Citus prepares its commit (this callback,
 * registered after Citus's, runs before it), tell it to use two-phase
 * commit, through its Use2PCForCoordinatedTransaction().
 */
static void
cluster_xact_callback(XactEvent event, void *arg)
{
	typedef void (*Use2PC) (void);
	static Use2PC use_2pc = NULL;

	if (event == XACT_EVENT_PRE_COMMIT && cluster_sent_in_xact &&
		TransactionIdIsValid(GetTopTransactionIdIfAny()))
	{
		if (use_2pc == NULL)
			use_2pc = (Use2PC) load_external_function("$libdir/citus",
													  "Use2PCForCoordinatedTransaction",
													  true, NULL);
		use_2pc();
	}
	if (event == XACT_EVENT_COMMIT || event == XACT_EVENT_ABORT ||
		event == XACT_EVENT_PREPARE)
		cluster_sent_in_xact = false;
}

/*
 * Call one of dedup's functions, with the arguments given, on the node of
 * the shard of key route, through dedup_call_on_shard, which Citus
 * delegates there by its first argument: every argument a literal, so that
 * Citus's planner sees constants (it delegates nothing else inside a
 * function).  Returns the result's rows, each a text[] of its columns.
 */
List *
dedup_cluster_call(Oid fnoid, const Datum *args, const bool *argnulls,
				   const DedupFingerprint *route)
{
	Oid		   *argtypes;
	int			nargs;
	Datum	   *elems;
	int			dims[1];
	int			lbs[1] = {1};
	ArrayType  *argarray;
	char	   *sql;
	MemoryContext caller = CurrentMemoryContext;
	List	   *rows = NIL;

	(void) get_func_signature(fnoid, &argtypes, &nargs);
	elems = palloc0(sizeof(Datum) * Max(nargs, 1));
	for (int i = 0; i < nargs; i++)
	{
		if (!argnulls[i])
		{
			Oid			output;
			bool		varlena;

			getTypeOutputInfo(argtypes[i], &output, &varlena);
			elems[i] = CStringGetTextDatum(OidOutputFunctionCall(output, args[i]));
		}
	}
	dims[0] = nargs;
	argarray = construct_md_array(elems, (bool *) argnulls, 1, dims, lbs, TEXTOID, -1, false,
								  TYPALIGN_INT);
	/* dedup_call_on_shard is in the extension's schema, as the function called is */
	sql = psprintf("SELECT r FROM %s.dedup_call_on_shard(%s::%s, %s, %s::pg_catalog.text[]) AS r",
				   quote_identifier(get_namespace_name(get_func_namespace(fnoid))),
				   quote_literal_cstr(dedup_fingerprint_hex(route)), format_type_be_qualified(dedup_fingerprint_type()),
				   quote_literal_cstr(format_procedure_qualified(fnoid)),
				   quote_literal_cstr(OidOutputFunctionCall(F_ARRAY_OUT, PointerGetDatum(argarray))));

	if (!cluster_callback_registered)
	{
		RegisterXactCallback(cluster_xact_callback, NULL);
		cluster_callback_registered = true;
	}
	cluster_sent_in_xact = true;
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (SPI_execute(sql, false, 0) != SPI_OK_SELECT)
		elog(ERROR, "a forwarded call failed");
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		bool		isnull;
		Datum		d = SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &isnull);
		MemoryContext spi = MemoryContextSwitchTo(caller);

		if (isnull)
			elog(ERROR, "a forwarded call returned a null row");
		rows = lappend(rows, DatumGetArrayTypePCopy(d));
		MemoryContextSwitchTo(spi);
	}
	SPI_finish();
	return rows;
}

/* Keys by the node, then the shard, of their place, then by fingerprint (their index) */
static int
cluster_place_cmp(const void *a, const void *b, void *arg)
{
	const ClusterPlace *places = (const ClusterPlace *) arg;
	int			ka = *(const int *) a;
	int			kb = *(const int *) b;

	if (places[ka].group != places[kb].group)
		return places[ka].group < places[kb].group ? -1 : 1;
	if (places[ka].shardid != places[kb].shardid)
		return places[ka].shardid < places[kb].shardid ? -1 : 1;
	return (ka > kb) - (ka < kb);
}

/*
 * The arguments of the call of fcinfo, its array arguments restricted to
 * the elements at positions[run[0..n)], in that order.
 */
static void
cluster_subset_args(FunctionCallInfo fcinfo, const int *positions, const int *run, int n,
					Datum *args, bool *nulls)
{
	Oid		   *argtypes;
	int			nargs;

	(void) get_func_signature(fcinfo->flinfo->fn_oid, &argtypes, &nargs);
	for (int i = 0; i < Min(nargs, PG_NARGS()); i++)
	{
		Oid			argtype = argtypes[i];
		Oid			elemtype;
		int16		typlen;
		bool		typbyval;
		char		typalign;
		Datum	   *elems;
		bool	   *elemnulls;
		int			nelems;
		Datum	   *sub;
		bool	   *subnulls;
		int			dims[1] = {n};
		int			lbs[1] = {1};

		nulls[i] = PG_ARGISNULL(i);
		args[i] = nulls[i] ? (Datum) 0 : PG_GETARG_DATUM(i);
		if (nulls[i] || !OidIsValid(elemtype = get_element_type(argtype)))
			continue;
		get_typlenbyvalalign(elemtype, &typlen, &typbyval, &typalign);
		deconstruct_array(PG_GETARG_ARRAYTYPE_P(i), elemtype, typlen, typbyval, typalign,
						  &elems, &elemnulls, &nelems);
		sub = palloc(sizeof(Datum) * Max(n, 1));
		subnulls = palloc(sizeof(bool) * Max(n, 1));
		for (int j = 0; j < n; j++)
		{
			sub[j] = elems[positions[run[j]]];
			subnulls[j] = elemnulls[positions[run[j]]];
		}
		args[i] = PointerGetDatum(construct_md_array(sub, subnulls, 1, dims, lbs, elemtype,
													 typlen, typbyval, typalign));
	}
}

/*
 * A call of many keys (a batch) on a Citus cluster, where its keys' shards
 * may be on several nodes.  fps[0..nkeys) are its keys, in fingerprint
 * order; positions[k], the position in the call's array arguments of key
 * k's elements.  The keys go in runs: the keys of one shard of this node,
 * given to local(run, n, arg) as indexes into fps; all the keys of another
 * node, sent there as a call of their own (this call, its arrays restricted
 * to those keys), each row of whose result, one key, is given to
 * remote_row as text.  Nodes
 * go in the order of their groups and this node's shards in turn, each run
 * in fingerprint order: two batches take their keys in the same order and
 * never deadlock.
 */
void
dedup_cluster_batch(FunctionCallInfo fcinfo, DedupRelation table, const DedupFingerprint *fps,
					const int *positions, int nkeys, DedupBatchLocal local,
					DedupBatchRemoteRow remote_row, void *arg)
{
	ClusterPlace *places = palloc(sizeof(ClusterPlace) * Max(nkeys, 1));
	int		   *order = palloc(sizeof(int) * Max(nkeys, 1));
	Datum	   *args = palloc(sizeof(Datum) * Max(PG_NARGS(), 1));
	bool	   *nulls = palloc(sizeof(bool) * Max(PG_NARGS(), 1));

	for (int k = 0; k < nkeys; k++)
	{
		cluster_place(table, &fps[k], &places[k]);
		order[k] = k;
	}
	qsort_arg(order, nkeys, sizeof(int), cluster_place_cmp, places);
	for (int start = 0; start < nkeys;)
	{
		const ClusterPlace *first = &places[order[start]];
		const int  *run = &order[start];
		int			n = 0;

		/* a run: one shard of this node, or every key of another node */
		while (start + n < nkeys && places[run[n]].group == first->group &&
			   (!first->local || places[run[n]].shardid == first->shardid))
			n++;
		if (first->local)
			local(run, n, arg);
		else
		{
			ListCell   *lc;

			cluster_subset_args(fcinfo, positions, run, n, args, nulls);
			foreach(lc, dedup_cluster_call(fcinfo->flinfo->fn_oid, args, nulls, &fps[run[0]]))
			{
				int			ncols;
				char	  **values = dedup_cluster_row_values(lfirst(lc), &ncols);

				if (ncols != 1 || values[0] == NULL)
					elog(ERROR, "a batch sent to another node returned a row that is not one key");
				remote_row(values[0], arg);
			}
		}
		start += n;
	}
}

/* Run the call of fcinfo, as it was made, on the node of the shard of key fp. */
static Datum
cluster_forward(FunctionCallInfo fcinfo, const DedupFingerprint *fp)
{
	Datum	   *args = palloc(sizeof(Datum) * Max(PG_NARGS(), 1));
	bool	   *nulls = palloc(sizeof(bool) * Max(PG_NARGS(), 1));

	for (int i = 0; i < PG_NARGS(); i++)
	{
		args[i] = PG_GETARG_DATUM(i);
		nulls[i] = PG_ARGISNULL(i);
	}
	return cluster_result(fcinfo, dedup_cluster_call(fcinfo->flinfo->fn_oid, args, nulls, fp));
}

/*
 * Route a call by its key: when the key's table is distributed and its
 * shard is on another node, run the call there and set *result to what it
 * returned (true); otherwise (false) the caller goes on here.  The key is
 * the fingerprint of the scope (argument 0) and of argument 1, a key of
 * typlen or a stream name.
 */
bool
dedup_cluster_route(FunctionCallInfo fcinfo, DedupRelation table, DedupRouteKey how,
					int16 typlen, Datum *result)
{
	text	   *scope;
	DedupFingerprint fp;

	if (!dedup_relation_hashed(table))
		return false;
	scope = dedup_scope_arg(fcinfo, 0, "scope");
	if (how == DEDUP_ROUTE_STREAM)
		dedup_stream_key(scope, dedup_scope_arg(fcinfo, 1, "stream"), &fp);
	else
		dedup_key_arg(fcinfo, 1, scope, typlen, &fp);
	return dedup_cluster_route_key(fcinfo, table, &fp, result);
}

/*
 * Route a call by a key already fingerprinted, fp, in table (distributed):
 * as dedup_cluster_route().
 */
bool
dedup_cluster_route_key(FunctionCallInfo fcinfo, DedupRelation table,
						const DedupFingerprint *fp, Datum *result)
{
	ClusterShard *shard = cluster_shard_of(table, fp);

	if (shard->local)
		return false;
	if (cluster_forwarded)
		cluster_not_here(table, shard->shardid);

	/*
	 * Take the shard's metadata lock here too, as Citus's executor does
	 * before it sends a write: a move holds it until its switch commits on
	 * this node, and Citus's delegation then sends the call to the shard's
	 * new node.  Without it, a call could go to the old node while the
	 * transaction's next statement went to the new one.
	 */
	cluster_lock_shard(shard);
	shard = cluster_shard_of(table, fp);
	if (shard->local)
		return false;
	*result = cluster_forward(fcinfo, fp);
	return true;
}

/*
 * Hold Citus's lock on the metadata of the shard of key fp (of a distributed
 * table), which must be on this node, until the transaction ends, as its
 * writers do: for calls that work in the shard through SQL (the outbox's
 * relay), so that a move of the shard waits for them, or they fail (40001)
 * when it switched first.
 */
void
dedup_cluster_lock_key(DedupRelation table, const DedupFingerprint *fp)
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
dedup_cluster_lock_remote(DedupRelation table, const DedupFingerprint *fp)
{
	cluster_lock_shard(cluster_shard_of(table, fp));
}

/* Whether the shard of key fp of a distributed table is on this node. */
bool
dedup_cluster_is_local(DedupRelation table, const DedupFingerprint *fp)
{
	return cluster_shard_of(table, fp)->local;
}

/*
 * dedup_call_on_shard(key dedup_fingerprint, function text, args text[])
 *	RETURNS SETOF text[]
 *
 * A forwarded call, on the node Citus delegated it to: one of dedup's own
 * functions, called with its arguments read from text, as the role that
 * called it (EXECUTE on it is checked as for any call); the rows of its
 * result, each as text[].  key only routes the call: the function finds
 * its key's shard itself, and fails if it is not here.
 */
PG_FUNCTION_INFO_V1(dedup_call_on_shard);
Datum
dedup_call_on_shard(PG_FUNCTION_ARGS)
{
	Oid			fnoid;
	Oid		   *argtypes;
	int			nargs;
	Datum	   *elems;
	bool	   *elemnulls;
	int			nelems;
	Datum	   *values;
	char	   *nulls;
	StringInfoData sql;
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	bool		save_forwarded = cluster_forwarded;
	DedupFingerprint save_key = cluster_forwarded_key;

	if (PG_ARGISNULL(1) || PG_ARGISNULL(2))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("function and args must not be null")));
	fnoid = DatumGetObjectId(DirectFunctionCall1(regprocedurein,
												 CStringGetDatum(text_to_cstring(PG_GETARG_TEXT_PP(1)))));
	if (getExtensionOfObject(ProcedureRelationId, fnoid) != get_extension_oid("dedup", false))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("%s is not a function of dedup that a call on a shard runs",
						format_procedure(fnoid))));
	(void) get_func_signature(fnoid, &argtypes, &nargs);
	deconstruct_array(PG_GETARG_ARRAYTYPE_P(2), TEXTOID, -1, false, TYPALIGN_INT,
					  &elems, &elemnulls, &nelems);
	if (nelems != nargs)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s takes %d arguments, not %d", format_procedure(fnoid), nargs, nelems)));
	values = palloc0(sizeof(Datum) * Max(nargs, 1));
	nulls = palloc(Max(nargs, 1) + 1);
	initStringInfo(&sql);
	appendStringInfo(&sql, "SELECT * FROM %s(",
					 quote_qualified_identifier(get_namespace_name(get_func_namespace(fnoid)),
												get_func_name(fnoid)));
	for (int i = 0; i < nargs; i++)
	{
		nulls[i] = elemnulls[i] ? 'n' : ' ';
		if (!elemnulls[i])
		{
			Oid			input;
			Oid			ioparam;

			getTypeInputInfo(argtypes[i], &input, &ioparam);
			values[i] = OidInputFunctionCall(input, TextDatumGetCString(elems[i]), ioparam, -1);
		}
		appendStringInfo(&sql, "%s$%d", i > 0 ? ", " : "", i + 1);
	}
	nulls[nargs] = '\0';
	appendStringInfoChar(&sql, ')');

	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	cluster_forwarded = true;
	if (!PG_ARGISNULL(0))
		memcpy(&cluster_forwarded_key, PG_GETARG_DEDUP_FINGERPRINT_P(0), sizeof(DedupFingerprint));
	else
		memset(&cluster_forwarded_key, 0, sizeof(DedupFingerprint));
	PG_TRY();
	{
		if (SPI_execute_with_args(sql.data, nargs, argtypes, values, nulls, false, 0) != SPI_OK_SELECT)
			elog(ERROR, "a call on a shard failed");
	}
	PG_FINALLY();
	{
		cluster_forwarded = save_forwarded;
		cluster_forwarded_key = save_key;
	}
	PG_END_TRY();
	for (uint64 r = 0; r < SPI_processed; r++)
	{
		TupleDesc	desc = SPI_tuptable->tupdesc;
		HeapTuple	tuple = SPI_tuptable->vals[r];
		Datum	   *cols = palloc0(sizeof(Datum) * desc->natts);
		bool	   *colnulls = palloc0(sizeof(bool) * desc->natts);
		int			dims[1] = {desc->natts};
		int			lbs[1] = {1};
		Datum		row;
		bool		rownull = false;

		for (int i = 0; i < desc->natts; i++)
		{
			char	   *value = SPI_getvalue(tuple, desc, i + 1);

			colnulls[i] = (value == NULL);
			if (value)
				cols[i] = CStringGetTextDatum(value);
		}
		row = PointerGetDatum(construct_md_array(cols, colnulls, 1, dims, lbs, TEXTOID, -1,
												 false, TYPALIGN_INT));
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, &row, &rownull);
	}
	SPI_finish();
	return (Datum) 0;
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
