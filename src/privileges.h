/*-------------------------------------------------------------------------
 *
 * privileges.h
 *	  Who may use a scope (privileges.c): the privileges of dedup.grants,
 *	  their check, cached per backend, and the error that refuses a role.
 *
 * Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.
 *-------------------------------------------------------------------------
 */
#ifndef DEDUP_PRIVILEGES_H
#define DEDUP_PRIVILEGES_H

#include "compat.h"

/* privileges on a scope (dedup.grants), as bits */
#define DEDUP_PRIV_USAGE	0x01	/* claims, records, outbox puts, settings */
#define DEDUP_PRIV_RELAY	0x02	/* taking, acking, nacking outbox events */

extern bool dedup_privileges_allow(const text *scope, Oid roleid, int privileges);
pg_noreturn extern void dedup_privileges_denied(const text *scope, Oid roleid,
												int privileges);

#endif							/* DEDUP_PRIVILEGES_H */
