/*-------------------------------------------------------------------------
 *
 * record.c
 *	  Idempotency records, for work that cannot ride inside one transaction
 *	  (the Stripe / IETF Idempotency-Key / Lambda Powertools pattern):
 *	  dedup_begin(), dedup_extend(), dedup_complete(), dedup_release() and
 *	  dedup_lookup().
 *
 * A record is a row of dedup.claims with a record part (store.h): it shares
 * the key space, the expiry rule and the cleanup with plain claims, and a
 * plain claim reads as a record that completed with its transaction.
 *
 *	absent --begin--> processing (attempt 1, lease)
 *	expired or released --begin--> processing (attempt + 1, lease)
 *	processing, lease live --begin--> in_progress (at once, never waiting)
 *	processing, lease passed --begin--> processing (taken over: attempt + 1)
 *	processing, its attempt --extend--> processing (lease from now, expiry after)
 *	processing --complete--> complete (response stored, expires after ttl)
 *	processing --release--> released
 *	complete --begin--> replay (the stored response, errors included)
 *	any, other request fingerprint --begin--> mismatch
 *
 * A processing record expires (counts as absent, and the cleanup deletes
 * it) one ttl after its lease ends, a complete one a ttl after it completed:
 * the ttl its dedup_begin() was given (1.1), else the scope's.  A released
 * record counts as absent at once, but its row stays, with its attempt
 * count, until then.  A begin counts on from any record still in the table
 * (released, expired or taken over), so that a holder that lost its lease
 * and comes back late cannot pass for a later holder, whose attempt would
 * otherwise be 1 again.  Only once the cleanup has deleted the row (lease +
 * ttl after the last begin) does the count start over.
 *
 * dedup_complete(), dedup_release() and dedup_extend() take the attempt
 * dedup_begin() returned, and refuse one that is not the record's (55006).
 * dedup_extend() requires it; to the others a caller may leave it out
 * unless the key was taken over (taken_over, kept through a release until
 * the record would have expired, never past an expiry): only then may an
 * earlier holder still be at work, unable to tell itself from the current
 * one.
 *
 * Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_type_d.h"
#include "funcapi.h"
#include "utils/builtins.h"

#include "catalog.h"
#include "checks.h"
#include "fingerprint.h"
#include "routing.h"
#include "scope.h"
#include "scope_counters.h"
#include "store.h"

/*
 * Columns of dedup_begin_result; a database still at 1.0 has the first 7
 * (no request_fingerprint).
 */
#define BEGIN_RESULT_NATTS 8

/* What dedup_begin answers (its outcome column: the names below) */
typedef enum BeginOutcome
{
	BEGIN_STARTED,				/* the caller holds the record now */
	BEGIN_REPLAY,				/* complete (or a plain claim): its response */
	BEGIN_IN_PROGRESS,			/* another holder's lease runs, or its write */
	BEGIN_MISMATCH,				/* live, for another request */
} BeginOutcome;

static const char *const begin_outcome_names[] = {
	[BEGIN_STARTED] = "started",
	[BEGIN_REPLAY] = "replay",
	[BEGIN_IN_PROGRESS] = "in_progress",
	[BEGIN_MISMATCH] = "mismatch",
};

/* Columns of dedup_lookup's result */
#define LOOKUP_RESULT_NATTS 10

/*
 * A fingerprint in a row a client reads: its text, 32 hex digits (a driver
 * reads a row as one value in binary, and cannot read a dedup_fingerprint
 * in it), or the dedup_fingerprint itself where the row's column is still
 * of that type (dedup_lookup's, in a database at 1.0: the same text).
 */
static Datum
record_fingerprint_datum(TupleDesc desc, int attno, const DedupFingerprint *fp)
{
	if (TupleDescAttr(desc, attno)->atttypid == TEXTOID)
		return CStringGetTextDatum(dedup_fingerprint_hex(fp));
	return PointerGetDatum(fp);
}

static const char *
record_status_name(char status)
{
	switch (status)
	{
		case RECORD_PROCESSING:
			return "processing";
		case RECORD_RELEASED:
			return "released";
		default:
			return "complete";
	}
}

/*
 * How long a record stays once its lease ends or it completes: the ttl its
 * dedup_begin() was given, else the scope's.
 */
static Interval *
record_ttl(DedupRecord *record, DedupScopeSettings *settings)
{
	return record->has_ttl ? &record->ttl : &settings->value[DEDUP_SCOPE_TTL];
}

/*
 * The request fingerprint argument, if any: dedup_fingerprint(request,
 * ignore), ignore an optional array argument of top-level fields to leave
 * out.
 */
static bool
record_request_arg(FunctionCallInfo fcinfo, int argno, int ignore_argno, DedupFingerprint *fp)
{
	ArrayType  *ignore = NULL;

	if (PG_NARGS() > ignore_argno && !PG_ARGISNULL(ignore_argno))
	{
		ignore = PG_GETARG_ARRAYTYPE_P(ignore_argno);
		if (ARR_NDIM(ignore) > 1)
			ereport(ERROR,
					(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
					 errmsg("ignore must be a one-dimensional array of field names")));
		if (ARR_NDIM(ignore) == 0)
			ignore = NULL;
	}
	if (PG_ARGISNULL(argno))
	{
		if (ignore != NULL)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("ignore was given without a request"),
					 errhint("The fields named in ignore are left out of the request's fingerprint; pass the request too.")));
		return false;
	}
	dedup_fingerprint_of_jsonb(PG_GETARG_JSONB_P(argno), ignore, fp);
	return true;
}

static bool
record_request_matches(const KeyRow *row, bool has_request, const DedupFingerprint *request)
{
	if (!row->has_record)
		return true;			/* a plain claim stored no request */
	if (row->record.has_request != has_request)
		return false;
	return !has_request ||
		dedup_fingerprint_compare(&row->record.request, request) == 0;
}

/*
 * dedup_begin(scope text, key <text|bytea|uuid|dedup_fingerprint|bigint>,
 *			   request jsonb DEFAULT NULL, lease interval DEFAULT NULL)
 * dedup_begin(scope text, key <type>, request jsonb, lease interval,
 *			   ttl interval, ignore text[] DEFAULT NULL)
 *	RETURNS dedup_begin_result
 *
 * The second form (1.1) also takes the record's ttl, stored with it for
 * its expiry after its lease and after dedup_complete() (NULL: the
 * scope's), and the top-level fields of the request to leave out of its
 * fingerprint.  It is a signature of its own, with ttl required, so that a
 * call of 1.0's form never matches two functions.
 */
static Datum
record_begin(FunctionCallInfo fcinfo, int16 typlen)
{
	DedupScopeSettings settings;
	text	   *scope;
	Datum		route_result;
	DedupFingerprint fp;
	DedupFingerprint request;
	bool		has_request;
	Interval   *lease;
	Interval   *ttl;
	bool		has_ttl = false;
	KeyStore	ks;
	KeyRow		row;
	BeginOutcome outcome;
	bool		show_response = false;
	bool		claim_in_window = false;	/* an expired claim a history
											 * still counts */
	TupleDesc	tupdesc;
	Datum		values[BEGIN_RESULT_NATTS];
	bool		nulls[BEGIN_RESULT_NATTS];

	if (dedup_routing_route(fcinfo, DEDUP_REL_CLAIMS, DEDUP_ROUTE_KEY, typlen, &route_result))
		return route_result;
	scope = dedup_scope_of_call(fcinfo, "scope", "dedup_begin", DEDUP_PRIV_USAGE, &settings);

	dedup_fingerprint_key_arg(fcinfo, 1, scope, typlen, &fp);
	has_request = record_request_arg(fcinfo, 2, 5, &request);
	lease = dedup_check_interval_arg(fcinfo, 3, "lease");
	if (lease == NULL)
		lease = &settings.value[DEDUP_SCOPE_LEASE];
	ttl = PG_NARGS() > 4 ? dedup_check_interval_arg(fcinfo, 4, "ttl") : NULL;
	if (ttl != NULL)
		has_ttl = true;
	else
		ttl = &settings.value[DEDUP_SCOPE_TTL];
	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");

	key_store_open(&ks, DEDUP_REL_CLAIMS, scope, &fp, true);
	key_store_use_history(&ks, &settings);
	ks.whole_records = true;
	for (;;)
	{
		KeyState	state = key_store_find(&ks, &fp, KEY_BUSY_RETURN, &row);
		bool		take;
		bool		taken_over;
		int32		attempts;

		if (state == KEY_BUSY)
		{
			/* being written by a transaction in progress: never wait for it */
			outcome = BEGIN_IN_PROGRESS;
			break;
		}
		if (state == KEY_LIVE && !record_request_matches(&row, has_request, &request))
		{
			key_store_unlock(&row);
			outcome = BEGIN_MISMATCH;
			break;
		}
		if (state == KEY_LIVE &&
			(!row.has_record || row.record.status == RECORD_COMPLETE))
		{
			key_store_unlock(&row);
			outcome = BEGIN_REPLAY;
			show_response = true;
			break;
		}

		/*
		 * A plain claim of a scope with a history, expired within its window
		 * and not yet folded (history.c), counts as a live one: a record
		 * written over it would take it out of the history.
		 */
		if (state == KEY_EXPIRED && !row.has_record && ks.history_id != 0 &&
			row.expires_at > ks.history_from)
		{
			key_store_unlock(&row);
			outcome = BEGIN_REPLAY;
			claim_in_window = true;
			break;
		}
		if (state == KEY_LIVE && row.record.lease_until > ks.now)
		{
			key_store_unlock(&row);
			outcome = BEGIN_IN_PROGRESS;
			break;
		}

		/*
		 * absent, expired, released, or processing with its lease passed:
		 * take it; the attempts go on counting from any record still in the
		 * table
		 */
		take = state == KEY_LIVE;
		attempts = state != KEY_ABSENT && row.has_record ? row.record.attempts : 0;

		/*
		 * A takeover is remembered while the holder it took the key from may
		 * still be at work: through a release's tombstone until the record
		 * would have expired (a ttl after the last lease), not past an
		 * expiry, whether or not the cleanup has deleted the row yet
		 */
		taken_over = take ||
			(state == KEY_EXPIRED && row.has_record &&
			 row.record.status == RECORD_RELEASED && row.expires_at > ks.now &&
			 row.record.taken_over);
		if (attempts == PG_INT32_MAX)
		{
			key_store_unlock(&row);
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("key of scope \"%s\" was begun %d times", text_to_cstring(scope),
							PG_INT32_MAX),
					 errdetail("An attempt number is an integer; none is left to give."),
					 errhint("Release it and let the record expire, or use another key; nothing was changed.")));
		}
		if (!take)
		{
			memset(&row.record, 0, sizeof(DedupRecord));
			row.record.first_seen = ks.now;
		}
		row.record.taken_over = taken_over;
		row.has_record = true;
		row.record.status = RECORD_PROCESSING;
		row.record.attempts = attempts + 1;
		row.record.lease_until = dedup_check_timestamp_plus(ks.now, lease);
		row.record.has_request = has_request;
		if (has_request)
			row.record.request = request;
		row.record.has_ttl = has_ttl;
		if (has_ttl)
			row.record.ttl = *ttl;
		row.expires_at = dedup_check_timestamp_plus(row.record.lease_until, ttl);
		if (key_store_put(&ks, &fp, &row, row.expires_at, &row.record, KEY_BUSY_WAIT))
		{
			outcome = BEGIN_STARTED;
			break;
		}
	}
	key_store_close(&ks);
	if (outcome == BEGIN_STARTED)
		dedup_scope_counters_count(settings.counters, DEDUP_COUNT_RECORDS_STARTED, 1);
	else if (outcome == BEGIN_REPLAY)
		dedup_scope_counters_count(settings.counters, DEDUP_COUNT_RECORDS_REPLAYED, 1);

	memset(nulls, true, sizeof(nulls));
	values[0] = CStringGetTextDatum(begin_outcome_names[outcome]);
	nulls[0] = false;
	if (row.has_record || row.state == KEY_LIVE || claim_in_window)
	{
		/* status */
		values[1] = CStringGetTextDatum(row.has_record ?
										record_status_name(row.record.status) : "complete");
		nulls[1] = false;
	}
	if (row.has_record)
	{
		if (show_response && row.record.has_response_code)
		{
			values[2] = Int32GetDatum(row.record.response_code);
			nulls[2] = false;
		}
		if (show_response && row.record.response)
		{
			values[3] = JsonbPGetDatum(row.record.response);
			nulls[3] = false;
		}
		values[4] = Int32GetDatum(row.record.attempts);
		values[5] = TimestampTzGetDatum(row.record.lease_until);
		values[6] = TimestampTzGetDatum(row.record.first_seen);
		nulls[4] = nulls[5] = nulls[6] = false;
		if (row.record.status == RECORD_COMPLETE)
			nulls[5] = true;	/* no lease once complete */

		/*
		 * the stored request's fingerprint: on a mismatch, the other one (a
		 * database at 1.0 has no such column)
		 */
		nulls[7] = !row.record.has_request || tupdesc->natts <= 7;
		if (!nulls[7])
			values[7] = record_fingerprint_datum(tupdesc, 7, &row.record.request);
	}
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(tupdesc), values, nulls)));
}

/*
 * Find the processing record that dedup_complete(), dedup_release() or
 * dedup_extend() acts
 * on, and check that the caller holds its lease.  Returns with the key lock
 * held.  attempt < 0 means "not given".
 */
static void
record_find_held(KeyStore *ks, const DedupFingerprint *fp, int32 attempt,
				 const char *funcname, KeyRow *row)
{
	key_store_find(ks, fp, KEY_BUSY_WAIT, row);
	if (row->state == KEY_ABSENT || row->state == KEY_EXPIRED)
	{
		key_store_unlock(row);
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("key of scope \"%s\" has no idempotency record",
						text_to_cstring(ks->scope)),
				 row->state == KEY_EXPIRED && row->has_record &&
				 row->record.status == RECORD_RELEASED ?
				 errdetail("It was released by attempt %d.", row->record.attempts) :
				 row->state == KEY_EXPIRED ?
				 errdetail("Its record expired at %s.",
						   timestamptz_to_str(row->expires_at)) :
				 errdetail("It was never begun, or was released or cleaned up."),
				 errhint("Call dedup_begin() before %s().", funcname)));
	}
	if (!row->has_record)
	{
		key_store_unlock(row);
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("key of scope \"%s\" is not processing",
						text_to_cstring(ks->scope)),
				 errdetail("It was claimed by dedup_claim(), which completes with its transaction.")));
	}

	/*
	 * A caller whose attempt is not the record's lost the key to a takeover,
	 * whether the taker is still processing or has completed it since.
	 */
	if (attempt >= 0 && attempt != row->record.attempts)
	{
		int32		holder = row->record.attempts;
		bool		processing = row->record.status == RECORD_PROCESSING;

		key_store_unlock(row);
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_IN_USE),
				 errmsg("lease of key of scope \"%s\" was taken over",
						text_to_cstring(ks->scope)),
				 processing ?
				 errdetail("Attempt %d holds the key now; the caller's attempt is %d.",
						   holder, attempt) :
				 errdetail("Attempt %d took the key over and completed it; the caller's attempt is %d.",
						   holder, attempt),
				 errhint("Leave the key to attempt %d; nothing was changed.", holder)));
	}

	/*
	 * A caller that gives no attempt is the holder, unless the key was ever
	 * taken over (begun again while a holder's lease had passed and its row
	 * was live): that holder may come back without an attempt, and could not
	 * be told apart.  A release is its holder giving the key back, and an
	 * expired record's holder has been gone a whole ttl: the next holder
	 * after either may leave the attempt out.
	 */
	if (attempt < 0 && row->record.taken_over)
	{
		int32		holder = row->record.attempts;

		key_store_unlock(row);
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_IN_USE),
				 errmsg("key of scope \"%s\" was taken over",
						text_to_cstring(ks->scope)),
				 errdetail("The record is at attempt %d, and an earlier holder's lease passed while it held the key: a caller that gives no attempt may be that holder.",
						   holder),
				 errhint("Pass the attempt number dedup_begin() returned; nothing was changed.")));
	}
	if (row->record.status != RECORD_PROCESSING)
	{
		key_store_unlock(row);
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("key of scope \"%s\" is not processing",
						text_to_cstring(ks->scope)),
				 errdetail("Its record is already complete.")));
	}
	if (attempt < 0 && row->record.lease_until <= ks->now)
	{
		TimestampTz until = row->record.lease_until;

		key_store_unlock(row);
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_IN_USE),
				 errmsg("lease of key of scope \"%s\" has expired",
						text_to_cstring(ks->scope)),
				 errdetail("The lease ended at %s; another caller may have taken the key over.",
						   timestamptz_to_str(until)),
				 errhint("Pass the attempt number dedup_begin() returned to act on an expired lease that nobody took over.")));
	}
}

static int32
record_attempt_arg(FunctionCallInfo fcinfo, int argno)
{
	int32		attempt;

	if (PG_NARGS() <= argno || PG_ARGISNULL(argno))
		return -1;
	attempt = PG_GETARG_INT32(argno);
	if (attempt < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("attempt must be at least 1")));
	return attempt;
}

/*
 * dedup_complete(scope text, key <type>, response_code integer,
 *				  response jsonb DEFAULT NULL, attempt integer DEFAULT NULL)
 */
static Datum
record_complete(FunctionCallInfo fcinfo, int16 typlen)
{
	DedupScopeSettings settings;
	text	   *scope;
	Datum		route_result;
	DedupFingerprint fp;
	int32		attempt;
	KeyStore	ks;
	KeyRow		row;

	if (dedup_routing_route(fcinfo, DEDUP_REL_CLAIMS, DEDUP_ROUTE_KEY, typlen, &route_result))
		return route_result;
	scope = dedup_scope_of_call(fcinfo, "scope", "dedup_complete", DEDUP_PRIV_USAGE, &settings);

	dedup_fingerprint_key_arg(fcinfo, 1, scope, typlen, &fp);
	attempt = record_attempt_arg(fcinfo, 4);

	key_store_open(&ks, DEDUP_REL_CLAIMS, scope, &fp, true);
	ks.whole_records = true;
	do
	{
		record_find_held(&ks, &fp, attempt, "dedup_complete", &row);
		row.record.status = RECORD_COMPLETE;
		row.record.has_response_code = !PG_ARGISNULL(2);
		row.record.response_code = PG_ARGISNULL(2) ? 0 : PG_GETARG_INT32(2);
		row.record.response = PG_ARGISNULL(3) ? NULL : PG_GETARG_JSONB_P(3);
		row.record.has_completed_at = true;
		row.record.completed_at = ks.now;
	} while (!key_store_put(&ks, &fp, &row,
							dedup_check_timestamp_plus(ks.now, record_ttl(&row.record, &settings)),
							&row.record, KEY_BUSY_WAIT));
	key_store_close(&ks);
	dedup_scope_counters_count(settings.counters, DEDUP_COUNT_RECORDS_COMPLETED, 1);
	PG_RETURN_VOID();
}

/*
 * dedup_release(scope text, key <type>, attempt integer DEFAULT NULL)
 */
static Datum
record_release(FunctionCallInfo fcinfo, int16 typlen)
{
	DedupScopeSettings settings;
	text	   *scope;
	Datum		route_result;
	DedupFingerprint fp;
	int32		attempt;
	KeyStore	ks;
	KeyRow		row;

	if (dedup_routing_route(fcinfo, DEDUP_REL_CLAIMS, DEDUP_ROUTE_KEY, typlen, &route_result))
		return route_result;
	scope = dedup_scope_of_call(fcinfo, "scope", "dedup_release", DEDUP_PRIV_USAGE, &settings);

	dedup_fingerprint_key_arg(fcinfo, 1, scope, typlen, &fp);
	attempt = record_attempt_arg(fcinfo, 2);

	key_store_open(&ks, DEDUP_REL_CLAIMS, scope, &fp, true);
	ks.whole_records = true;
	do
	{
		/* a tombstone that keeps the attempt count until the record expires */
		record_find_held(&ks, &fp, attempt, "dedup_release", &row);
		row.record.status = RECORD_RELEASED;
	} while (!key_store_put(&ks, &fp, &row, row.expires_at, &row.record, KEY_BUSY_WAIT));
	key_store_close(&ks);
	dedup_scope_counters_count(settings.counters, DEDUP_COUNT_RECORDS_RELEASED, 1);
	PG_RETURN_VOID();
}

/*
 * dedup_extend(scope text, key <type>, attempt integer,
 *				lease interval DEFAULT NULL) RETURNS timestamptz
 *
 * A heartbeat: the holder of attempt extends its lease to the time of the
 * call + lease (the argument, else the scope's), and the record's expiry
 * with it; returns the new end of the lease.  The attempt is required: a
 * heartbeat is the one call a holder that lost its key makes without
 * knowing, and the attempt is how it is told (55006, nothing changed).
 */
static Datum
record_extend(FunctionCallInfo fcinfo, int16 typlen)
{
	DedupScopeSettings settings;
	text	   *scope;
	Datum		route_result;
	DedupFingerprint fp;
	int32		attempt;
	Interval   *lease;
	KeyStore	ks;
	KeyRow		row;

	if (dedup_routing_route(fcinfo, DEDUP_REL_CLAIMS, DEDUP_ROUTE_KEY, typlen, &route_result))
		return route_result;
	scope = dedup_scope_of_call(fcinfo, "scope", "dedup_extend", DEDUP_PRIV_USAGE, &settings);

	dedup_fingerprint_key_arg(fcinfo, 1, scope, typlen, &fp);
	if (PG_ARGISNULL(2))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("attempt must not be null"),
				 errhint("Pass the attempt number dedup_begin() returned: a heartbeat must be refused once the key was taken over.")));
	attempt = record_attempt_arg(fcinfo, 2);
	lease = dedup_check_interval_arg(fcinfo, 3, "lease");
	if (lease == NULL)
		lease = &settings.value[DEDUP_SCOPE_LEASE];

	key_store_open(&ks, DEDUP_REL_CLAIMS, scope, &fp, true);
	ks.whole_records = true;
	do
	{
		record_find_held(&ks, &fp, attempt, "dedup_extend", &row);
		row.record.lease_until = dedup_check_timestamp_plus(ks.now, lease);
	} while (!key_store_put(&ks, &fp, &row,
							dedup_check_timestamp_plus(row.record.lease_until,
													   record_ttl(&row.record, &settings)),
							&row.record, KEY_BUSY_WAIT));
	key_store_close(&ks);
	PG_RETURN_TIMESTAMPTZ(row.record.lease_until);
}

/*
 * dedup_lookup(scope text, key <type>) RETURNS TABLE (kind, status, attempts,
 *		lease_expires_at, first_seen_at, completed_at, expires_at,
 *		response_code, response, request_fingerprint)
 *
 * The key's live row as the statement's snapshot sees it; no row when the
 * key is absent or expired.  Changes nothing.
 */
static Datum
record_lookup(FunctionCallInfo fcinfo, int16 typlen)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	text	   *scope;
	Datum		route_result;
	DedupFingerprint fp;
	KeyStore	ks;
	KeyRow		row;
	Datum		values[LOOKUP_RESULT_NATTS];
	bool		nulls[LOOKUP_RESULT_NATTS];

	if (dedup_routing_route(fcinfo, DEDUP_REL_CLAIMS, DEDUP_ROUTE_KEY, typlen, &route_result))
		return route_result;
	scope = dedup_scope_of_call(fcinfo, "scope", NULL, DEDUP_PRIV_USAGE, NULL);

	dedup_fingerprint_key_arg(fcinfo, 1, scope, typlen, &fp);
	InitMaterializedSRF(fcinfo, 0);

	key_store_open(&ks, DEDUP_REL_CLAIMS, scope, &fp, false);
	ks.whole_records = true;
	if (key_store_read(&ks, &fp, &row) == KEY_LIVE)
	{
		memset(nulls, true, sizeof(nulls));
		values[0] = CStringGetTextDatum(row.has_record ? "record" : "claim");
		values[1] = CStringGetTextDatum(row.has_record ?
										record_status_name(row.record.status) : "complete");
		values[6] = TimestampTzGetDatum(row.expires_at);
		nulls[0] = nulls[1] = nulls[6] = false;
		if (row.has_record)
		{
			values[2] = Int32GetDatum(row.record.attempts);
			values[3] = TimestampTzGetDatum(row.record.lease_until);
			values[4] = TimestampTzGetDatum(row.record.first_seen);
			nulls[2] = nulls[4] = false;
			nulls[3] = row.record.status != RECORD_PROCESSING;
			values[5] = TimestampTzGetDatum(row.record.completed_at);
			nulls[5] = !row.record.has_completed_at;
			values[7] = Int32GetDatum(row.record.response_code);
			nulls[7] = !row.record.has_response_code;
			values[8] = JsonbPGetDatum(row.record.response);
			nulls[8] = row.record.response == NULL;
			nulls[9] = !row.record.has_request;
			if (!nulls[9])
				values[9] = record_fingerprint_datum(rsinfo->setDesc, 9, &row.record.request);
		}
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	key_store_close(&ks);
	return (Datum) 0;
}

/*
 * The SQL functions, one C function per kind of key: text and bytea (1.0's
 * names, as its install script calls them), uuid and dedup_fingerprint,
 * bigint.
 */
PG_FUNCTION_INFO_V1(dedup_begin);
Datum
dedup_begin(PG_FUNCTION_ARGS)
{
	return record_begin(fcinfo, -1);
}

PG_FUNCTION_INFO_V1(dedup_begin_fixed);
Datum
dedup_begin_fixed(PG_FUNCTION_ARGS)
{
	return record_begin(fcinfo, DEDUP_FINGERPRINT_LEN);
}

PG_FUNCTION_INFO_V1(dedup_begin_int8);
Datum
dedup_begin_int8(PG_FUNCTION_ARGS)
{
	return record_begin(fcinfo, sizeof(int64));
}

PG_FUNCTION_INFO_V1(dedup_complete);
Datum
dedup_complete(PG_FUNCTION_ARGS)
{
	return record_complete(fcinfo, -1);
}

PG_FUNCTION_INFO_V1(dedup_complete_fixed);
Datum
dedup_complete_fixed(PG_FUNCTION_ARGS)
{
	return record_complete(fcinfo, DEDUP_FINGERPRINT_LEN);
}

PG_FUNCTION_INFO_V1(dedup_complete_int8);
Datum
dedup_complete_int8(PG_FUNCTION_ARGS)
{
	return record_complete(fcinfo, sizeof(int64));
}

PG_FUNCTION_INFO_V1(dedup_release);
Datum
dedup_release(PG_FUNCTION_ARGS)
{
	return record_release(fcinfo, -1);
}

PG_FUNCTION_INFO_V1(dedup_release_fixed);
Datum
dedup_release_fixed(PG_FUNCTION_ARGS)
{
	return record_release(fcinfo, DEDUP_FINGERPRINT_LEN);
}

PG_FUNCTION_INFO_V1(dedup_release_int8);
Datum
dedup_release_int8(PG_FUNCTION_ARGS)
{
	return record_release(fcinfo, sizeof(int64));
}

PG_FUNCTION_INFO_V1(dedup_lookup);
Datum
dedup_lookup(PG_FUNCTION_ARGS)
{
	return record_lookup(fcinfo, -1);
}

PG_FUNCTION_INFO_V1(dedup_lookup_fixed);
Datum
dedup_lookup_fixed(PG_FUNCTION_ARGS)
{
	return record_lookup(fcinfo, DEDUP_FINGERPRINT_LEN);
}

PG_FUNCTION_INFO_V1(dedup_lookup_int8);
Datum
dedup_lookup_int8(PG_FUNCTION_ARGS)
{
	return record_lookup(fcinfo, sizeof(int64));
}

PG_FUNCTION_INFO_V1(dedup_extend);
Datum
dedup_extend(PG_FUNCTION_ARGS)
{
	return record_extend(fcinfo, -1);
}

PG_FUNCTION_INFO_V1(dedup_extend_fixed);
Datum
dedup_extend_fixed(PG_FUNCTION_ARGS)
{
	return record_extend(fcinfo, DEDUP_FINGERPRINT_LEN);
}

PG_FUNCTION_INFO_V1(dedup_extend_int8);
Datum
dedup_extend_int8(PG_FUNCTION_ARGS)
{
	return record_extend(fcinfo, sizeof(int64));
}
