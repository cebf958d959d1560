/*-------------------------------------------------------------------------
 *
 * outbox_fast.h
 *	  The relay's fast path (outbox_fast.c): the take and the ack of a relay
 *	  keeping up, which give way to the PL/pgSQL functions in every case a
 *	  rule of theirs applies.
 *
 * Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.
 *-------------------------------------------------------------------------
 */
#ifndef DEDUP_OUTBOX_FAST_H
#define DEDUP_OUTBOX_FAST_H

#include "funcapi.h"
#include "datatype/timestamp.h"

#include "fingerprint.h"
#include "scope.h"

extern void outbox_fast_plans_check(void);
extern bool outbox_fast_take(ReturnSetInfo *rsinfo, bool with_id, const DedupFingerprint *part,
							 text *topic, int32 batch_size, const Interval *lease,
							 DedupScopeSettings *settings);
extern int32 outbox_fast_ack(const DedupFingerprint *part, int64 batch_id, Oid caller);

#endif							/* DEDUP_OUTBOX_FAST_H */
