/*-------------------------------------------------------------------------
 *
 * settings.h
 *	  The settings (GUCs) of the dedup extension (settings.c).
 *
 * Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.
 *-------------------------------------------------------------------------
 */
#ifndef DEDUP_SETTINGS_H
#define DEDUP_SETTINGS_H

extern int	dedup_default_ttl;	/* seconds */
extern int	dedup_default_lease;	/* seconds */
extern int	dedup_default_retention;	/* seconds */
extern int	dedup_cleanup_batch_size;	/* rows */
extern int	dedup_cleanup_pause;	/* milliseconds */
extern char *dedup_cleanup_databases;
extern char *dedup_cleanup_role;
extern int	dedup_cleanup_interval; /* seconds */
extern bool dedup_cleanup_enabled;
extern int	dedup_outbox_max_attempts;
extern int	dedup_bucket_interval;	/* seconds; 0: follows the ttls */
extern int	dedup_bucket_max_size;	/* kB of the current bucket's index; -1:
									 * derived; 0: none */
extern bool dedup_require_declared_scopes;
extern bool dedup_outbox_fast_path; /* outbox_fast.c */
extern int	dedup_bucket_filter_memory; /* MB: the sealed buckets' filters
										 * (filter.c) */
extern int	dedup_outbox_aggregate_locks;	/* entries: the producers'
											 * aggregates (outbox.c) */

extern void dedup_settings_define(void);

#endif							/* DEDUP_SETTINGS_H */
