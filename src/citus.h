/*-------------------------------------------------------------------------
 *
 * citus.h
 *	  What Citus's metadata says of a relation (citus.c): its kind
 *	  (pg_dist_partition), its shards and their placements (pg_dist_shard,
 *	  pg_dist_placement), and whether this node is a worker
 *	  (pg_dist_local_group); read without Citus's code.
 *
 * Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.
 *-------------------------------------------------------------------------
 */
#ifndef DEDUP_CITUS_H
#define DEDUP_CITUS_H

/* Citus's kind of one of dedup's relations, from pg_dist_partition */
typedef enum DedupCitusKind
{
	DEDUP_CITUS_NONE,			/* not Citus's: a table of this node */
	DEDUP_CITUS_HASH,			/* distributed by hash of its key */
	DEDUP_CITUS_SINGLE			/* one shard: a reference or Citus local table */
} DedupCitusKind;

/*
 * One shard of a table Citus distributes, as its metadata says; the last
 * three fields are the shard map's (shards.c), left unknown here.
 */
typedef struct DedupCitusShard
{
	int32		min;			/* the range of hashes it holds */
	int32		max;
	int64		shardid;
	int32		colocationid;	/* of its table */
	int32		shardindex;		/* its place among the table's shards, by
								 * range */
	int32		group;			/* the node group of its placement (of a
								 * hash-distributed table: one) */
	bool		local;			/* its placement is on this node */
	int32		partition;		/* the outbox partition it holds, once found;
								 * -1 before */
	Oid			heap;			/* its table here, once looked up */
	Oid			index;			/* its primary key here, once looked up */
} DedupCitusShard;

extern DedupCitusKind dedup_citus_kind(Oid relid);
extern int	dedup_citus_shards(Oid relid, DedupCitusShard **result);
extern bool dedup_citus_is_worker(void);

#endif							/* DEDUP_CITUS_H */
