/*-------------------------------------------------------------------------
 *
 * scope.h
 *	  A scope's settings, with the GUC defaults, and a call's first use of
 *	  its scope: the settings read, the caller's privilege checked
 *	  (scope.c; the privileges are privileges.c's).
 *
 * Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.
 *-------------------------------------------------------------------------
 */
#ifndef DEDUP_SCOPE_H
#define DEDUP_SCOPE_H

#include "fmgr.h"
#include "utils/timestamp.h"

#include "privileges.h"
#include "scope_counters.h"

/* per-scope settings with GUC defaults, in the column order */
typedef enum DedupScopeSetting
{
	DEDUP_SCOPE_TTL,
	DEDUP_SCOPE_LEASE,
	DEDUP_SCOPE_RETENTION,
	DEDUP_SCOPE_NSETTINGS
} DedupScopeSetting;

typedef struct DedupScopeSettings
{
	Interval	value[DEDUP_SCOPE_NSETTINGS];	/* by DedupScopeSetting */
	int32		max_attempts;
	bool		strict;			/* sequence_mode: strict, not monotonic */
	bool		configured;		/* dedup.scopes has a row for the scope */
	int32		history_id;		/* of the scope's history; 0 when it has none */
	Interval	history;		/* the history's window */
	double		false_positive_rate;	/* the history's */
	DedupScopeCounters *counters;	/* the scope's call counters, or NULL */
} DedupScopeSettings;

extern void dedup_scope_use(const text *scope, int privileges,
							DedupScopeSettings *settings);
extern bool dedup_scope_allows(const text *scope, Oid roleid, int privileges,
							   DedupScopeSettings *settings);
extern text *dedup_scope_of_call(FunctionCallInfo fcinfo, const char *what,
								 const char *funcname, int privileges,
								 DedupScopeSettings *settings);

#endif							/* DEDUP_SCOPE_H */
