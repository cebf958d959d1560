/*-------------------------------------------------------------------------
 *
 * history.h
 *	  The history tier of a scope (history.c): what its expired claims
 *	  leave behind, as blocked Bloom filters.  The layers below it ask it
 *	  through hooks module.c installs (key_store_history_hook,
 *	  dedup_filter_history_hook); the cleanup passes its fold and expiry to
 *	  the bucket steps.
 *
 * Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.
 *-------------------------------------------------------------------------
 */
#ifndef DEDUP_HISTORY_H
#define DEDUP_HISTORY_H

#include "utils/timestamp.h"

#include "fingerprint.h"

extern bool dedup_history_generation_is(int64 generation, TimestampTz opened_at,
										int64 version);
extern bool dedup_history_may_contain(int32 history_id, const DedupFingerprint *fp);
extern int64 dedup_history_fold(Oid bucket_relid);
extern int64 dedup_history_expire(void);

#endif							/* DEDUP_HISTORY_H */
