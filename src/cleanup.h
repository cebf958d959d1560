/*-------------------------------------------------------------------------
 *
 * cleanup.h
 *	  The cleanup (cleanup.c): one batch of a cleanup pass, as the
 *	  background worker (worker.c) and dedup_cleanup_batch() run it.
 *
 * Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.
 *-------------------------------------------------------------------------
 */
#ifndef DEDUP_CLEANUP_H
#define DEDUP_CLEANUP_H

/*
 * A cleanup pass is a sequence of batches, each in its own transaction.
 * A position says where a batch starts: 0 starts a pass, and each batch
 * returns the position of the next, or DEDUP_CLEANUP_DONE after the last.
 */
#define DEDUP_CLEANUP_DONE	(-1)

/* one batch of a pass, in the current transaction */
extern int64 dedup_cleanup_run_batch(int64 *position, int batch_size);
extern bool dedup_cleanup_position_valid(int64 position);
extern int64 dedup_cleanup_next_stage(int64 position);

#endif							/* DEDUP_CLEANUP_H */
