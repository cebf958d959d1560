/*-------------------------------------------------------------------------
 *
 * checks.c
 *	  The argument checks every public function of dedup applies: that the
 *	  call may write here, a boolean that must be given, a scope's name,
 *	  and the one rule for every interval dedup takes, with the SQL
 *	  functions that apply the same checks for the relay's plpgsql.
 *
 * Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "access/xlog.h"
#include "miscadmin.h"
#include "tcop/utility.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "checks.h"

/*
 * Refuse to write on a standby or in a read-only transaction, the way the
 * executor refuses DML there (our writes bypass the executor).
 */
void
dedup_check_writable(const char *funcname)
{
	if (RecoveryInProgress())
		ereport(ERROR,
				(errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION),
				 errmsg("cannot execute %s() during recovery", funcname),
				 errdetail("This server is a hot standby; dedup writes only on the primary."),
				 errhint("Connect to the primary server.")));
	/* format the command name only when it is needed: this runs per claim */
	if (XactReadOnly)
		PreventCommandIfReadOnly(psprintf("%s()", funcname));
	if (IsInParallelMode())
		PreventCommandIfParallelMode(psprintf("%s()", funcname));
}

/*
 * dedup.check_writable(funcname text): the same check for the relay's
 * plpgsql functions.
 */
PG_FUNCTION_INFO_V1(dedup_check_writable_sql);
Datum
dedup_check_writable_sql(PG_FUNCTION_ARGS)
{
	dedup_check_writable(text_to_cstring(PG_GETARG_TEXT_PP(0)));
	PG_RETURN_VOID();
}

/* A boolean argument that must not be NULL (nowait). */
bool
dedup_check_bool_arg(FunctionCallInfo fcinfo, int argno, const char *what)
{
	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not be null", what)));
	return PG_GETARG_BOOL(argno);
}

/*
 * A scope name (or an outbox topic, which is a scope; "what" names it in
 * errors): not empty, not absurdly long.  Every path that keeps a scope's
 * name in a buffer of DEDUP_MAX_SCOPE_BYTES + 1 bytes passes it here first.
 */
void
dedup_check_scope_name(const text *scope, const char *what)
{
	Size		len = VARSIZE_ANY_EXHDR(scope);

	if (len == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must not be empty", what)));
	if (len > DEDUP_MAX_SCOPE_BYTES)
		ereport(ERROR,
				(errcode(ERRCODE_STRING_DATA_RIGHT_TRUNCATION),
				 errmsg("%s name is too long", what),
				 errdetail("The %s name has %zu bytes; the limit is %d.",
						   what, len, DEDUP_MAX_SCOPE_BYTES)));
}

/* The scope argument of a call: not NULL, and a valid scope name. */
text *
dedup_check_name_arg(FunctionCallInfo fcinfo, int argno, const char *what)
{
	text	   *scope;

	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not be null", what)));
	scope = PG_GETARG_TEXT_PP(argno);
	dedup_check_scope_name(scope, what);
	return scope;
}

/*
 * The rule for every interval dedup takes as a ttl, lease, retention or
 * delay.  Its months, days and microseconds are each added on the calendar
 * (a month is 28 to 31 days, a day 23 to 25 hours across a daylight-saving
 * change), so no single sum of them says where it ends: '-1200 mon 36500
 * days' would count as +500 days and end 25 days in the past.  Hence:
 *	- no part negative, and at least one part positive (unless allow_zero);
 *	- no part longer than 100 years, so that adding it cannot overflow;
 *	- its end, computed on the calendar from the time of the call, at most
 *	  100 years after that time.
 * The first two do not depend on the time: they are also the CHECK
 * constraints of dedup.scopes (dedup.interval_is_valid), so that a stored
 * setting can always be applied.  A stored setting was held to the third
 * when it was set.
 */
#define DEDUP_MAX_INTERVAL_MONTHS (100 * MONTHS_PER_YEAR)
#define DEDUP_MAX_INTERVAL_DAYS 36525	/* the most days 100 years have */
#define DEDUP_MIN_CENTURY_DAYS 36524	/* the fewest */
#define DEDUP_MAX_DAY_USECS (25 * USECS_PER_HOUR)	/* a calendar day across
													 * DST */

static char *
dedup_interval_text(const Interval *value)
{
	return DatumGetCString(DirectFunctionCall1(interval_out, IntervalPGetDatum(value)));
}

/* Which part of the rule an interval breaks, if any (not the calendar end). */
typedef enum IntervalProblem
{
	INTERVAL_OK,
	INTERVAL_ZERO,
	INTERVAL_NEGATIVE,
	INTERVAL_TOO_LONG
} IntervalProblem;

static IntervalProblem
dedup_interval_problem(const Interval *value, bool allow_zero)
{
	if (value->month < 0 || value->day < 0 || value->time < 0)
		return INTERVAL_NEGATIVE;
	if (!allow_zero && value->month == 0 && value->day == 0 && value->time == 0)
		return INTERVAL_ZERO;
	if (value->month > DEDUP_MAX_INTERVAL_MONTHS || value->day > DEDUP_MAX_INTERVAL_DAYS ||
		value->time > DEDUP_MAX_INTERVAL_DAYS * USECS_PER_DAY)
		return INTERVAL_TOO_LONG;
	return INTERVAL_OK;
}

static void
dedup_report_interval_too_long(const Interval *value, const char *what, TimestampTz from)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("%s must be at most 100 years", what),
			 errdetail("The value given was %s, which ends more than 100 years after %s.",
					   dedup_interval_text(value), timestamptz_to_str(from))));
}

/*
 * Check an interval against the whole rule, its end computed from the time
 * "from"; invalid_parameter_value (22023) when it breaks it.
 */
void
dedup_check_interval(const Interval *value, const char *what, bool allow_zero,
					 TimestampTz from)
{
	int64		longest_days;

	switch (dedup_interval_problem(value, allow_zero))
	{
		case INTERVAL_OK:
			break;
		case INTERVAL_ZERO:
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("%s must be greater than zero", what),
					 errdetail("The value given was %s.", dedup_interval_text(value))));
			break;
		case INTERVAL_NEGATIVE:
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("%s must not have a negative part", what),
					 errdetail("The value given was %s; its months, days and time must each be zero or more.",
							   dedup_interval_text(value)),
					 errhint("Write the %s with one sign, such as '1 day' or '36 hours'.", what)));
			break;
		case INTERVAL_TOO_LONG:
			dedup_report_interval_too_long(value, what, from);
			break;
	}

	/* the end on the calendar, unless it is plainly within 100 years */
	longest_days = ((int64) value->month * 31 + value->day) * DEDUP_MAX_DAY_USECS / USECS_PER_DAY +
		value->time / USECS_PER_DAY + 1;
	if (longest_days > DEDUP_MIN_CENTURY_DAYS)
	{
		Interval	century = {0};

		century.month = DEDUP_MAX_INTERVAL_MONTHS;
		if (dedup_check_timestamp_plus(from, value) > dedup_check_timestamp_plus(from, &century))
			dedup_report_interval_too_long(value, what, from);
	}
}

/*
 * An optional interval argument (NULL means "use the scope's setting"),
 * checked when given, its end from the time of the call.
 */
Interval *
dedup_check_interval_arg(FunctionCallInfo fcinfo, int argno, const char *what)
{
	Interval   *value;

	if (PG_NARGS() <= argno || PG_ARGISNULL(argno))
		return NULL;
	value = PG_GETARG_INTERVAL_P(argno);
	dedup_check_interval(value, what, false, GetCurrentTimestamp());
	return value;
}

/* t + span on the calendar (in the session's time zone, as SQL's + does). */
TimestampTz
dedup_check_timestamp_plus(TimestampTz t, const Interval *span)
{
	return DatumGetTimestampTz(DirectFunctionCall2(timestamptz_pl_interval,
												   TimestampTzGetDatum(t),
												   IntervalPGetDatum(span)));
}

/*
 * dedup.check_interval(value interval, what text, allow_zero boolean): the
 * same check for the relay's plpgsql functions, from the statement's start
 * (the time they add the interval to).
 */
PG_FUNCTION_INFO_V1(dedup_check_interval_sql);
Datum
dedup_check_interval_sql(PG_FUNCTION_ARGS)
{
	char	   *what;

	if (PG_ARGISNULL(1) || PG_ARGISNULL(2))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("what and allow_zero must not be null")));
	what = text_to_cstring(PG_GETARG_TEXT_PP(1));
	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not be null", what)));
	dedup_check_interval(PG_GETARG_INTERVAL_P(0), what, PG_GETARG_BOOL(2),
						 GetCurrentStatementStartTimestamp());
	PG_RETURN_VOID();
}

/*
 * dedup.interval_is_valid(value interval): the part of the rule that does
 * not depend on the time, for the CHECK constraints of dedup.scopes.
 */
PG_FUNCTION_INFO_V1(dedup_interval_is_valid);
Datum
dedup_interval_is_valid(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(dedup_interval_problem(PG_GETARG_INTERVAL_P(0), false) == INTERVAL_OK);
}
