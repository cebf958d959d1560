/*-------------------------------------------------------------------------
 *
 * worker.h
 *	  The cleanup's launcher and per-database workers (worker.c).
 *
 * Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.
 *-------------------------------------------------------------------------
 */
#ifndef DEDUP_WORKER_H
#define DEDUP_WORKER_H

extern void dedup_worker_register_launcher(void);

#endif							/* DEDUP_WORKER_H */
