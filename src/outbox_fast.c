/*-------------------------------------------------------------------------
 *
 * outbox_fast.c
 *	  The relay's fast path: the take of a relay keeping up, and the ack of
 *	  a batch whole, in a few kept statements.
 *
 * The relay's rules (what may be handed out, what is held back behind its
 * aggregate, what is handed out again, what goes dead) have one owner: the
 * PL/pgSQL functions of sql/functions/outbox_take.sql and
 * outbox_settle.sql.  This file implements none of them.  It recognizes
 * the state in which every rule is idle, and there does what the PL/pgSQL
 * take does in that state, no more:
 *
 *	- a take of a topic that has a position, no batch out whose lease
 *	  passed (re-handed: a rule), nothing in dedup.outbox_retry nor in
 *	  dedup.outbox_held (held back, retried, redriven: rules), and next
 *	  events of which none is of an aggregate a batch out holds (held back:
 *	  a rule) and, for the 1.0 take, none of an aggregate twice (its one
 *	  event of an aggregate a batch: a rule): the next events of the log up
 *	  to the settled sequence, in a batch row inserted with the position
 *	  after it as the PL/pgSQL take moves it (outbox_next_position()) and the
 *	  low mark of the topic's batches out; or, with nothing in the log past
 *	  the position, nothing at all;
 *	- an ack of a batch whole (no failed event) with no event of
 *	  outbox_retry: a row appended that says it is out no more (the
 *	  PL/pgSQL ack runs this one too, through dedup.outbox_ack_whole()).
 *
 * What both paths read or write where they do the same is done here, once,
 * and the PL/pgSQL functions call it through internal SQL functions
 * (declared in outbox_take.sql), so that both decide and write by one
 * statement: the state a take starts from (FAST_STATE: the topic's
 * position, its low mark, whether outbox_retry, outbox_held or the log has
 * events of it; dedup.outbox_take_state()), the batches out and the
 * aggregates they hold (FAST_OUT: dedup.outbox_batches_out(),
 * dedup.outbox_aggregates_out()), the range of the log a take reads
 * (FAST_SCAN: dedup.outbox_log_scan()), a batch's row handed out
 * (FAST_WRITE: dedup.outbox_batch_write()) and appended by a settle
 * (FAST_APPEND: dedup.outbox_batch_append()), and the position a take that
 * hands out no batch moved (FAST_TOPIC_UPDATE: dedup.outbox_topic_move()).
 * The position after a take and how far it reads the log are src/outbox.c's
 * (outbox_next_position(), outbox_scan_limit()), which both paths apply.
 *
 * In every other case the fast path gives way, having written nothing,
 * and the caller runs the PL/pgSQL function.  Why not the whole take in
 * C: the rules are set-wise statements over the relay's tables (held
 * ranges, retries, settled events, dead letters) that read best, and are
 * checked best, in SQL, and they run only off the hot path; what the hot
 * path needs is to avoid PL/pgSQL's per-statement cost where no rule
 * applies.
 * What could still disagree (which events of the range read go in the
 * batch, its lease) is checked by running every outbox test on both paths:
 * the setting dedup.outbox_fast_path (on by default) off sends every take
 * and ack to the PL/pgSQL functions (Makefile: installcheck-slow-path).
 *
 * Runs as the owner of the outbox, inside SPI (outbox_relay.c).
 *
 * Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/relation.h"
#include "catalog/namespace.h"
#include "catalog/pg_type_d.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "storage/bufmgr.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/timestamp.h"
#include "utils/typcache.h"

#include "catalog.h"
#include "checks.h"
#include "fingerprint.h"
#include "outbox.h"
#include "outbox_fast.h"
#include "scope.h"
#include "scope_counters.h"

enum
{
	FAST_STATE,
	FAST_OUT,
	FAST_SCAN,
	FAST_WRITE,
	FAST_TOPIC_UPDATE,
	FAST_ACK_TOPIC,
	FAST_ACK_LOCK,
	FAST_ACK,
	FAST_APPEND,
	FAST_NPLANS
};

/*
 * Each statement's $1 is the partition; %1$s in its text stands for the
 * fingerprint's equality operator, and InvalidOid in its argument types
 * for the fingerprint's type.
 *
 * FAST_STATE is the state a take starts from, for both paths: the fast
 * take's (fast_state()) and the PL/pgSQL take's, which reads it through
 * dedup.outbox_take_state() (sql/functions/outbox_take.sql says what each
 * column is).  The take runs it once it holds its topic's relay lock and
 * has waited for the topic's puts in progress (outbox_wait_puts()), so that
 * its snapshot sees what the take that held it before committed, and every
 * put in progress as the take began.  One row, with the topic's position
 * NULL when it has none yet.  FAST_OUT then reads the topic's batch rows
 * from the low mark up, in (id, rev) order, with no join for the planner to
 * get wrong (the newest row of each id is the one before the next id).
 * FAST_STATE's look-ups are scalar subqueries with ORDER BY and LIMIT, not
 * EXISTS, which the planner would strip of them and, in the kept generic
 * plan, read the whole log.
 */
static const struct
{
	const char *sql;
	int			nargs;
	Oid			argtypes[17];
	int			cursor_options; /* CURSOR_OPT_GENERIC_PLAN: see fast_run() */
}			fast_queries[FAST_NPLANS] = {

	[FAST_STATE] = {"SELECT p.next_seq,"
		" (SELECT r.seq FROM dedup.outbox_retry AS r"
		"  WHERE r.part %1$s $1 AND r.topic OPERATOR(pg_catalog.=) $2"
		"  ORDER BY r.seq LIMIT 1) IS NOT NULL,"
		" (SELECT h.from_seq FROM dedup.outbox_held AS h"
		"  WHERE h.part %1$s $1 AND h.topic OPERATOR(pg_catalog.=) $2"
		"  ORDER BY h.aggregateid LIMIT 1) IS NOT NULL,"
		" (SELECT o.seq FROM dedup.outbox AS o"
		"  WHERE o.part %1$s $1 AND o.topic OPERATOR(pg_catalog.=) $2"
		"  AND o.seq OPERATOR(pg_catalog.>=) COALESCE(p.next_seq, 0)"
		"  ORDER BY o.seq LIMIT 1) IS NOT NULL,"
		" n.low_id, n.id, n.busy"
		" FROM (SELECT) AS one LEFT JOIN LATERAL"
		" (SELECT y.next_seq, y.low_id, y.id, y.busy FROM dedup.outbox_batches AS y"
		"  WHERE y.part %1$s $1 AND y.topic OPERATOR(pg_catalog.=) $2"
		"  AND y.id OPERATOR(pg_catalog.>=) $3"
		"  ORDER BY y.id DESC, y.rev DESC LIMIT 1) AS n ON true LEFT JOIN LATERAL"
		" (SELECT GREATEST(t.next_seq, n.next_seq) AS next_seq FROM dedup.outbox_topics AS t"
		"  WHERE t.part %1$s $1 AND t.topic OPERATOR(pg_catalog.=) $2) AS p ON true", 3,
	{InvalidOid, TEXTOID, INT8OID}},
	[FAST_OUT] = {"SELECT x.*,"
		" x.lease_until OPERATOR(pg_catalog.<=) pg_catalog.clock_timestamp() AS expired"
		" FROM dedup.outbox_batches AS x"
		" WHERE x.part %1$s $1 AND x.topic OPERATOR(pg_catalog.=) $2"
		" AND x.id OPERATOR(pg_catalog.>=) $3"
	" ORDER BY x.id, x.rev", 3, {InvalidOid, TEXTOID, INT8OID}},
	[FAST_SCAN] = {"SELECT o.seq, o.id, o.aggregatetype, o.aggregateid, o.type, o.payload,"
		" o.headers, o.created_at, pg_catalog.hashtext(o.aggregateid)"
		" FROM dedup.outbox AS o WHERE o.part %1$s $1 AND o.topic OPERATOR(pg_catalog.=) $2"
		" AND o.seq OPERATOR(pg_catalog.>=) $3 AND o.seq OPERATOR(pg_catalog.<=) $4"
		" ORDER BY o.seq LIMIT $5", 5, {InvalidOid, TEXTOID, INT8OID, INT8OID, INT4OID},
	CURSOR_OPT_GENERIC_PLAN},
	[FAST_WRITE] = {"INSERT INTO dedup.outbox_batches (part, topic, id, rev, busy, attempt,"
		" lease_until, first_seq, last_seq, settled, extra, retried, events, aggregates,"
		" members, next_seq, low_id)"
		" VALUES ($1, $2, $3, 0, true, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)",
		15, {InvalidOid, TEXTOID, INT8OID, INT4OID, TIMESTAMPTZOID, INT8OID, INT8OID,
			INT8ARRAYOID, INT8ARRAYOID, INT4OID, INT4OID, INT4ARRAYOID, INT8ARRAYOID,
	INT8OID, INT8OID}},
	[FAST_TOPIC_UPDATE] = {"UPDATE dedup.outbox_topics AS t SET next_seq = $3"
		" WHERE t.part %1$s $1 AND t.topic OPERATOR(pg_catalog.=) $2", 3,
	{InvalidOid, TEXTOID, INT8OID}},
	[FAST_ACK_TOPIC] = {"SELECT x.topic FROM (SELECT y.topic, y.busy, y.retried"
		"  FROM dedup.outbox_batches AS y"
		"  WHERE y.part %1$s $1 AND y.id OPERATOR(pg_catalog.=) $2"
		"  ORDER BY y.rev DESC LIMIT 1) AS x"
		" WHERE x.busy AND x.retried OPERATOR(pg_catalog.=) 0",
	2, {InvalidOid, INT8OID}},
	[FAST_ACK_LOCK] = {"SELECT FROM dedup.outbox_batches AS x"
		" WHERE x.part %1$s $1 AND x.id OPERATOR(pg_catalog.=) $2"
		" AND x.rev OPERATOR(pg_catalog.=) 0 FOR UPDATE",
	2, {InvalidOid, INT8OID}},
	[FAST_ACK] = {"SELECT x.rev, x.attempt, x.events, x.next_seq, x.low_id"
		" FROM (SELECT * FROM dedup.outbox_batches AS y"
		"  WHERE y.part %1$s $1 AND y.id OPERATOR(pg_catalog.=) $2"
		"  ORDER BY y.rev DESC LIMIT 1) AS x"
		" WHERE x.busy AND x.retried OPERATOR(pg_catalog.=) 0"
		" AND x.topic OPERATOR(pg_catalog.=) $3",
	3, {InvalidOid, INT8OID, TEXTOID}},
	[FAST_APPEND] = {"INSERT INTO dedup.outbox_batches (part, topic, id, rev, busy, attempt,"
		" lease_until, first_seq, last_seq, settled, extra, retried, events, aggregates,"
		" members, next_seq, low_id)"
		" VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)",
		17, {InvalidOid, TEXTOID, INT8OID, INT4OID, BOOLOID, INT4OID, TIMESTAMPTZOID, INT8OID,
			INT8OID, INT8ARRAYOID, INT8ARRAYOID, INT4OID, INT4OID, INT4ARRAYOID, INT8ARRAYOID,
	INT8OID, INT8OID}},
};

/* FAST_WRITE's parameters (from 0), in the order of its columns */
enum
{
	FAST_WRITE_PART, FAST_WRITE_TOPIC, FAST_WRITE_ID, FAST_WRITE_ATTEMPT, FAST_WRITE_LEASE,
	FAST_WRITE_FIRST, FAST_WRITE_LAST, FAST_WRITE_SETTLED, FAST_WRITE_EXTRA, FAST_WRITE_RETRIED,
	FAST_WRITE_EVENTS, FAST_WRITE_AGGREGATES, FAST_WRITE_MEMBERS, FAST_WRITE_NEXT,
	FAST_WRITE_LOW, FAST_WRITE_NARGS
};

/*
 * FAST_APPEND's parameters (from 0): a batch row's columns, in the order of
 * dedup.outbox_batches' (fast_batch_append())
 */
enum
{
	FAST_ROW_PART, FAST_ROW_TOPIC, FAST_ROW_ID, FAST_ROW_REV, FAST_ROW_BUSY, FAST_ROW_ATTEMPT,
	FAST_ROW_LEASE, FAST_ROW_FIRST, FAST_ROW_LAST, FAST_ROW_SETTLED, FAST_ROW_EXTRA,
	FAST_ROW_RETRIED, FAST_ROW_EVENTS, FAST_ROW_AGGREGATES, FAST_ROW_MEMBERS, FAST_ROW_NEXT,
	FAST_ROW_LOW, FAST_ROW_NCOLS
};

/* dedup.outbox_batches' column of each of FAST_APPEND's parameters */
static const char *const fast_row_names[FAST_ROW_NCOLS] = {
	[FAST_ROW_PART] = "part",
	[FAST_ROW_TOPIC] = "topic",
	[FAST_ROW_ID] = "id",
	[FAST_ROW_REV] = "rev",
	[FAST_ROW_BUSY] = "busy",
	[FAST_ROW_ATTEMPT] = "attempt",
	[FAST_ROW_LEASE] = "lease_until",
	[FAST_ROW_FIRST] = "first_seq",
	[FAST_ROW_LAST] = "last_seq",
	[FAST_ROW_SETTLED] = "settled",
	[FAST_ROW_EXTRA] = "extra",
	[FAST_ROW_RETRIED] = "retried",
	[FAST_ROW_EVENTS] = "events",
	[FAST_ROW_AGGREGATES] = "aggregates",
	[FAST_ROW_MEMBERS] = "members",
	[FAST_ROW_NEXT] = "next_seq",
	[FAST_ROW_LOW] = "low_id",
};

/* FAST_SCAN's columns, and column col (from 1) of its row i, deformed */
#define FAST_SCAN_NCOLS 9
#define FAST_SCAN_COL(i, col) (cols[(i) * FAST_SCAN_NCOLS + (col) - 1])
#define FAST_SCAN_NULL(i, col) (colnulls[(i) * FAST_SCAN_NCOLS + (col) - 1])

static SPIPlanPtr fast_plans[FAST_NPLANS];
static Oid	fast_plans_type = InvalidOid;

/*
 * The newest batch id this backend saw of the topic it took from last
 * (FAST_STATE's lower bound; ids of a topic only grow, and the newest row
 * is never trimmed).  FAST_STATE reads the newest row from there up, so
 * that what it reads does not depend on its plan: planned while the table
 * was small (a generic plan kept from the first takes on a fresh table),
 * the look-up read every row of the topic by a bitmap scan and sorted
 * them, and a drain slowed as it went (doc/benchmarks.md, "The fast path's
 * plans as outbox_batches grows").  When no row is at or above the bound
 * (the row rolled back, the topic purged, the extension made again) it
 * reads again from 0.  One topic: a relay takes from one, and a miss costs
 * only the read from 0.
 */
static char *fast_newest_topic = NULL;	/* in TopMemoryContext */
static DedupFingerprint fast_newest_part;
static int64 fast_newest_id = 0;

/* The bound for (part, topic): the id seen last, or 0. */
static int64
fast_newest_bound(const DedupFingerprint *part, const char *topic)
{
	if (fast_newest_topic == NULL || strcmp(fast_newest_topic, topic) != 0 ||
		memcmp(&fast_newest_part, part, sizeof(DedupFingerprint)) != 0)
		return 0;
	return fast_newest_id;
}

/* Remember id as the newest of (part, topic) seen. */
static void
fast_newest_note(const DedupFingerprint *part, const char *topic, int64 id)
{
	if (fast_newest_topic == NULL || strcmp(fast_newest_topic, topic) != 0)
	{
		char	   *copy = MemoryContextStrdup(TopMemoryContext, topic);

		if (fast_newest_topic)
			pfree(fast_newest_topic);
		fast_newest_topic = copy;
	}
	fast_newest_part = *part;
	fast_newest_id = id;
}

/*
 * The size of dedup.outbox_batches, in blocks, that the kept plans were
 * made for: the least seen since they were.  A plan made while the table
 * was empty (a fresh table, or one truncated and analyzed) reads it by a
 * sequential scan, and kept, went on doing so as the table grew (what that
 * cost a drain: doc/benchmarks.md, "The fast path's plans as
 * outbox_batches grows").
 */
static BlockNumber fast_plans_blocks = 0;

/*
 * How many kept statements of the fast path are running: a take run by
 * one of them (a trigger or a policy on the relay's tables calling a take)
 * must not free the kept plans, the running one among them (SPI would go
 * on reading its freed plan: the statement's text, its list of plans).
 */
static int	fast_running = 0;

/*
 * Free the kept plans once dedup.outbox_batches has grown past four times
 * (and 8 blocks more than) the size they were made for: the plans made
 * next see its size (the planner reads a table's blocks when it plans), so
 * a session re-plans a few times as the table grows from empty, and not
 * again.  On a Citus coordinator the table holds no blocks: no re-plan.
 * Not in a take run by a kept statement (fast_running): the next take
 * checks again.
 */
static void
fast_plans_check_size(void)
{
	Oid			nsp = get_namespace_oid(DEDUP_INTERNAL_SCHEMA, true);
	Oid			relid = OidIsValid(nsp) ? get_relname_relid("outbox_batches", nsp) : InvalidOid;
	Relation	rel;
	BlockNumber blocks;

	if (!OidIsValid(relid) || fast_running > 0)
		return;
	rel = relation_open(relid, AccessShareLock);
	blocks = RelationGetNumberOfBlocks(rel);
	relation_close(rel, AccessShareLock);
	if (blocks < fast_plans_blocks)
		fast_plans_blocks = blocks;
	else if (blocks > fast_plans_blocks * 4 + 8)
	{
		for (int i = 0; i < FAST_NPLANS; i++)
		{
			if (fast_plans[i])
				SPI_freeplan(fast_plans[i]);
			fast_plans[i] = NULL;
		}
		fast_plans_blocks = blocks;
	}
}

/*
 * Free the kept plans if they name a fingerprint type gone (outbox.c); not
 * while one runs (fast_running).
 */
void
outbox_fast_plans_check(void)
{
	if (fast_running > 0 || !outbox_plans_stale(&fast_plans_type))
		return;
	for (int i = 0; i < FAST_NPLANS; i++)
	{
		if (fast_plans[i])
			SPI_freeplan(fast_plans[i]);
		fast_plans[i] = NULL;
	}
}


/*
 * Run a kept statement of the fast path; its result is in SPI_tuptable.
 *
 * FAST_SCAN is planned once a session, for any parameters (a generic
 * plan, made again only when its tables change): it reads a range of the
 * index on (topic, seq) in order, whatever the values.  Left to choose,
 * the plan cache planned it anew at every take, its LIMIT and range
 * looking cheaper known than unknown (what that cost a drain:
 * doc/benchmarks.md, "The take's scan, planned once").  The others are left
 * to the plan cache, which keeps their generic plans too, except on Citus:
 * Citus cannot plan FAST_STATE without its values and says so with a plan
 * of huge cost, so that the plan cache plans it with them each time.
 */
static int	fast_exec(int which, Datum *values, const char *nulls, bool read_only);

static int
fast_run(int which, Datum *values, int limit)
{
	Assert(limit == 0);
	return fast_exec(which, values, NULL, false);
}

/*
 * fast_run(), with nulls as SPI_execute_plan() takes them, and its
 * read_only: run with the caller's snapshot (true), or with a new one after
 * a command counter increment (false, as a take's statements run)
 */
static int
fast_exec(int which, Datum *values, const char *nulls, bool read_only)
{
	volatile int rc = 0;

	if (fast_plans[which] == NULL)
	{
		char	   *sql = psprintf(fast_queries[which].sql, dedup_catalog_fingerprint_eq());
		Oid			argtypes[lengthof(fast_queries[which].argtypes)];
		SPIPlanPtr	plan;

		for (int i = 0; i < fast_queries[which].nargs; i++)
			argtypes[i] = OidIsValid(fast_queries[which].argtypes[i]) ?
				fast_queries[which].argtypes[i] : dedup_catalog_fingerprint_type();
		plan = SPI_prepare_cursor(sql, fast_queries[which].nargs, argtypes,
								  fast_queries[which].cursor_options);
		if (plan == NULL)
			elog(ERROR, "could not prepare \"%s\": %s", sql, SPI_result_code_string(SPI_result));
		SPI_keepplan(plan);
		fast_plans[which] = plan;
	}
	fast_running++;
	PG_TRY();
	{
		rc = SPI_execute_plan(fast_plans[which], values, nulls, read_only, 0);
	}
	PG_FINALLY();
	{
		fast_running--;
	}
	PG_END_TRY();
	if (rc < 0)
		elog(ERROR, "could not run \"%s\": %s", fast_queries[which].sql,
			 SPI_result_code_string(rc));
	return rc;
}

/* The state a take starts from: FAST_STATE's row (above) */
typedef struct FastState
{
	bool		positioned;		/* next_seq is not NULL */
	int64		next_seq;
	bool		has_retry;
	bool		has_held;
	bool		has_log;
	bool		has_batch;		/* the topic has a batch row: low_id,
								 * newest_id, newest_busy */
	int64		low_id;
	int64		newest_id;
	bool		newest_busy;	/* its newest row's batch is out */
} FastState;

/*
 * Read the state of a take of topic (FAST_STATE), the newest batch row from
 * the id seen last up (fast_newest_bound()), or from 0 when none is there;
 * read_only: with the caller's snapshot (fast_exec()).
 */
static void
fast_state(const DedupFingerprint *part, text *topic, FastState *st, bool read_only)
{
	Datum		args[3];
	char	   *topic_str = text_to_cstring(topic);
	HeapTuple	tup;
	TupleDesc	desc;
	bool		isnull;

	fast_plans_check_size();
	args[0] = PointerGetDatum(part);
	args[1] = PointerGetDatum(topic);
	args[2] = Int64GetDatum(fast_newest_bound(part, topic_str));
	fast_exec(FAST_STATE, args, NULL, read_only);
	if (SPI_processed == 1 && DatumGetInt64(args[2]) != 0)
	{
		(void) SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 6, &isnull);
		if (isnull)
		{
			/* nothing from the bound up: from 0 (fast_newest_topic) */
			args[2] = Int64GetDatum(0);
			fast_exec(FAST_STATE, args, NULL, read_only);
		}
	}
	if (SPI_processed != 1)
		elog(ERROR, "could not read the outbox's state");
	tup = SPI_tuptable->vals[0];
	desc = SPI_tuptable->tupdesc;
	st->next_seq = DatumGetInt64(SPI_getbinval(tup, desc, 1, &isnull));
	st->positioned = !isnull;
	st->has_retry = DatumGetBool(SPI_getbinval(tup, desc, 2, &isnull));
	st->has_held = DatumGetBool(SPI_getbinval(tup, desc, 3, &isnull));
	st->has_log = DatumGetBool(SPI_getbinval(tup, desc, 4, &isnull));
	st->low_id = DatumGetInt64(SPI_getbinval(tup, desc, 5, &isnull));
	st->newest_id = DatumGetInt64(SPI_getbinval(tup, desc, 6, &isnull));
	st->has_batch = !isnull;
	st->newest_busy = DatumGetBool(SPI_getbinval(tup, desc, 7, &isnull)) && !isnull;
	if (st->has_batch)
		fast_newest_note(part, topic_str, st->newest_id);
	pfree(topic_str);
}

/*
 * A batch handed out: its rev 0 row (busy), for both paths, the fast take's
 * and the PL/pgSQL take's (dedup.outbox_batch_write(), which
 * dedup.outbox_batch_insert() calls).  values and nulls (as
 * SPI_execute_plan() takes them) are FAST_WRITE's parameters, the low mark
 * ($15) left to this: the lowest id of the topic's batches out (low_out, 0
 * with none; the ids of a topic only grow), or the batch's own when none is
 * below it (sql/tables/outbox_relay.sql).  Returns the low mark written.
 */
static int64
fast_batch_insert(Datum *values, char *nulls, int64 low_out)
{
	int64		id = DatumGetInt64(values[FAST_WRITE_ID]);
	int64		low = low_out != 0 && low_out < id ? low_out : id;

	values[FAST_WRITE_LOW] = Int64GetDatum(low);
	nulls[FAST_WRITE_LOW] = ' ';
	if (fast_exec(FAST_WRITE, values, nulls, false) != SPI_OK_INSERT || SPI_processed != 1)
		elog(ERROR, "could not write the outbox's batch");
	return low;
}

/*
 * A batch's state after a settle, for both paths, the fast ack's and the
 * PL/pgSQL settles' (dedup.outbox_batch_append()): values and nulls (as
 * SPI_execute_plan() takes them), FAST_APPEND's parameters, are its newest
 * row, changed, appended as the next rev of its id.  A batch out no more
 * (not busy) keeps none of its state but its counts, the topic's position
 * and the low mark (sql/tables/outbox_relay.sql): the rest is set NULL
 * here.  values and nulls are left as the row written.
 */
static void
fast_batch_append(Datum *values, char *nulls)
{
	if (nulls[FAST_ROW_REV] == 'n' || nulls[FAST_ROW_BUSY] == 'n')
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("b.rev and b.busy must not be null")));
	values[FAST_ROW_REV] = Int32GetDatum(DatumGetInt32(values[FAST_ROW_REV]) + 1);
	if (!DatumGetBool(values[FAST_ROW_BUSY]))
	{
		static const int state[] = {FAST_ROW_LEASE, FAST_ROW_FIRST, FAST_ROW_LAST,
		FAST_ROW_SETTLED, FAST_ROW_EXTRA, FAST_ROW_AGGREGATES, FAST_ROW_MEMBERS};

		for (int i = 0; i < lengthof(state); i++)
		{
			values[state[i]] = (Datum) 0;
			nulls[state[i]] = 'n';
		}
	}
	if (fast_exec(FAST_APPEND, values, nulls, false) != SPI_OK_INSERT || SPI_processed != 1)
		elog(ERROR, "could not write the outbox's batch");
}

/*
 * Whether st (fast_state()) tells that no batch of its topic is out: the
 * topic has no batch row, or its newest row is of a batch settled whose low
 * mark is its own id (none below it was out when it was taken, and a batch
 * goes out only by a take, under a new id above the newest).  A relay
 * keeping up, taking and acking one batch at a time, is always there, and
 * fast_batches_out() need not read the rows.
 */
static bool
fast_none_out(const FastState *st)
{
	return !st->has_batch || (!st->newest_busy && st->low_id == st->newest_id);
}

/*
 * The batches of topic out in partition part, for both paths, the fast
 * take's and the PL/pgSQL relay's (dedup.outbox_batches_out()): of the
 * topic's rows from low (its newest row's low mark) up, read by FAST_OUT
 * in (id, rev) order, each id's last (the one before the next id's), where
 * busy.  Returns how many, their rows (FAST_OUT's: the table's columns and
 * expired, whether the lease passed) in id order in *rows, FAST_OUT's
 * SPI_tuptable in *table.  read_only: with the caller's snapshot
 * (fast_exec()).
 */
static uint64
fast_batches_out(const DedupFingerprint *part, text *topic, int64 low, HeapTuple **rows,
				 SPITupleTable **table, bool read_only)
{
	Datum		args[3];
	SPITupleTable *read;
	uint64		nread;
	uint64		nout = 0;
	int			id_col;
	int			busy_col;

	args[0] = PointerGetDatum(part);
	args[1] = PointerGetDatum(topic);
	args[2] = Int64GetDatum(low);
	fast_exec(FAST_OUT, args, NULL, read_only);
	read = SPI_tuptable;
	nread = SPI_processed;
	*table = read;
	*rows = palloc(sizeof(HeapTuple) * Max(nread, 1));
	id_col = SPI_fnumber(read->tupdesc, "id");
	busy_col = SPI_fnumber(read->tupdesc, "busy");
	if (id_col <= 0 || busy_col <= 0)
		elog(ERROR, "could not read the outbox's batches");
	for (uint64 i = 0; i < nread; i++)
	{
		bool		isnull;
		int64		id = DatumGetInt64(SPI_getbinval(read->vals[i], read->tupdesc, id_col,
													 &isnull));

		if (i + 1 < nread &&
			DatumGetInt64(SPI_getbinval(read->vals[i + 1], read->tupdesc, id_col,
										&isnull)) == id)
			continue;			/* not its newest row */
		if (!DatumGetBool(SPI_getbinval(read->vals[i], read->tupdesc, busy_col, &isnull)))
			continue;			/* settled */
		(*rows)[nout++] = read->vals[i];
	}
	return nout;
}

static int
fast_int4_cmp(const void *a, const void *b)
{
	int32		x = *(const int32 *) a;
	int32		y = *(const int32 *) b;

	return x < y ? -1 : x > y;
}

/* The aggregates the batches of a topic out hold: fast_aggregates_out() */
typedef struct FastAggregates
{
	int32	   *aggs;			/* hashtext() of each, sorted, each once */
	int			naggs;
	int64		lowest;			/* the lowest id of the batches out, or 0 */
	bool		expired;		/* the lease of one of them passed */
	bool		has_null;		/* the aggregates of one of them hold a NULL */
	bool		unknown;		/* the aggregates of one of them are NULL */
} FastAggregates;

/*
 * The aggregates the batches of topic out in partition part hold, for both
 * paths, the fast take's and the PL/pgSQL take's
 * (dedup.outbox_aggregates_out()): an event of one of them is held back (a
 * rule, the PL/pgSQL take's: the fast take gives way to it).  The batches
 * out are fast_batches_out()'s, from st's low mark up (st: the take's
 * state, fast_state()); with them, whether a lease of one of them passed,
 * and whether the aggregates of one of them are NULL or hold a NULL (none
 * the relay writes): the fast take gives way in these cases.  A NULL
 * element is not in out->aggs (has_null says it); NULL aggregates add none.
 * read_only: with the caller's snapshot (fast_exec()).
 */
static void
fast_aggregates_out(const DedupFingerprint *part, text *topic, const FastState *st,
					bool read_only, FastAggregates *out)
{
	HeapTuple  *rows;
	SPITupleTable *table;
	uint64		nrows;
	TupleDesc	desc;
	int			id_col;
	int			expired_col;
	int			aggs_col;
	int			n = 0;

	memset(out, 0, sizeof(*out));
	out->aggs = palloc(sizeof(int32));
	if (fast_none_out(st))
		return;

	/*
	 * (FAST_OUT reads them by the index on (topic, id, rev), planned with the
	 * low mark's value: a few rows past the newest batches)
	 */
	nrows = fast_batches_out(part, topic, st->low_id, &rows, &table, read_only);
	desc = table->tupdesc;
	id_col = SPI_fnumber(desc, "id");
	expired_col = SPI_fnumber(desc, "expired");
	aggs_col = SPI_fnumber(desc, "aggregates");
	if (id_col <= 0 || expired_col <= 0 || aggs_col <= 0)
		elog(ERROR, "could not read the outbox's batches");
	for (uint64 i = 0; i < nrows; i++)
	{
		bool		isnull;
		Datum		aggs_datum;
		ArrayType  *aggs;
		Datum	   *elems;
		bool	   *elemnulls;
		int			nelems;

		if (i == 0)
			out->lowest = DatumGetInt64(SPI_getbinval(rows[i], desc, id_col, &isnull));
		if (DatumGetBool(SPI_getbinval(rows[i], desc, expired_col, &isnull)))
			out->expired = true;
		aggs_datum = SPI_getbinval(rows[i], desc, aggs_col, &isnull);
		if (isnull)
		{
			out->unknown = true;
			continue;
		}
		aggs = DatumGetArrayTypeP(aggs_datum);
		deconstruct_array(aggs, INT4OID, sizeof(int32), true, TYPALIGN_INT, &elems,
						  &elemnulls, &nelems);
		out->aggs = repalloc(out->aggs, sizeof(int32) * (n + nelems + 1));
		for (int e = 0; e < nelems; e++)
		{
			if (elemnulls[e])
				out->has_null = true;
			else
				out->aggs[n++] = DatumGetInt32(elems[e]);
		}
	}

	/* sorted, each once */
	qsort(out->aggs, n, sizeof(int32), fast_int4_cmp);
	out->naggs = 0;
	for (int i = 0; i < n; i++)
		if (out->naggs == 0 || out->aggs[i] != out->aggs[out->naggs - 1])
			out->aggs[out->naggs++] = out->aggs[i];
}

/*
 * The events of topic's log in partition part from seq from up to seq upto,
 * in seq order, at most limit of them (FAST_SCAN, whose generic plan reads
 * the range of the index on (topic, seq) in order: fast_exec()), for both
 * paths, the fast take's and the PL/pgSQL take's (dedup.outbox_log_scan()):
 * the range of the log a take reads.  Returns how many, FAST_SCAN's rows in
 * SPI_tuptable.  read_only: with the caller's snapshot (fast_exec()).
 */
static uint64
fast_scan(const DedupFingerprint *part, text *topic, int64 from, int64 upto, int32 limit,
		  bool read_only)
{
	Datum		args[5];

	args[0] = PointerGetDatum(part);
	args[1] = PointerGetDatum(topic);
	args[2] = Int64GetDatum(from);
	args[3] = Int64GetDatum(upto);
	args[4] = Int32GetDatum(limit);
	fast_exec(FAST_SCAN, args, NULL, read_only);
	return SPI_processed;
}

/*
 * A take that hands out no batch moved topic's position in partition part
 * from pos to next: written in outbox_topics when next is past pos (a batch
 * carries the position in its row), for both paths, the fast take's and
 * the PL/pgSQL take's (dedup.outbox_topic_move()).
 */
static void
fast_topic_move(const DedupFingerprint *part, text *topic, int64 pos, int64 next)
{
	Datum		args[3];

	if (next <= pos)
		return;
	args[0] = PointerGetDatum(part);
	args[1] = PointerGetDatum(topic);
	args[2] = Int64GetDatum(next);
	if (fast_run(FAST_TOPIC_UPDATE, args, 0) != SPI_OK_UPDATE)
		elog(ERROR, "could not write the outbox's position");
}


/*
 * Take a batch of topic on the fast path, into the result set of a take
 * (with the batch's id first when with_id), under a lease of lease from
 * the hand-out; false, having written nothing, when the case is not one of
 * the fast path's.
 */
bool
outbox_fast_take(ReturnSetInfo *rsinfo, bool with_id, const DedupFingerprint *part, text *topic,
				 int32 batch_size, const Interval *lease, DedupScopeSettings *settings)
{
	int64		pos;
	int64		low;			/* the lowest id of the batches out, or 0 */
	int64		newest = 0;		/* the topic's newest batch row's id, or 0 */
	char	   *topic_str;
	int64		batch_id;
	FastAggregates out;
	int64		stable;
	int32		scan_limit;
	uint64		n;
	int32	   *hashes;
	int			naggs;
	TimestampTz lease_end;
	FastState	st;
	SPITupleTable *scan;
	uint64		scanned;
	Datum	   *cols;
	bool	   *colnulls;

	/*
	 * The topic's position; nothing in outbox_retry or outbox_held, something
	 * in the log; the batches out: none expired; the aggregates they hold
	 */
	(void) outbox_lock_relay(part, topic, false);
	outbox_wait_puts(topic);
	fast_state(part, topic, &st, false);
	/* no position yet, or events in outbox_retry or outbox_held: give way */
	if (!st.positioned || st.has_retry || st.has_held)
		return false;
	pos = st.next_seq;
	newest = st.has_batch ? st.newest_id : 0;
	topic_str = text_to_cstring(topic);
	fast_aggregates_out(part, topic, &st, false, &out);
	/* a lease passed (handed out again), or aggregates not known: give way */
	if (out.expired || out.unknown || out.has_null)
		return false;
	low = out.lowest;
	if (!st.has_log)
		return true;			/* nothing to hand out */

	/*
	 * One more than the batch holds: whether the log goes on past it.  The
	 * position after the take is the PL/pgSQL take's rule,
	 * outbox_next_position(), with its scan limit for a take with room for
	 * batch_size events (src/outbox.c).
	 */
	stable = outbox_stable_seq(part, topic);
	scan_limit = outbox_scan_limit(batch_size, batch_size);
	scanned = fast_scan(part, topic, pos, stable, batch_size + 1, false);
	scan = SPI_tuptable;
	n = Min(scanned, (uint64) batch_size);
	if (n == 0)
	{
		/* no batch: the position, where it moved, in outbox_topics */
		fast_topic_move(part, topic, pos,
						outbox_next_position(pos, stable, 0, 0, scan_limit, 0));
		return true;
	}

	/*
	 * Each event's FAST_SCAN_NCOLS columns, deformed once: fetched one by
	 * one, each column after a varlena one walks the row again.
	 */
	Assert(scan->tupdesc->natts == FAST_SCAN_NCOLS);
	cols = palloc(sizeof(Datum) * FAST_SCAN_NCOLS * n);
	colnulls = palloc(sizeof(bool) * FAST_SCAN_NCOLS * n);
	for (uint64 i = 0; i < n; i++)
		heap_deform_tuple(scan->vals[i], scan->tupdesc, &cols[i * FAST_SCAN_NCOLS],
						  &colnulls[i * FAST_SCAN_NCOLS]);

	/*
	 * No event to hold back: no aggregate a batch holds (and for the 1.0
	 * take, none twice: a batch of take_batch holds several events of an
	 * aggregate in seq order).  The batch's aggregates, each once.
	 */
	hashes = palloc(sizeof(int32) * n);
	for (uint64 i = 0; i < n; i++)
		hashes[i] = DatumGetInt32(FAST_SCAN_COL(i, 9));
	qsort(hashes, n, sizeof(int32), fast_int4_cmp);
	naggs = 0;
	for (uint64 i = 0; i < n; i++)
	{
		if (i > 0 && hashes[i] == hashes[i - 1])
		{
			if (!with_id)
				return false;
			continue;
		}
		if (out.naggs > 0 && bsearch(&hashes[i], out.aggs, out.naggs, sizeof(int32),
									 fast_int4_cmp) != NULL)
			return false;
		hashes[naggs++] = hashes[i];
	}

	/*
	 * The batch's row, with the topic's position after it and its low mark
	 * from the lowest id of the batches out read above (fast_batch_insert())
	 */
	/* above the topic's newest (its position and low mark are that row's) */
	batch_id = outbox_batch_new_id_above(part, newest);
	/* the lease runs from the hand-out, after the wait for the topic's puts */
	lease_end = dedup_check_timestamp_plus(GetCurrentTimestamp(), lease);
	{
		Datum		w[FAST_WRITE_NARGS];
		char		wnulls[FAST_WRITE_NARGS + 1];
		Datum	   *elems = palloc(sizeof(Datum) * naggs);
		ArrayType  *none = construct_empty_array(INT8OID);

		memset(wnulls, ' ', FAST_WRITE_NARGS);
		wnulls[FAST_WRITE_NARGS] = '\0';
		for (int i = 0; i < naggs; i++)
			elems[i] = Int32GetDatum(hashes[i]);
		w[FAST_WRITE_PART] = PointerGetDatum(part);
		w[FAST_WRITE_TOPIC] = PointerGetDatum(topic);
		w[FAST_WRITE_ID] = Int64GetDatum(batch_id);
		w[FAST_WRITE_ATTEMPT] = Int32GetDatum(1);
		w[FAST_WRITE_LEASE] = TimestampTzGetDatum(lease_end);
		w[FAST_WRITE_FIRST] = FAST_SCAN_COL(0, 1);
		w[FAST_WRITE_LAST] = FAST_SCAN_COL(n - 1, 1);
		w[FAST_WRITE_SETTLED] = PointerGetDatum(none);
		w[FAST_WRITE_EXTRA] = PointerGetDatum(none);
		w[FAST_WRITE_RETRIED] = Int32GetDatum(0);
		w[FAST_WRITE_EVENTS] = Int32GetDatum((int32) n);
		w[FAST_WRITE_AGGREGATES] =
			PointerGetDatum(construct_array(elems, naggs, INT4OID, sizeof(int32), true,
											TYPALIGN_INT));
		w[FAST_WRITE_MEMBERS] = PointerGetDatum(none);
		w[FAST_WRITE_NEXT] =
			Int64GetDatum(outbox_next_position(pos, stable, (int64) scanned, (int64) n,
											   scan_limit,
											   DatumGetInt64(FAST_SCAN_COL(n - 1, 1))));
		(void) fast_batch_insert(w, wnulls, low);
	}
	fast_newest_note(part, topic_str, batch_id);

	/* the events, as take returns them (take_batch with each one's seq last) */
	for (uint64 i = 0; i < n; i++)
	{
		Datum		values[11];
		bool		nulls[11];
		int			k = 0;

		if (with_id)
		{
			values[k] = Int64GetDatum(batch_id);
			nulls[k++] = false;
		}
		for (int col = 2; col <= 7; col++)
		{
			values[k] = FAST_SCAN_COL(i, col);
			nulls[k++] = FAST_SCAN_NULL(i, col);
		}
		values[k] = Int32GetDatum(1);	/* attempts */
		nulls[k++] = false;
		values[k] = FAST_SCAN_COL(i, 8);
		nulls[k++] = FAST_SCAN_NULL(i, 8);
		values[k] = TimestampTzGetDatum(lease_end);
		nulls[k++] = false;
		if (with_id)
		{
			values[k] = FAST_SCAN_COL(i, 1);
			nulls[k++] = FAST_SCAN_NULL(i, 1);
		}
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	dedup_scope_counters_count(settings->counters, DEDUP_COUNT_EVENTS_TAKEN, (int64) n);
	return true;
}

/*
 * Ack a batch whole on the fast path for caller: a row appended, counts
 * its events acked, and returns how many it had; or -1, having written
 * nothing, when no batch of that id with no event of outbox_retry is
 * handed out (the PL/pgSQL ack answers).  A batch of a topic the caller
 * may not relay is answered as one not handed out, before anything is
 * written: 0, naming nothing (its id tells no topic).
 */
int32
outbox_fast_ack(const DedupFingerprint *part, int64 batch_id, Oid caller)
{
	Datum		args[4];
	bool		isnull;
	text	   *topic;
	DedupScopeSettings settings;
	int32		n;
	uint32		number;
	int64		counter;

	/* an id of another partition's batch names none here */
	if (!outbox_batch_decode(batch_id, &number, &counter) ||
		number != outbox_part_number(part))
		return -1;
	args[0] = PointerGetDatum(part);
	args[1] = Int64GetDatum(batch_id);
	if (fast_run(FAST_ACK_TOPIC, args, 0) != SPI_OK_SELECT || SPI_processed == 0)
		return -1;
	topic = DatumGetTextPP(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1,
										 &isnull));
	if (!dedup_scope_allows(topic, caller, DEDUP_PRIV_RELAY, &settings))
		return 0;

	/*
	 * The batch's lock (its rev 0 row: the settles of a batch go one after
	 * another), then, in a statement of its own that sees what a settle that
	 * held it committed, its newest row, still out: a row appended that says
	 * it is out no more.  (Of that topic still: a batch of another would be
	 * under another id.)
	 */
	fast_run(FAST_ACK_LOCK, args, 0);
	args[2] = PointerGetDatum(topic);
	if (fast_run(FAST_ACK, args, 0) != SPI_OK_SELECT || SPI_processed == 0)
		return -1;

	{
		HeapTuple	tup = SPI_tuptable->vals[0];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		Datum		w[FAST_ROW_NCOLS];
		char		wnulls[FAST_ROW_NCOLS + 1];

		/*
		 * the row of a batch out no more, appended as the PL/pgSQL settles'
		 * (fast_batch_append(): none of its state, which FAST_ACK does not
		 * read, but its counts, the topic's position and the low mark)
		 */
		memset(w, 0, sizeof(w));
		memset(wnulls, ' ', FAST_ROW_NCOLS);
		wnulls[FAST_ROW_NCOLS] = '\0';
		w[FAST_ROW_PART] = args[0];
		w[FAST_ROW_TOPIC] = args[2];
		w[FAST_ROW_ID] = args[1];
		w[FAST_ROW_REV] = SPI_getbinval(tup, desc, 1, &isnull);
		w[FAST_ROW_BUSY] = BoolGetDatum(false);
		w[FAST_ROW_ATTEMPT] = SPI_getbinval(tup, desc, 2, &isnull);
		w[FAST_ROW_RETRIED] = Int32GetDatum(0); /* FAST_ACK's */
		w[FAST_ROW_EVENTS] = SPI_getbinval(tup, desc, 3, &isnull);
		w[FAST_ROW_NEXT] = SPI_getbinval(tup, desc, 4, &isnull);
		w[FAST_ROW_LOW] = SPI_getbinval(tup, desc, 5, &isnull);
		n = DatumGetInt32(w[FAST_ROW_EVENTS]);
		/* its newest row under a transaction snapshot too (40001 if not) */
		outbox_batch_check_current(part, batch_id, DatumGetInt32(w[FAST_ROW_REV]));
		fast_batch_append(w, wnulls);
	}
	dedup_scope_counters_count(settings.counters, DEDUP_COUNT_EVENTS_ACKED, n);
	return n;
}

/*
 * dedup.outbox_ack_whole(caller oid, in_part dedup_fingerprint,
 *						  batch_id bigint) RETURNS integer
 *
 * The whole-batch ack above for the PL/pgSQL ack (outbox_settle.sql), so
 * that both paths run this one: -1 when it does not apply.
 */
PG_FUNCTION_INFO_V1(dedup_outbox_ack_whole);
Datum
dedup_outbox_ack_whole(PG_FUNCTION_ARGS)
{
	int32		n;

	outbox_fast_plans_check();
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "could not connect to SPI");
	n = outbox_fast_ack(PG_GETARG_DEDUP_FINGERPRINT_P(1), PG_GETARG_INT64(2), PG_GETARG_OID(0));
	SPI_finish();
	PG_RETURN_INT32(n);
}

/*
 * dedup.outbox_take_state(in_part dedup_fingerprint, for_topic text,
 *						   OUT next_seq bigint, OUT has_retry boolean,
 *						   OUT has_held boolean, OUT has_log boolean,
 *						   OUT low_id bigint, OUT newest_id bigint)
 *
 * The state a take starts from (fast_state()) for the PL/pgSQL take
 * (outbox_take.sql), so that both paths read this one.  Read with the
 * caller's snapshot, as a STABLE function reads: dedup.outbox_position()
 * runs it, and a STABLE caller of that (dedup.outbox_stats(),
 * dedup.outbox_check_ids()) reads the position with the events and
 * batches it reads, in one snapshot (a new one here counted events a take
 * committed meanwhile handed out as neither pending nor in flight).
 */
PG_FUNCTION_INFO_V1(dedup_outbox_take_state);
Datum
dedup_outbox_take_state(PG_FUNCTION_ARGS)
{
	TupleDesc	desc;
	FastState	st;
	Datum		values[6];
	bool		nulls[6] = {false};

	if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	outbox_fast_plans_check();
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "could not connect to SPI");
	fast_state(PG_GETARG_DEDUP_FINGERPRINT_P(0), PG_GETARG_TEXT_PP(1), &st, true);
	SPI_finish();
	values[0] = Int64GetDatum(st.next_seq);
	nulls[0] = !st.positioned;
	values[1] = BoolGetDatum(st.has_retry);
	values[2] = BoolGetDatum(st.has_held);
	values[3] = BoolGetDatum(st.has_log);
	values[4] = Int64GetDatum(st.low_id);
	nulls[4] = !st.has_batch;
	values[5] = Int64GetDatum(st.newest_id);
	nulls[5] = !st.has_batch;
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(desc), values, nulls)));
}

/*
 * A batch's row as dedup.outbox_batch_write() and
 * dedup.outbox_batch_append() take it: in_part (argument 0) and b (argument
 * 1), neither NULL (22004), b's columns read by name (a table updated from
 * 1.0 has them in its order) into values and nulls (as SPI_execute_plan()
 * takes them) as FAST_APPEND's parameters, part from in_part.  b deformed,
 * its type's descriptor and the column of each parameter are left in *row,
 * for a caller that returns b changed.
 */
typedef struct FastRowArg
{
	TupleDesc	desc;
	Datum	   *cols;
	bool	   *colnulls;
	int			attnums[FAST_ROW_NCOLS];
} FastRowArg;

static void
fast_row_arg(FunctionCallInfo fcinfo, FastRowArg *row, Datum *values, char *nulls)
{
	HeapTupleHeader b;
	HeapTupleData tuple;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("in_part and b must not be null")));
	b = PG_GETARG_HEAPTUPLEHEADER(1);
	row->desc = lookup_rowtype_tupdesc_copy(HeapTupleHeaderGetTypeId(b),
											HeapTupleHeaderGetTypMod(b));
	tuple.t_len = HeapTupleHeaderGetDatumLength(b);
	ItemPointerSetInvalid(&tuple.t_self);
	tuple.t_tableOid = InvalidOid;
	tuple.t_data = b;
	row->cols = palloc(sizeof(Datum) * row->desc->natts);
	row->colnulls = palloc(sizeof(bool) * row->desc->natts);
	heap_deform_tuple(&tuple, row->desc, row->cols, row->colnulls);

	for (int col = 0; col < FAST_ROW_NCOLS; col++)
	{
		row->attnums[col] = -1;
		for (int i = 0; i < row->desc->natts; i++)
		{
			Form_pg_attribute att = TupleDescAttr(row->desc, i);

			if (!att->attisdropped && strcmp(NameStr(att->attname), fast_row_names[col]) == 0)
				row->attnums[col] = i;
		}
		if (row->attnums[col] < 0)
			elog(ERROR, "a batch's row has no column \"%s\"", fast_row_names[col]);
		values[col] = row->cols[row->attnums[col]];
		nulls[col] = row->colnulls[row->attnums[col]] ? 'n' : ' ';
	}
	nulls[FAST_ROW_NCOLS] = '\0';
	values[FAST_ROW_PART] = PG_GETARG_DATUM(0);
	nulls[FAST_ROW_PART] = ' ';
}

/*
 * dedup.outbox_batch_write(in_part dedup_fingerprint, b dedup.outbox_batches,
 *							low_out bigint) RETURNS bigint
 *
 * A batch handed out, its rev 0 row, for the PL/pgSQL take
 * (dedup.outbox_batch_insert(), outbox_take.sql), so that both paths write
 * it by this one (fast_batch_insert()): b's columns but part, rev, busy and
 * low_id; low_out the lowest id of its topic's batches out, NULL with none.
 * Returns the low mark written.
 */
PG_FUNCTION_INFO_V1(dedup_outbox_batch_write);
Datum
dedup_outbox_batch_write(PG_FUNCTION_ARGS)
{
	/* the column of b (FAST_APPEND's parameter) of each of FAST_WRITE's */
	static const int from_row[FAST_WRITE_NARGS] = {
		[FAST_WRITE_PART] = FAST_ROW_PART,
		[FAST_WRITE_TOPIC] = FAST_ROW_TOPIC,
		[FAST_WRITE_ID] = FAST_ROW_ID,
		[FAST_WRITE_ATTEMPT] = FAST_ROW_ATTEMPT,
		[FAST_WRITE_LEASE] = FAST_ROW_LEASE,
		[FAST_WRITE_FIRST] = FAST_ROW_FIRST,
		[FAST_WRITE_LAST] = FAST_ROW_LAST,
		[FAST_WRITE_SETTLED] = FAST_ROW_SETTLED,
		[FAST_WRITE_EXTRA] = FAST_ROW_EXTRA,
		[FAST_WRITE_RETRIED] = FAST_ROW_RETRIED,
		[FAST_WRITE_EVENTS] = FAST_ROW_EVENTS,
		[FAST_WRITE_AGGREGATES] = FAST_ROW_AGGREGATES,
		[FAST_WRITE_MEMBERS] = FAST_ROW_MEMBERS,
		[FAST_WRITE_NEXT] = FAST_ROW_NEXT,
		[FAST_WRITE_LOW] = FAST_ROW_LOW,	/* fast_batch_insert() sets it */
	};
	FastRowArg	row;
	Datum		r[FAST_ROW_NCOLS];
	char		rnulls[FAST_ROW_NCOLS + 1];
	Datum		w[FAST_WRITE_NARGS];
	char		wnulls[FAST_WRITE_NARGS + 1];
	int64		low;

	fast_row_arg(fcinfo, &row, r, rnulls);
	for (int i = 0; i < FAST_WRITE_NARGS; i++)
	{
		w[i] = r[from_row[i]];
		wnulls[i] = rnulls[from_row[i]];
	}
	wnulls[FAST_WRITE_NARGS] = '\0';
	if (wnulls[FAST_WRITE_ID] == 'n')
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("b.id must not be null")));
	outbox_fast_plans_check();
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "could not connect to SPI");
	low = fast_batch_insert(w, wnulls, PG_ARGISNULL(2) ? 0 : PG_GETARG_INT64(2));
	SPI_finish();
	PG_RETURN_INT64(low);
}

/*
 * dedup.outbox_batch_append(in_part dedup_fingerprint,
 *							 b dedup.outbox_batches) RETURNS dedup.outbox_batches
 *
 * A batch's state after a settle, for the PL/pgSQL settles and takes
 * (outbox_settle.sql, outbox_take.sql), so that both paths append it by
 * this one (fast_batch_append()): b, its newest row, changed, appended in
 * partition in_part as the next rev of its id.  Returns the row written.
 */
PG_FUNCTION_INFO_V1(dedup_outbox_batch_append);
Datum
dedup_outbox_batch_append(PG_FUNCTION_ARGS)
{
	FastRowArg	row;
	Datum		w[FAST_ROW_NCOLS];
	char		wnulls[FAST_ROW_NCOLS + 1];

	fast_row_arg(fcinfo, &row, w, wnulls);
	outbox_fast_plans_check();
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "could not connect to SPI");
	fast_batch_append(w, wnulls);
	SPI_finish();

	/* the row written: b with the columns fast_batch_append() set */
	for (int col = 0; col < FAST_ROW_NCOLS; col++)
	{
		row.cols[row.attnums[col]] = w[col];
		row.colnulls[row.attnums[col]] = wnulls[col] == 'n';
	}
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(row.desc, row.cols, row.colnulls)));
}

/*
 * dedup.outbox_batches_out(in_part dedup_fingerprint, for_topic text)
 *		RETURNS SETOF dedup.outbox_batches
 *
 * The batches of a topic out, for the PL/pgSQL relay (outbox_take.sql,
 * outbox_settle.sql, outbox_admin.sql), so that both paths read them by
 * this one (fast_batches_out()), from the newest batch row's low mark up
 * (fast_state()).  With the caller's snapshot, as outbox_take_state():
 * its STABLE callers (outbox_batches_of(), which an ack by ids checks
 * with) read the batches in the snapshot they read the rest in.
 */
PG_FUNCTION_INFO_V1(dedup_outbox_batches_out);
Datum
dedup_outbox_batches_out(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	const DedupFingerprint *part = PG_GETARG_DEDUP_FINGERPRINT_P(0);
	text	   *topic = PG_GETARG_TEXT_PP(1);
	FastState	st;

	InitMaterializedSRF(fcinfo, 0);
	outbox_fast_plans_check();
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "could not connect to SPI");
	fast_state(part, topic, &st, true);
	if (!fast_none_out(&st))
	{
		TupleDesc	out = rsinfo->setDesc;
		HeapTuple  *rows;
		SPITupleTable *table;
		uint64		n = fast_batches_out(part, topic, st.low_id, &rows, &table, true);
		int		   *cols = palloc(sizeof(int) * out->natts);
		Datum	   *values = palloc(sizeof(Datum) * out->natts);
		bool	   *nulls = palloc(sizeof(bool) * out->natts);

		/* the table's columns, by name (FAST_OUT's x.* is in its order) */
		for (int i = 0; i < out->natts; i++)
		{
			Form_pg_attribute att = TupleDescAttr(out, i);

			cols[i] = att->attisdropped ? 0 : SPI_fnumber(table->tupdesc, NameStr(att->attname));
			if (!att->attisdropped && cols[i] <= 0)
				elog(ERROR, "could not read the outbox's batches");
		}
		for (uint64 r = 0; r < n; r++)
		{
			for (int i = 0; i < out->natts; i++)
			{
				if (cols[i] <= 0)
				{
					values[i] = (Datum) 0;
					nulls[i] = true;
				}
				else
					values[i] = SPI_getbinval(rows[r], table->tupdesc, cols[i], &nulls[i]);
			}
			tuplestore_putvalues(rsinfo->setResult, out, values, nulls);
		}
	}
	SPI_finish();
	return (Datum) 0;
}

/*
 * dedup.outbox_aggregates_out(in_part dedup_fingerprint, for_topic text)
 *		RETURNS integer[]
 *
 * The aggregates the batches of a topic out hold (fast_aggregates_out()),
 * for the PL/pgSQL take (outbox_take.sql), so that both paths read them by
 * this one: sorted, each once, a NULL last when one holds a NULL (none the
 * relay writes; as the SELECT DISTINCT over their unnest() it replaced).
 * With the caller's snapshot, as outbox_batches_out(): the take reads them
 * in a statement of its own, before what waits in outbox_retry.
 */
PG_FUNCTION_INFO_V1(dedup_outbox_aggregates_out);
Datum
dedup_outbox_aggregates_out(PG_FUNCTION_ARGS)
{
	MemoryContext caller = CurrentMemoryContext;
	MemoryContext spi;
	FastState	st;
	FastAggregates out;
	Datum	   *elems;
	bool	   *nulls;
	int			nelems;
	int			lbs = 1;
	ArrayType  *result;

	outbox_fast_plans_check();
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "could not connect to SPI");
	fast_state(PG_GETARG_DEDUP_FINGERPRINT_P(0), PG_GETARG_TEXT_PP(1), &st, true);
	fast_aggregates_out(PG_GETARG_DEDUP_FINGERPRINT_P(0), PG_GETARG_TEXT_PP(1), &st, true, &out);
	spi = MemoryContextSwitchTo(caller);
	nelems = out.naggs + (out.has_null ? 1 : 0);
	elems = palloc(sizeof(Datum) * Max(nelems, 1));
	nulls = palloc0(sizeof(bool) * Max(nelems, 1));
	for (int i = 0; i < out.naggs; i++)
		elems[i] = Int32GetDatum(out.aggs[i]);
	if (out.has_null)
		nulls[out.naggs] = true;
	result = nelems == 0 ? construct_empty_array(INT4OID) :
		construct_md_array(elems, nulls, 1, &nelems, &lbs, INT4OID, sizeof(int32), true,
						   TYPALIGN_INT);
	MemoryContextSwitchTo(spi);
	SPI_finish();
	PG_RETURN_ARRAYTYPE_P(result);
}

/*
 * dedup.outbox_log_scan(in_part dedup_fingerprint, for_topic text,
 *						 from_seq bigint, upto_seq bigint, scan_limit integer,
 *						 OUT seqs bigint[], OUT aggregateids text[],
 *						 OUT hashes integer[])
 *
 * The range of the log a take reads (fast_scan()), for the PL/pgSQL take
 * (outbox_take.sql), so that both paths read it by this one: of each event
 * from from_seq up to upto_seq, in seq order, at most scan_limit, its seq,
 * aggregate id and hashtext() of it.  Arrays, one row: the take reads them
 * in a statement of its own (on a Citus cluster a statement that reads a
 * table of the outbox runs on a shard, where this one's could not).  With
 * the caller's snapshot, as outbox_take_state().
 */
PG_FUNCTION_INFO_V1(dedup_outbox_log_scan);
Datum
dedup_outbox_log_scan(PG_FUNCTION_ARGS)
{
	MemoryContext caller = CurrentMemoryContext;
	MemoryContext spi;
	TupleDesc	desc;
	uint64		n;
	Datum	   *seqs;
	Datum	   *aggregateids;
	Datum	   *hashes;
	Datum		values[3];
	bool		nulls[3] = {false};
	HeapTuple	result;

	if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	outbox_fast_plans_check();
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "could not connect to SPI");
	n = fast_scan(PG_GETARG_DEDUP_FINGERPRINT_P(0), PG_GETARG_TEXT_PP(1), PG_GETARG_INT64(2),
				  PG_GETARG_INT64(3), PG_GETARG_INT32(4), true);
	spi = MemoryContextSwitchTo(caller);
	seqs = palloc(sizeof(Datum) * Max(n, 1));
	aggregateids = palloc(sizeof(Datum) * Max(n, 1));
	hashes = palloc(sizeof(Datum) * Max(n, 1));
	for (uint64 i = 0; i < n; i++)
	{
		HeapTuple	tup = SPI_tuptable->vals[i];
		TupleDesc	scan = SPI_tuptable->tupdesc;
		bool		isnull;

		/* FAST_SCAN's seq, aggregateid and its hash: none NULL */
		seqs[i] = SPI_getbinval(tup, scan, 1, &isnull);
		aggregateids[i] = PointerGetDatum(DatumGetTextPCopy(SPI_getbinval(tup, scan, 4,
																		  &isnull)));
		hashes[i] = SPI_getbinval(tup, scan, 9, &isnull);
	}
	values[0] = PointerGetDatum(construct_array(seqs, (int) n, INT8OID, sizeof(int64),
												FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
	values[1] = PointerGetDatum(construct_array(aggregateids, (int) n, TEXTOID, -1, false,
												TYPALIGN_INT));
	values[2] = PointerGetDatum(construct_array(hashes, (int) n, INT4OID, sizeof(int32), true,
												TYPALIGN_INT));
	result = heap_form_tuple(BlessTupleDesc(desc), values, nulls);
	MemoryContextSwitchTo(spi);
	SPI_finish();
	PG_RETURN_DATUM(HeapTupleGetDatum(result));
}

/*
 * dedup.outbox_topic_move(in_part dedup_fingerprint, for_topic text,
 *						   pos bigint, next_seq bigint) RETURNS void
 *
 * The topic's position moved by a take that hands out no batch
 * (fast_topic_move()), for the PL/pgSQL take (outbox_take.sql), so that
 * both paths write it by this one: next_seq, when past pos.
 */
PG_FUNCTION_INFO_V1(dedup_outbox_topic_move);
Datum
dedup_outbox_topic_move(PG_FUNCTION_ARGS)
{
	outbox_fast_plans_check();
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "could not connect to SPI");
	fast_topic_move(PG_GETARG_DEDUP_FINGERPRINT_P(0), PG_GETARG_TEXT_PP(1), PG_GETARG_INT64(2),
					PG_GETARG_INT64(3));
	SPI_finish();
	PG_RETURN_VOID();
}
