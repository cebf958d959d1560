/*-------------------------------------------------------------------------
 *
 * dedup_test.c
 *	  Test-only functions for dedup's isolation specs: hold the key lock of
 *	  a fingerprint (store.h) until the end of the transaction, as a call
 *	  between its look-up and its write holds it for an instant, so that a
 *	  spec can pause another caller inside that window.
 *
 *	  CREATE FUNCTION dedup_test_hold_key_lock(fingerprint bytea) RETURNS void
 *	  AS 'dedup_test' LANGUAGE C STRICT;
 *
 * Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "storage/lock.h"
#include "utils/builtins.h"

#include "store.h"

PG_MODULE_MAGIC;

PG_FUNCTION_INFO_V1(dedup_test_hold_key_lock);
Datum
dedup_test_hold_key_lock(PG_FUNCTION_ARGS)
{
	bytea	   *raw = PG_GETARG_BYTEA_PP(0);
	DedupFingerprint fp;
	LOCKTAG		tag;

	if (VARSIZE_ANY_EXHDR(raw) != DEDUP_FINGERPRINT_LEN)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("a fingerprint has %d bytes", DEDUP_FINGERPRINT_LEN)));
	memcpy(fp.bytes, VARDATA_ANY(raw), DEDUP_FINGERPRINT_LEN);
	dedup_key_locktag(&tag, &fp);
	(void) LockAcquire(&tag, ExclusiveLock, false, false);
	PG_RETURN_VOID();
}
