/*-------------------------------------------------------------------------
 *
 * compat.h
 *	  What differs between the PostgreSQL majors dedup builds for (15 to
 *	  18), in one place: each difference of PostgreSQL's C API that dedup
 *	  meets is one name here, which the other files call whatever the
 *	  version; no other file tests PG_VERSION_NUM.
 *
 *	  16: heap_update() returns which indexes the new version needs
 *	      (TU_UpdateIndexes *).
 *	  17: storage/backendid.h and MyBackendId are gone (MyProcNumber, from
 *	      0); LockHeldByMe() takes whether a stronger lock counts;
 *	      getIdentitySequence() takes the relation, not its OID.
 *	  18: pg_attribute_noreturn() is gone (pg_noreturn, before the
 *	      declaration); index_beginscan() takes instrumentation.
 *
 * Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.
 *-------------------------------------------------------------------------
 */
#ifndef DEDUP_COMPAT_H
#define DEDUP_COMPAT_H

#include "access/genam.h"
#include "access/heapam.h"
#include "catalog/dependency.h"
#include "miscadmin.h"
#include "storage/lock.h"
#include "utils/rel.h"

#if PG_VERSION_NUM < 150000
#error "dedup needs PostgreSQL 15 or later"
#endif

#if PG_VERSION_NUM >= 170000
#include "storage/procnumber.h"
#else
#include "storage/backendid.h"
#endif

/*
 * A function that never returns: "pg_noreturn extern void f(...);".  18
 * defines pg_noreturn (C11's _Noreturn); before it, the same, by hand.
 */
#ifndef pg_noreturn
#if defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L
#define pg_noreturn _Noreturn
#else
#define pg_noreturn __attribute__((noreturn))
#endif
#endif

/*
 * This backend's slot among MaxBackends, from 0; -1 for a process that has
 * none (an auxiliary process, or one not yet set up).
 */
static inline int
dedup_my_backend_slot(void)
{
#if PG_VERSION_NUM >= 170000
	int			slot = MyProcNumber;
#else
	int			slot = MyBackendId - 1;
#endif

	return slot >= 0 && slot < MaxBackends ? slot : -1;
}

/* heap_update(), without the indexes' answer of 16: its caller asks the tuple */
static inline TM_Result
dedup_heap_update(Relation rel, ItemPointer otid, HeapTuple tuple, CommandId cid,
				  Snapshot crosscheck, bool wait, TM_FailureData *tmfd,
				  LockTupleMode *lockmode)
{
#if PG_VERSION_NUM >= 160000
	TU_UpdateIndexes update_indexes;

	return heap_update(rel, otid, tuple, cid, crosscheck, wait, tmfd, lockmode,
					   &update_indexes);
#else
	return heap_update(rel, otid, tuple, cid, crosscheck, wait, tmfd, lockmode);
#endif
}

/* Whether this backend holds the lock in exactly this mode */
static inline bool
dedup_lock_held_by_me(const LOCKTAG *tag, LOCKMODE mode)
{
#if PG_VERSION_NUM >= 170000
	return LockHeldByMe(tag, mode, false);
#else
	return LockHeldByMe(tag, mode);
#endif
}

/* The sequence of an identity column of rel (InvalidOid if missing_ok) */
static inline Oid
dedup_identity_sequence(Relation rel, AttrNumber attnum, bool missing_ok)
{
#if PG_VERSION_NUM >= 170000
	return getIdentitySequence(rel, attnum, missing_ok);
#else
	return getIdentitySequence(RelationGetRelid(rel), attnum, missing_ok);
#endif
}

/* index_beginscan(), uninstrumented */
static inline IndexScanDesc
dedup_index_beginscan(Relation heap, Relation index, Snapshot snapshot,
					  int nkeys, int norderbys)
{
#if PG_VERSION_NUM >= 180000
	return index_beginscan(heap, index, snapshot, NULL, nkeys, norderbys);
#else
	return index_beginscan(heap, index, snapshot, nkeys, norderbys);
#endif
}

#endif							/* DEDUP_COMPAT_H */
