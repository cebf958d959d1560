/*-------------------------------------------------------------------------
 *
 * checks.h
 *	  The limits on what callers may pass, and the argument checks every
 *	  public function applies (checks.c).
 *
 * Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.
 *-------------------------------------------------------------------------
 */
#ifndef DEDUP_CHECKS_H
#define DEDUP_CHECKS_H

#include "fmgr.h"
#include "utils/timestamp.h"

/* Limits on what callers may pass (documented in the README). */
#define DEDUP_MAX_SCOPE_BYTES	200
#define DEDUP_MAX_BATCH_KEYS	100000
#define DEDUP_MAX_CLEANUP_BATCH	1000000

extern void dedup_check_writable(const char *funcname);
extern void dedup_check_scope_name(const text *scope, const char *what);
extern text *dedup_check_name_arg(FunctionCallInfo fcinfo, int argno,
								  const char *what);
extern bool dedup_check_bool_arg(FunctionCallInfo fcinfo, int argno, const char *what);
extern Interval *dedup_check_interval_arg(FunctionCallInfo fcinfo, int argno,
										  const char *what);
extern void dedup_check_interval(const Interval *value, const char *what,
								 bool allow_zero, TimestampTz from);
extern TimestampTz dedup_check_timestamp_plus(TimestampTz t, const Interval *span);

#endif							/* DEDUP_CHECKS_H */
