/*-------------------------------------------------------------------------
 *
 * catalog.c
 *	  The extension's own relations: their look-up by name in schema dedup,
 *	  cached per backend; their owners; the fingerprint type and its
 *	  equality operator; and, on a Citus cluster, where they are: a table's
 *	  kind, a reference table's local shard, a shard's relation here, and
 *	  whether this node is a worker, from what Citus's metadata says
 *	  (citus.c).
 *
 * This file depends on nothing of dedup but the fingerprint type and
 * citus.c's reading of Citus's metadata: every layer above looks its
 * relations up here (src/README.md).
 *
 * Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/relation.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "utils/builtins.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"

#include "catalog.h"
#include "citus.h"

/*
 * The OIDs of the extension's tables and indexes, looked up by name once per
 * backend and forgotten when any of them is invalidated (dropped, renamed,
 * the extension re-created), or a shard the shard maps hold (shards.c calls
 * dedup_catalog_relation_reset).
 */
static Oid	dedup_relids[DEDUP_NUM_RELATIONS];
static const char *const dedup_relnames[DEDUP_NUM_RELATIONS] = {
	[DEDUP_REL_CLAIMS] = "claims",
	[DEDUP_REL_CLAIMS_PKEY] = "claims_pkey",
	[DEDUP_REL_SCOPES] = "scopes",
	[DEDUP_REL_SCOPES_PKEY] = "scopes_pkey",
	[DEDUP_REL_OUTBOX_KEYS] = "outbox_keys",
	[DEDUP_REL_OUTBOX_KEYS_PKEY] = "outbox_keys_pkey",
	[DEDUP_REL_OUTBOX] = "outbox",
	[DEDUP_REL_GRANTS] = "grants",
	[DEDUP_REL_STREAMS] = "streams",
	[DEDUP_REL_STREAMS_PKEY] = "streams_pkey",
	[DEDUP_REL_BUCKETS] = "buckets",
	[DEDUP_REL_OUTBOX_TOPICS] = "outbox_topics",
	[DEDUP_REL_OUTBOX_PKEY] = "outbox_pkey",
	[DEDUP_REL_OUTBOX_SEQ] = "outbox_seq_seq",
	[DEDUP_REL_HISTORY_GENERATIONS] = "history_generations",
	[DEDUP_REL_HISTORY_BLOCKS] = "history_blocks",
	[DEDUP_REL_HISTORY_BLOCKS_PKEY] = "history_blocks_pkey",
	[DEDUP_REL_OUTBOX_RETRY] = "outbox_retry",
	[DEDUP_REL_OUTBOX_RETRY_PKEY] = "outbox_retry_pkey",
	[DEDUP_REL_OUTBOX_DEAD] = "outbox_dead",
	[DEDUP_REL_OUTBOX_DEAD_PKEY] = "outbox_dead_pkey",
	[DEDUP_REL_HISTORY_SPANS] = "history_spans",
	[DEDUP_REL_OUTBOX_BATCH_IDS] = "outbox_batch_ids",
};
static DedupCitusKind dedup_relkind[DEDUP_NUM_RELATIONS];	/* Citus's kind of each */
static bool dedup_relremote[DEDUP_NUM_RELATIONS];	/* one shard, not on this
													 * node */
static bool dedup_citus_worker = false; /* this node is a Citus worker */
static uint64 dedup_relids_resets = 0;	/* counts the resets of dedup_relids */
static bool dedup_callback_registered = false;

static void
dedup_relcache_callback(Datum arg, Oid relid)
{
	bool		reset = !OidIsValid(relid);

	for (int i = 0; i < DEDUP_NUM_RELATIONS && !reset; i++)
		reset = (dedup_relids[i] == relid);
	if (reset)
		dedup_catalog_relation_reset();
}

/*
 * The relcache callbacks of the layers above (the buckets' list, the shard
 * maps, the scopes' and histories' caches): PostgreSQL 15 has room for ten
 * in a backend, shared with Citus's, so dedup takes one slot, this file's,
 * and calls theirs from it, in the order they were registered.
 */
#define DEDUP_MAX_RELCACHE_CALLBACKS 8
static RelcacheCallbackFunction dedup_relcache_callbacks[DEDUP_MAX_RELCACHE_CALLBACKS];
static int	dedup_relcache_ncallbacks = 0;

static void
dedup_relcache_dispatch(Datum arg, Oid relid)
{
	dedup_relcache_callback(arg, relid);
	for (int i = 0; i < dedup_relcache_ncallbacks; i++)
		dedup_relcache_callbacks[i] (arg, relid);
}

static void
dedup_relcache_register_self(void)
{
	if (!dedup_callback_registered)
	{
		CacheRegisterRelcacheCallback(dedup_relcache_dispatch, (Datum) 0);
		dedup_callback_registered = true;
	}
}

/* Register a relcache callback of a layer above, once per backend. */
void
dedup_catalog_relcache_register(RelcacheCallbackFunction func)
{
	dedup_relcache_register_self();
	for (int i = 0; i < dedup_relcache_ncallbacks; i++)
		if (dedup_relcache_callbacks[i] == func)
			return;
	if (dedup_relcache_ncallbacks >= DEDUP_MAX_RELCACHE_CALLBACKS)
		elog(ERROR, "out of dedup's relcache callback slots");
	dedup_relcache_callbacks[dedup_relcache_ncallbacks++] = func;
}

/*
 * Forget the OIDs looked up: at an invalidation of one of them (above), or
 * of a relation a layer above keeps with them (the shard maps, shards.c).
 */
void
dedup_catalog_relation_reset(void)
{
	memset(dedup_relids, 0, sizeof(dedup_relids));
	dedup_relids_resets++;
}

/*
 * How many times the OIDs were forgotten: what a layer above derived from
 * them (the shard maps) holds while it stays.
 */
uint64
dedup_catalog_relation_generation(void)
{
	return dedup_relids_resets;
}

/* The table an index or sequence of the extension belongs to; a table itself. */
static DedupRelation
dedup_relation_table(DedupRelation rel)
{
	switch (rel)
	{
		case DEDUP_REL_CLAIMS_PKEY:
			return DEDUP_REL_CLAIMS;
		case DEDUP_REL_SCOPES_PKEY:
			return DEDUP_REL_SCOPES;
		case DEDUP_REL_OUTBOX_KEYS_PKEY:
			return DEDUP_REL_OUTBOX_KEYS;
		case DEDUP_REL_STREAMS_PKEY:
			return DEDUP_REL_STREAMS;
		case DEDUP_REL_OUTBOX_PKEY:
		case DEDUP_REL_OUTBOX_SEQ:
			return DEDUP_REL_OUTBOX;
		case DEDUP_REL_HISTORY_BLOCKS_PKEY:
			return DEDUP_REL_HISTORY_BLOCKS;
		case DEDUP_REL_OUTBOX_RETRY_PKEY:
			return DEDUP_REL_OUTBOX_RETRY;
		case DEDUP_REL_OUTBOX_DEAD_PKEY:
			return DEDUP_REL_OUTBOX_DEAD;
		default:
			return rel;
	}
}

/*
 * The owner of one of the extension's tables: of the table, or of the shell
 * Citus keeps of it where it is distributed.
 */
Oid
dedup_catalog_relation_owner(DedupRelation rel)
{
	Relation	r;
	Oid			owner;

	if (dedup_catalog_relation_hashed(rel))
		r = relation_open(dedup_catalog_relation_lookup(rel), AccessShareLock);
	else
		r = dedup_catalog_relation_open(rel, AccessShareLock);
	owner = r->rd_rel->relowner;
	relation_close(r, NoLock);
	return owner;
}

/* The OID of type dedup_fingerprint: that of the key of dedup.claims. */
Oid
dedup_catalog_fingerprint_type(void)
{
	return get_atttype(dedup_catalog_relation_lookup(DEDUP_REL_CLAIMS), 1);
}

/*
 * The fingerprint's equality operator, schema-qualified, for SQL text:
 * "OPERATOR(schema.=)".
 */
char *
dedup_catalog_fingerprint_eq(void)
{
	HeapTuple	tuple = SearchSysCache1(TYPEOID, ObjectIdGetDatum(dedup_catalog_fingerprint_type()));
	Oid			nsp;

	if (!HeapTupleIsValid(tuple))
		elog(ERROR, "cache lookup failed for type dedup_fingerprint");
	nsp = ((Form_pg_type) GETSTRUCT(tuple))->typnamespace;
	ReleaseSysCache(tuple);
	return psprintf("OPERATOR(%s.=)", quote_identifier(get_namespace_name(nsp)));
}

/* A shard's relation on this node: NAME_SHARDID in dedup's schema, or none */
Oid
dedup_catalog_shard_relid(const char *relname, int64 shardid)
{
	Oid			nsp = get_namespace_oid(DEDUP_INTERNAL_SCHEMA, true);
	char	   *name = psprintf("%s_" INT64_FORMAT, relname, shardid);
	Oid			relid = OidIsValid(nsp) ? get_relname_relid(name, nsp) : InvalidOid;

	pfree(name);
	return relid;
}

/*
 * The relation on this node of a table Citus keeps in one shard (a
 * reference table), named as relname's shard; *local says whether its
 * placement is here.
 */
static Oid
catalog_single_shard(Oid relid, const char *relname, bool *local)
{
	DedupCitusShard *shards;
	int			n = dedup_citus_shards(relid, &shards);
	Oid			result = InvalidOid;

	*local = (n == 1 && shards[0].local);
	if (*local)
		result = dedup_catalog_shard_relid(relname, shards[0].shardid);
	pfree(shards);
	return result;
}

/*
 * OID of one of the extension's tables or indexes in the internal schema,
 * or InvalidOid when there is none (the extension is not installed, or at a
 * version that has no such relation).  Of a table Citus keeps in one shard
 * (a reference table: dedup.scopes, dedup.grants on a cluster), the OID is
 * that of the shard on this node, where the rows are; of a table distributed
 * by hash, the shell's (shards.c finds a key's shard).
 */
Oid
dedup_catalog_relation_lookup(DedupRelation rel)
{
	dedup_relcache_register_self();
	/* a cheap check, so that a re-created extension is seen at once */
	AcceptInvalidationMessages();
	while (!OidIsValid(dedup_relids[rel]))
	{
		uint64		resets = dedup_relids_resets;
		Oid			nsp = get_namespace_oid(DEDUP_INTERNAL_SCHEMA, true);
		DedupRelation table = dedup_relation_table(rel);
		Oid			relid = OidIsValid(nsp) ?
			get_relname_relid(dedup_relnames[rel], nsp) : InvalidOid;
		Oid			table_relid = OidIsValid(nsp) ?
			get_relname_relid(dedup_relnames[table], nsp) : InvalidOid;
		DedupCitusKind kind;
		bool		remote = false;
		bool		worker;

		if (!OidIsValid(relid))
			return InvalidOid;
		/* Citus's catalogs, read under a lock that takes in invalidations */
		kind = dedup_citus_kind(table_relid);
		worker = dedup_citus_is_worker();
		if (kind == DEDUP_CITUS_SINGLE && rel != DEDUP_REL_OUTBOX_SEQ)
		{
			bool		local;
			Oid			shard = catalog_single_shard(table_relid, dedup_relnames[rel], &local);

			remote = !local || !OidIsValid(shard);
			if (!remote)
				relid = shard;
		}
		if (resets != dedup_relids_resets)
			continue;			/* an invalidation came: look the name up
								 * again */
		dedup_relkind[rel] = kind;
		dedup_relremote[rel] = remote;
		dedup_citus_worker = worker;
		dedup_relids[rel] = relid;
	}
	return dedup_relids[rel];
}

/*
 * Whether this node is a worker of a Citus cluster, where only the shards of
 * dedup's distributed tables are dedup's to use.
 */
bool
dedup_catalog_is_citus_worker(void)
{
	(void) dedup_catalog_relation_lookup(DEDUP_REL_CLAIMS);
	return dedup_citus_worker;
}

/* Whether Citus distributes one of dedup's tables by hash of its key. */
bool
dedup_catalog_relation_hashed(DedupRelation rel)
{
	return OidIsValid(dedup_catalog_relation_lookup(rel)) && dedup_relkind[rel] == DEDUP_CITUS_HASH;
}

/*
 * OID of one of the extension's tables or indexes in the internal schema,
 * or an error that says the extension is not (yet) installed here, or that
 * the relation is not on this node of a Citus cluster.
 */
Oid
dedup_catalog_relation_oid(DedupRelation rel)
{
	Oid			relid = dedup_catalog_relation_lookup(rel);

	if (!OidIsValid(relid))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("extension \"dedup\" is not installed in this database"),
				 errdetail("Relation \"%s.%s\" does not exist.",
						   DEDUP_INTERNAL_SCHEMA, dedup_relnames[rel]),
				 errhint("Run CREATE EXTENSION dedup.")));

	/*
	 * each node's own list of the buckets of a distributed dedup.claims
	 * (bucket.c)
	 */
	if (dedup_citus_worker && dedup_relkind[rel] == DEDUP_CITUS_NONE &&
		!(dedup_relation_table(rel) == DEDUP_REL_BUCKETS && dedup_catalog_relation_hashed(DEDUP_REL_CLAIMS)))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("dedup's %s run on the coordinator of a Citus cluster, not on its workers",
						dedup_relation_table(rel) == DEDUP_REL_BUCKETS ? "buckets" :
						dedup_relation_table(rel) == DEDUP_REL_HISTORY_GENERATIONS ||
						dedup_relation_table(rel) == DEDUP_REL_HISTORY_BLOCKS ? "histories" :
						dedup_relation_table(rel) == DEDUP_REL_CLAIMS ? "claims" :
						dedup_relation_table(rel) == DEDUP_REL_STREAMS ? "sequence marks" : "outbox tables"),
				 errdetail("This node is a worker of a Citus cluster; table \"%s.%s\" is not distributed, so its copy here is not the one the coordinator's calls use.",
						   DEDUP_INTERNAL_SCHEMA, dedup_relnames[dedup_relation_table(rel)]),
				 errhint("Connect to the coordinator to call this function.")));
	if (dedup_relkind[rel] == DEDUP_CITUS_HASH)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("this call does not reach the shards of dedup.%s", dedup_relnames[dedup_relation_table(rel)]),
				 errdetail("Table \"%s.%s\" is distributed by Citus: dedup reaches a row of it through its key, on the node that holds the key's shard.",
						   DEDUP_INTERNAL_SCHEMA, dedup_relnames[dedup_relation_table(rel)]),
				 errhint("Call the functions that take a key, or query the table through the coordinator; the README's \"Distributed (Citus)\" section lists what runs on a cluster.")));
	if (dedup_relremote[rel])
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("table \"%s.%s\" has no placement on this node of the Citus cluster",
						DEDUP_INTERNAL_SCHEMA, dedup_relnames[dedup_relation_table(rel)]),
				 errdetail("Citus keeps it in one shard, and this node holds no copy of it."),
				 errhint("Add this node to the cluster's metadata (citus_set_coordinator_host on the coordinator), or call from a node that holds it.")));
	return relid;
}

/*
 * Open one of the extension's tables or indexes with a lock, the way
 * RangeVarGetRelidExtended() does: the OID found by name may belong to a
 * relation being dropped (DROP EXTENSION in a transaction still in
 * progress), so once the lock is held, and the invalidations that came with
 * it are processed, look the name up again.  The same OID: it is ours and
 * stays so while we hold the lock.  None: the extension is gone (42P01, from
 * dedup_catalog_relation_oid).  Another: the extension was dropped and created again
 * while we waited, and the function being run, its argument and result
 * types are the old extension's, so the call cannot go on: 42P01 as well,
 * asking for the statement to be run again.
 */
Relation
dedup_catalog_relation_open(DedupRelation rel, LOCKMODE lockmode)
{
	Oid			relid = dedup_catalog_relation_oid(rel);

	LockRelationOid(relid, lockmode);
	if (dedup_catalog_relation_oid(rel) != relid)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("extension \"dedup\" was dropped while this call waited for it"),
				 errdetail("Relation \"%s.%s\" was dropped and created again by a transaction that committed meanwhile.",
						   DEDUP_INTERNAL_SCHEMA, dedup_relnames[rel]),
				 errhint("Run the statement again.")));
	return relation_open(relid, NoLock);
}

/*
 * The snapshot a backend's cache of one of dedup's tables (the scopes'
 * settings, scope.c; the grants, privileges.c) is filled with, registered:
 * taken after the table is locked, and so after every invalidation sent
 * before it was read, so that a change committed later invalidates what was
 * read.  A parallel worker (reached only through a user function wrongly
 * marked PARALLEL SAFE) cannot take one and reads with the transaction's.
 */
Snapshot
dedup_catalog_cache_snapshot(void)
{
	return RegisterSnapshot(IsInParallelMode() ? GetTransactionSnapshot() : GetLatestSnapshot());
}
