/*
 * report.c: the end of a simulation — what happened (from the counters),
 * the cleanup worker's figures, and the invariants, each checked in the
 * database against the feed's messages (sim.messages).  Returns the exit
 * status: 0 when every invariant holds, 1 otherwise.  The report's own
 * state (its connection, the invariants that failed) is a Report of
 * report_print's.
 *
 * Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.
 */
#include "sim.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* the report being made: report_print's */
typedef struct Report
{
	Sim		   *sim;
	PGconn	   *conn;
	int			failures;
	char		failed[1024];	/* what failed, "; "-separated */
} Report;

/* The first column of the first row of sql, as a number (NULL is 0). */
static long
report_number(Report *r, const char *sql, const char *param)
{
	const char *params[] = {param};
	PGresult   *res = PQexecParams(r->conn, sql, param ? 1 : 0, NULL, params,
								   NULL, NULL, 0);
	long		n;

	if (!db_ok(res) || PQntuples(res) != 1)
	{
		fprintf(stderr, "dedup-sim: report query failed: %s\nin: %s\n",
				PQresultErrorMessage(res), sql);
		exit(2);
	}
	n = atol(PQgetvalue(res, 0, 0));
	PQclear(res);
	return n;
}

static void
report_check(Report *r, const char *what, long expected, long found)
{
	bool		ok = expected == found;

	printf("  %-68s %10ld %10ld  %s\n", what, expected, found, ok ? "ok" : "FAILED");
	if (!ok)
	{
		r->failures++;
		if (strlen(r->failed) + strlen(what) + 4 < sizeof(r->failed))
		{
			if (r->failed[0])
				strcat(r->failed, "; ");
			strcat(r->failed, what);
		}
	}
}

/* The cleanup worker's figures for this database, when it runs. */
static void
report_cleanup(Report *r)
{
	Sim		   *sim = r->sim;
	PGresult   *res = PQexec(r->conn,
							 "SELECT kind, rows_deleted, batches, errors,"
							 " coalesce(round(extract(epoch FROM cleanup_lag)::numeric, 1)::text, '-')"
							 " FROM dedup_cleanup_stats() ORDER BY kind");
	int			i;

	printf("\n== cleanup worker (dedup_cleanup_stats()%s)\n",
		   sim->counters.crashes > 0 ? ", since the last server start" : "");
	if (!db_ok(res))
	{
		printf("  not available: %s", PQresultErrorMessage(res));
		PQclear(res);
		return;
	}
	printf("  %-8s %14s %9s %7s %16s\n", "kind", "rows deleted", "batches", "errors",
		   "cleanup lag (s)");
	for (i = 0; i < PQntuples(res); i++)
		printf("  %-8s %14s %9s %7s %16s\n", PQgetvalue(res, i, 0), PQgetvalue(res, i, 1),
			   PQgetvalue(res, i, 2), PQgetvalue(res, i, 3), PQgetvalue(res, i, 4));
	PQclear(res);
	printf("  rows now (live, expired, released): dedup.claims %ld; events in the outbox's log %ld\n"
		   "  (ttl and retention %d s; a claim goes at the first pass after it expires, a\n"
		   "  published event at the first pass after its retention)\n",
		   report_number(r, "SELECT count(*) FROM dedup.claims", NULL),
		   report_number(r, "SELECT count(*) FROM dedup.outbox", NULL),
		   sim->options.ttl_seconds);
}

static void
report_happened(Sim *sim, int64_t elapsed_ms)
{
	const SimCounters *c = &sim->counters;
	int			i;

	printf("\n== what happened (%.1f s, %.0f deliveries/s)\n", elapsed_ms / 1000.0,
		   c->deliveries * 1000.0 / (elapsed_ms > 0 ? elapsed_ms : 1));
	printf("  deliveries            %ld: %ld from the feed, %ld redelivered after a failure"
		   " or a busy answer, %ld client retries of hung calls\n",
		   (long) c->deliveries, feed_total(sim), (long) c->redeliveries,
		   (long) c->client_retries);
	printf("  applied               %ld business transactions committed"
		   " (%ld with dedup_claim, %ld with dedup_begin/dedup_complete)\n",
		   (long) c->applied, (long) (c->applied - c->applied_record),
		   (long) c->applied_record);
	printf("  duplicates suppressed %ld: dedup_claim said false %ld times,"
		   " dedup_begin replayed %ld\n",
		   (long) (c->dup_claims + c->replays), (long) c->dup_claims, (long) c->replays);
	printf("  busy, retried later   %ld: claim nowait (55P03) %ld, dedup_begin in_progress %ld\n",
		   (long) (c->busy_nowait + c->busy_in_progress), (long) c->busy_nowait,
		   (long) c->busy_in_progress);
	printf("  records               %ld external calls; %ld begins went on from an earlier"
		   " attempt (a lease taken over, or a release);\n"
		   "                        %ld completes refused after a takeover"
		   " (55006 or 42704, rolled back)\n",
		   (long) c->external_calls, (long) c->restarts, (long) c->leases_lost);
	printf("  rejected              %ld deliveries of poison messages rolled back"
		   " by a CHECK constraint, claim included\n", (long) c->poison_rejected);
	printf("  faults injected       %ld connections killed mid-transaction, %ld rollbacks,"
		   " %ld failed and %ld hung external calls,\n"
		   "                        %ld relay deaths before ack, %ld batches published twice,"
		   " %ld postmaster kills",
		   (long) c->kills, (long) c->rollbacks, (long) c->failed_calls,
		   (long) c->hung_calls, (long) c->relay_faults, (long) c->broker_dups,
		   (long) c->crashes);
	for (i = 0; i < c->crashes && i < 8; i++)
		printf("%s%.1f s", i == 0 ? " (back after " : ", ", c->crash_outage_ms[i] / 1000.0);
	printf("%s\n", c->crashes > 0 ? ")" : "");
	printf("  connections lost      %ld statements or commits failed because the"
		   " connection broke (redelivered)\n", (long) c->lost_connections);
	printf("  outbox relay          %ld events published, %ld acked; downstream applied %ld"
		   " and suppressed %ld published again\n",
		   (long) c->published, (long) c->acked, (long) c->downstream_new,
		   (long) c->downstream_dup);
	if (sim->options.history_seconds > 0)
		printf("  history               %ld duplicates answered by the history (copies past the"
			   " ttl, expired or folded);\n"
			   "                        %ld of them first deliveries of messages never applied:"
			   " false positives,\n"
			   "                        %.5f of the %ld messages (false_positive_rate %g)\n",
			   (long) c->history_caught, (long) c->history_false,
			   (double) c->history_false / (sim->options.messages > 0 ? sim->options.messages : 1),
			   sim->options.messages, sim->options.history_rate);
	printf("  dedup window          the longest a copy arrived after its message's"
		   " commit: %.1f s (ttl %d s)\n", c->max_gap_ms / 1000.0, sim->options.ttl_seconds);
	if (c->max_gap_ms >= sim->options.ttl_seconds * 1000L && sim->options.history_seconds == 0)
		printf("  NOTE: copies arrived after the dedup window: they count as new messages,"
			   " and double effects are\n"
			   "        expected; make --ttl longer than the redeliveries, or --window"
			   " shorter\n");
}

int
report_print(Sim *sim, int64_t elapsed_ms)
{
	Report		report = {.sim = sim};
	Report	   *r = &report;
	long		expected_applied;
	long		ledger;

	r->conn = db_plain(sim, "dedup-sim report");
	report_happened(sim, elapsed_ms);
	report_cleanup(r);

	printf("\n== invariants, checked in the database%*s %10s %10s\n", 38, "",
		   "expected", "found");
	expected_applied = report_number(r, "SELECT count(*) FROM sim.to_apply WHERE amount > 0", NULL);
	ledger = report_number(r, "SELECT count(*) FROM sim.ledger", NULL);
	report_check(r, "business effects = messages to apply (ledger rows)", expected_applied, ledger);
	report_check(r, "messages applied more than once", 0,
				 report_number(r, "SELECT count(*) FROM (SELECT FROM sim.ledger"
							   " GROUP BY message_id HAVING count(*) > 1) AS d", NULL));
	report_check(r, "messages lost (never applied)", 0,
				 report_number(r, "SELECT count(*) FROM sim.to_apply AS m WHERE m.amount > 0"
							   " AND NOT EXISTS (SELECT FROM sim.ledger AS l"
							   " WHERE l.message_id = m.id)", NULL));
	if (sim->options.history_seconds > 0)
		report_check(r, "messages the history refused, yet applied (not false positives)", 0,
					 report_number(r, "SELECT count(*) FROM sim.refused AS r"
								   " WHERE EXISTS (SELECT FROM sim.ledger AS l"
								   " WHERE l.message_id = r.message_id)", NULL));
	report_check(r, "messages applied by the wrong path (claim vs record)", 0,
				 report_number(r, "SELECT count(*) FROM sim.ledger AS l JOIN sim.messages AS m"
							   " ON m.id = l.message_id WHERE l.path <> m.path", NULL));
	report_check(r, "accounts whose balance is not the sum of their messages", 0,
				 report_number(r, "SELECT count(*) FROM sim.accounts AS a LEFT JOIN"
							   " (SELECT account, sum(amount) AS s FROM sim.to_apply"
							   " WHERE amount > 0 GROUP BY account) AS e ON e.account = a.id"
							   " WHERE a.balance <> coalesce(e.s, 0)", NULL));
	report_check(r, "sum of all balances",
				 report_number(r, "SELECT sum(amount) FROM sim.to_apply WHERE amount > 0", NULL),
				 report_number(r, "SELECT sum(balance) FROM sim.accounts", NULL));
	report_check(r, "events left in the outbox (pending, in flight, dead)", 0,
				 report_number(r, "SELECT sum(pending + in_flight + dead)"
							   " FROM dedup_outbox_stats($1)", sim->topic));
	/*
	 * each aggregate's events (an account's) first reached downstream in
	 * commit order: by the downstream transaction that first recorded each
	 * (never two batches of one aggregate out at once), then by seq within
	 * one (the events of a batch, in order); the 1.0 take's events carry no
	 * seq and are left out
	 */
	report_check(r, "events of an aggregate first delivered downstream out of commit order", 0,
				 report_number(r, "SELECT count(*) FROM (SELECT x.seq, lag(x.seq) OVER"
							   " (PARTITION BY x.account ORDER BY x.tx, x.seq) AS prev"
							   " FROM (SELECT DISTINCT ON (n.event_id) n.seq, n.tx, m.account"
							   " FROM sim.notifications AS n JOIN sim.messages AS m ON m.id = n.message_id"
							   " WHERE n.seq > 0 ORDER BY n.event_id, n.tx) AS x) AS y"
							   " WHERE y.seq < y.prev", NULL));
	report_check(r, "committed transactions whose one event reached downstream", ledger,
				 report_number(r, "SELECT count(*) FROM sim.notifications AS n"
							   " WHERE EXISTS (SELECT FROM sim.ledger AS l"
							   " WHERE l.event_id = n.event_id AND l.message_id = n.message_id"
							   " AND l.amount = n.amount)", NULL));
	{
		long		twice = report_number(r, "SELECT count(*) FROM (SELECT FROM sim.notifications"
										  " GROUP BY event_id HAVING count(*) > 1) AS d", NULL);

		report_check(r, "events applied downstream more than once", 0, twice);
		/* a copy published after the downstream's dedup window is not a dedup failure */
		if (twice > 0)
			printf("    (their copies arrived at most %ld ms apart, at least %ld ms; the"
				   " downstream's ttl is %d s)\n",
				   report_number(r, "SELECT coalesce(max(d), 0) FROM (SELECT (extract(epoch FROM"
								 " max(received_at) - min(received_at)) * 1000)::bigint AS d"
								 " FROM sim.notifications GROUP BY event_id"
								 " HAVING count(*) > 1) AS g", NULL),
				   report_number(r, "SELECT coalesce(min(d), 0) FROM (SELECT (extract(epoch FROM"
								 " max(received_at) - min(received_at)) * 1000)::bigint AS d"
								 " FROM sim.notifications GROUP BY event_id"
								 " HAVING count(*) > 1) AS g", NULL),
				   sim->options.ttl_seconds);
	}
	report_check(r, "events downstream of no committed transaction (extra, rolled back)", 0,
				 report_number(r, "SELECT count(*) FROM sim.notifications AS n"
							   " WHERE NOT EXISTS (SELECT FROM sim.ledger AS l"
							   " WHERE l.event_id = n.event_id)", NULL));
	report_check(r, "claims found right after their transaction rolled back (poison)", 0,
				 sim->counters.poison_left);
	report_check(r, "poison deliveries whose claim said duplicate", 0, sim->counters.poison_dup);
	report_check(r, "live records left processing", 0,
				 report_number(r, "SELECT count(*) FROM sim.messages AS m,"
							   " dedup_lookup($1, m.id::text) AS r"
							   " WHERE m.path = 'record' AND r.status = 'processing'",
							   sim->scope_records));
	report_check(r, "dedup_begin mismatches (same request every time)", 0, sim->counters.mismatches);
	report_check(r, "unexpected errors", 0, sim->counters.unexpected);
	PQfinish(r->conn);

	if (r->failures > 0)
	{
		printf("\nFAILED: %d invariant%s broken: %s\n", r->failures,
			   r->failures == 1 ? "" : "s", r->failed);
		return 1;
	}
	printf("\nexactly once: every invariant holds\n");
	return 0;
}
