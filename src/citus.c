/*-------------------------------------------------------------------------
 *
 * citus.c
 *	  What Citus's metadata says of a relation: its kind
 *	  (pg_dist_partition), the shards of a distributed table and where
 *	  their placements are (pg_dist_shard, pg_dist_placement), and whether
 *	  this node is a worker (pg_dist_local_group).
 *
 * Citus's catalogs are read without Citus's code, so that dedup works (as
 * a single node) where Citus is not installed.  Nothing here is cached:
 * catalog.c keeps what it read with the relations it looked up, shards.c
 * its shard maps.  This file depends on nothing of dedup.
 *
 * Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "catalog/pg_namespace_d.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"

#include "citus.h"

/*
 * Citus's kind of a relation: its row of pg_dist_partition, read without
 * Citus's code, so that dedup works (as a single node) where Citus is not
 * installed.
 */
DedupCitusKind
dedup_citus_kind(Oid relid)
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
int
dedup_citus_shards(Oid relid, DedupCitusShard **result)
{
	Oid			argtypes[1] = {OIDOID};
	Datum		args[1] = {ObjectIdGetDatum(relid)};
	MemoryContext caller = CurrentMemoryContext;
	int			n;
	DedupCitusShard *shards;

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
	shards = MemoryContextAllocZero(caller, sizeof(DedupCitusShard) * Max(n, 1));
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

/*
 * Whether this node is a worker of a Citus cluster: its group in Citus's
 * catalog pg_dist_local_group is not the coordinator's (0).  A worker holds
 * shards of dedup's distributed tables; the tables Citus does not manage
 * (the outbox, the buckets, the history) are the coordinator's, and a
 * worker's own copy of them would be a second, separate state.
 */
bool
dedup_citus_is_worker(void)
{
	Oid			catalog = get_relname_relid("pg_dist_local_group", PG_CATALOG_NAMESPACE);
	Relation	rel;
	SysScanDesc scan;
	HeapTuple	tuple;
	bool		worker = false;

	if (!OidIsValid(catalog))
		return false;
	rel = table_open(catalog, AccessShareLock);
	scan = systable_beginscan(rel, InvalidOid, false, NULL, 0, NULL);
	tuple = systable_getnext(scan);
	if (HeapTupleIsValid(tuple))
	{
		bool		isnull;
		Datum		group = heap_getattr(tuple, 1, RelationGetDescr(rel), &isnull);

		worker = !isnull && DatumGetInt32(group) > 0;
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	return worker;
}
