/*
 * consumer.c: a consumer of the feed, as a service would write it.  Per
 * delivery, one of two paths:
 *   claim:  BEGIN; dedup_claim (nowait); the payment; dedup_outbox_put; COMMIT
 *   record: dedup_begin; an external call outside any transaction; then
 *           BEGIN; the payment; dedup_outbox_put; dedup_complete; COMMIT
 *           (dedup_release when the call or the transaction failed)
 * A delivery whose transaction failed is put back, as a broker redelivers
 * an unacked message; a duplicate or a rejected (poison) message is acked.
 * Faults injected here: rollbacks, failed external calls, hung calls.
 *
 * Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.
 */
#include "sim.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define CONSUMER_BUSY_DELAY_MS	20	/* redelivery after 55P03 */
#define CONSUMER_IN_PROGRESS_DELAY_MS 50	/* after in_progress */
#define CONSUMER_LOST_DELAY_MS	50	/* after a lost connection, as a broker backs off */
#define CONSUMER_OUTCOME_SIZE	16	/* longest dedup_begin outcome + 1 */

/* the statements every consumer prepares */
const char *const consumer_statements[] = {
	"claim", "SELECT dedup_claim($1::text, $2::text, nowait => true)",
	"pay", "UPDATE sim.accounts SET balance = balance + $2::bigint WHERE id = $1::int",
	"put", "SELECT dedup_outbox_put($1::text, $2::text, $3::jsonb, "
	"aggregate_id => $4::text, type => 'PaymentApplied')",
	"ledger", "INSERT INTO sim.ledger (message_id, account, amount, event_id, path) "
	"VALUES ($1::bigint, $2::int, $3::bigint, $4::uuid, $5::text)",
	"begin", "SELECT outcome, attempts FROM dedup_begin($1::text, $2::text, $3::jsonb)",
	"complete", "SELECT dedup_complete($1::text, $2::text, 201, $3::jsonb, attempt => $4::int)",
	"release", "SELECT dedup_release($1::text, $2::text, attempt => $3::int)",
	"lookup", "SELECT count(*) FROM dedup_lookup($1::text, $2::text)",
	"seen", "WITH s AS (SELECT dedup_seen($1::text, $2::text) = 'history' AS history,"
	" NOT EXISTS (SELECT FROM sim.ledger WHERE message_id = $2::bigint) AS never),"
	" r AS (INSERT INTO sim.refused SELECT $2::bigint FROM s WHERE history AND never"
	" ON CONFLICT DO NOTHING) SELECT history, history AND never FROM s",
	NULL
};

/* The text forms of a message's fields, as statement parameters. */
typedef struct ConsumerText
{
	char		id[24];
	char		account[16];
	char		amount[24];
} ConsumerText;

static void
consumer_text(const Message *m, ConsumerText *t)
{
	snprintf(t->id, sizeof(t->id), "%lld", (long long) m->id);
	snprintf(t->account, sizeof(t->account), "%d", m->account);
	snprintf(t->amount, sizeof(t->amount), "%lld", (long long) m->amount);
}

/*
 * A statement or commit failed: a lost connection puts the delivery back
 * (the transaction may or may not have committed: the redelivery's claim
 * tells); anything else is unexpected and fails the run.
 */
static void
consumer_failed(SimConn *sc, int64_t index, const char *what, PGresult *res)
{
	Sim		   *sim = sc->sim;
	bool		lost = db_lost(sc, res);

	db_unexpected(sc, what, res);
	if (!db_broken(sc))
		db_end(sc, false);
	if (lost)
		feed_requeue(sim, index, CONSUMER_LOST_DELAY_MS);
	else
		feed_ack(sim, index);
}

/*
 * The business writes, in the open transaction: the payment, its outbox
 * event, and the ledger row that names the event.  Returns NULL, or the
 * failed statement's result for the caller to judge and clear.
 */
static PGresult *
consumer_pay(SimConn *sc, const Message *m, const ConsumerText *t,
			 const char *path, char *event_id)
{
	Sim		   *sim = sc->sim;
	char		payload[128];
	const char *pay[] = {t->account, t->amount};
	const char *put[] = {sim->topic, t->id, payload, t->account};
	const char *ledger[] = {t->id, t->account, t->amount, event_id, path};
	PGresult   *res;

	snprintf(payload, sizeof(payload),
			 "{\"message_id\": %s, \"account\": %s, \"amount\": %s}",
			 t->id, t->account, t->amount);
	res = db_exec(sc, "pay", 2, pay);
	if (!db_ok(res))
		return res;
	PQclear(res);
	res = db_exec(sc, "put", 4, put);
	if (!db_ok(res))
		return res;
	snprintf(event_id, 40, "%s", PQgetvalue(res, 0, 0));
	PQclear(res);
	res = db_exec(sc, "ledger", 5, ledger);
	if (!db_ok(res))
		return res;
	PQclear(res);
	return NULL;
}

/*
 * Commit the business transaction, unless a rollback is injected here.
 * COMMITTED and FAILED have acked or put back the delivery; after an
 * injected ROLLED_BACK it is the caller's to put back.
 */
typedef enum ConsumerEnd
{
	CONSUMER_COMMITTED,
	CONSUMER_ROLLED_BACK,
	CONSUMER_FAILED
} ConsumerEnd;

static ConsumerEnd
consumer_commit(SimConn *sc, int64_t index, bool record, uint64_t *rng)
{
	Sim		   *sim = sc->sim;
	PGresult   *res;

	if (sim_random_unit(rng) < sim->options.rollback_share)
	{
		atomic_fetch_add(&sim->counters.rollbacks, 1);
		db_end(sc, false);
		return CONSUMER_ROLLED_BACK;
	}
	res = db_commit(sc);
	if (res)
	{
		consumer_failed(sc, index, "COMMIT", res);
		PQclear(res);
		return CONSUMER_FAILED;
	}
	atomic_fetch_add(&sim->counters.applied, 1);
	if (record)
		atomic_fetch_add(&sim->counters.applied_record, 1);
	feed_applied(sim, index);
	feed_ack(sim, index);
	return CONSUMER_COMMITTED;
}

/*
 * Right after a poison message's transaction rolled back: its claim must be
 * gone.  (Another consumer's copy may be claiming it too, but that claim is
 * not committed, and never will be: the ledger rejects it too.)
 */
static void
consumer_check_rolled_back(SimConn *sc, const ConsumerText *t)
{
	Sim		   *sim = sc->sim;
	const char *lookup[] = {sim->scope_claims, t->id};
	PGresult   *res = db_exec(sc, "lookup", 2, lookup);

	if (db_ok(res))
	{
		if (strcmp(PQgetvalue(res, 0, 0), "0") != 0)
			atomic_fetch_add(&sim->counters.poison_left, 1);
	}
	else
		db_unexpected(sc, "dedup_lookup", res);
	PQclear(res);
}

/*
 * With a history: whether the history answered a duplicate (a late copy
 * past the ttl, or a false positive), and whether the message was never
 * applied, which makes it a false positive: the claim and the payment
 * commit together, so a message with no ledger row was never claimed.
 */
static bool
consumer_why_duplicate(SimConn *sc, const char *const *claim)
{
	Sim		   *sim = sc->sim;
	PGresult   *res = db_exec(sc, "seen", 2, claim);
	bool		refused = false;

	if (db_ok(res) && strcmp(PQgetvalue(res, 0, 0), "t") == 0)
	{
		atomic_fetch_add(&sim->counters.history_caught, 1);
		refused = strcmp(PQgetvalue(res, 0, 1), "t") == 0;
		if (refused)
			atomic_fetch_add(&sim->counters.history_false, 1);
	}
	PQclear(res);
	return refused;
}

/* The claim path: claim and business writes in one transaction. */
static void
consumer_claim(SimConn *sc, int64_t index, uint64_t *rng)
{
	Sim		   *sim = sc->sim;
	const Message *m = &sim->messages[index];
	ConsumerText t;
	const char *claim[] = {sim->scope_claims, t.id};
	char		event_id[40] = "";
	PGresult   *res;

	consumer_text(m, &t);
	if (!db_begin(sc))
	{
		feed_requeue(sim, index, CONSUMER_LOST_DELAY_MS);
		return;
	}
	res = db_exec(sc, "claim", 2, claim);
	if (!db_ok(res))
	{
		if (strcmp(db_sqlstate(res), "55P03") == 0)
		{
			/* another consumer is applying a copy right now: later */
			atomic_fetch_add(&sim->counters.busy_nowait, 1);
			db_end(sc, false);
			feed_requeue(sim, index, CONSUMER_BUSY_DELAY_MS);
		}
		else
			consumer_failed(sc, index, "dedup_claim", res);
		PQclear(res);
		return;
	}
	if (strcmp(PQgetvalue(res, 0, 0), "t") != 0)
	{
		/* a duplicate: nothing to do but ack */
		bool		refused = false;

		PQclear(res);
		if (sim->options.history_seconds > 0)
			refused = consumer_why_duplicate(sc, claim);
		db_end(sc, true);
		atomic_fetch_add(&sim->counters.dup_claims, 1);
		if (m->amount < 0 && !refused)
			atomic_fetch_add(&sim->counters.poison_dup, 1);
		else
			feed_applied(sim, index);
		feed_ack(sim, index);
		return;
	}
	PQclear(res);
	res = consumer_pay(sc, m, &t, "claim", event_id);
	if (res)
	{
		if (m->amount < 0 && strcmp(db_sqlstate(res), "23514") == 0)
		{
			/* rejected by the ledger's CHECK: the claim rolls back too */
			atomic_fetch_add(&sim->counters.poison_rejected, 1);
			db_end(sc, false);
			consumer_check_rolled_back(sc, &t);
			feed_ack(sim, index);
		}
		else
			consumer_failed(sc, index, "payment", res);
		PQclear(res);
		return;
	}
	if (consumer_commit(sc, index, false, rng) == CONSUMER_ROLLED_BACK)
		feed_requeue(sim, index, 0);
}

/*
 * Whether complete or release failed because the caller's attempt no
 * longer holds the key — a retry took it over after the lease passed
 * (55006), and maybe released it since (42704) — at a time when that could
 * have happened: at least a lease after our dedup_begin.  Earlier, the same
 * errors are a bug, and count as unexpected.
 */
static bool
consumer_lease_lost(Sim *sim, PGresult *res, int64_t begun_ms)
{
	return (strcmp(db_sqlstate(res), "55006") == 0 ||
			strcmp(db_sqlstate(res), "42704") == 0) &&
		sim_now_ms() - begun_ms >= sim->options.lease_ms;
}

/*
 * Give a processing key back after a failure, so that the retry starts
 * fresh instead of waiting for the lease.  A lost connection cannot: the
 * retry then takes the key over once the lease has passed.
 */
static void
consumer_release(SimConn *sc, const ConsumerText *t, const char *attempt, int64_t begun_ms)
{
	Sim		   *sim = sc->sim;
	const char *release[] = {sim->scope_records, t->id, attempt};
	PGresult   *res;

	if (db_broken(sc))
		return;
	res = db_exec(sc, "release", 3, release);
	if (!db_ok(res) && !consumer_lease_lost(sim, res, begun_ms))
		db_unexpected(sc, "dedup_release", res);
	PQclear(res);
}

/* The record path: begin, an external call, then complete with the writes. */
static void
consumer_record(SimConn *sc, int64_t index, uint64_t *rng)
{
	Sim		   *sim = sc->sim;
	const Message *m = &sim->messages[index];
	ConsumerText t;
	char		request[96];
	char		response[64];
	char		outcome[CONSUMER_OUTCOME_SIZE];
	char		attempt[16];
	char		event_id[40] = "";
	const char *begin[] = {sim->scope_records, t.id, request};
	const char *complete[] = {sim->scope_records, t.id, response, attempt};
	int64_t		begun_ms = sim_now_ms();
	double		r;
	PGresult   *res;

	consumer_text(m, &t);
	snprintf(request, sizeof(request), "{\"account\": %s, \"amount\": %s}",
			 t.account, t.amount);
	res = db_exec(sc, "begin", 3, begin);
	if (!db_ok(res))
	{
		consumer_failed(sc, index, "dedup_begin", res);
		PQclear(res);
		return;
	}
	snprintf(outcome, sizeof(outcome), "%s", PQgetvalue(res, 0, 0));
	snprintf(attempt, sizeof(attempt), "%s", PQgetvalue(res, 0, 1));
	PQclear(res);
	if (strcmp(outcome, "replay") == 0)
	{
		atomic_fetch_add(&sim->counters.replays, 1);
		feed_applied(sim, index);
		feed_ack(sim, index);
		return;
	}
	if (strcmp(outcome, "in_progress") == 0)
	{
		atomic_fetch_add(&sim->counters.busy_in_progress, 1);
		feed_requeue(sim, index, CONSUMER_IN_PROGRESS_DELAY_MS);
		return;
	}
	if (strcmp(outcome, "started") != 0)
	{
		/* mismatch: never expected, the request is the same every time */
		atomic_fetch_add(&sim->counters.mismatches, 1);
		feed_ack(sim, index);
		return;
	}
	if (strcmp(attempt, "1") != 0)
		atomic_fetch_add(&sim->counters.restarts, 1);

	/* the external call, outside any transaction */
	atomic_fetch_add(&sim->counters.external_calls, 1);
	r = sim_random_unit(rng);
	if (r < sim->options.fail_share)
	{
		atomic_fetch_add(&sim->counters.failed_calls, 1);
		consumer_release(sc, &t, attempt, begun_ms);
		feed_requeue(sim, index, 0);
		return;
	}
	if (r < sim->options.fail_share + sim->options.hang_share)
	{
		/* the call hangs past the lease; the client gives up and retries */
		atomic_fetch_add(&sim->counters.hung_calls, 1);
		atomic_fetch_add(&sim->counters.client_retries, 1);
		feed_add(sim, index, sim->options.lease_ms / 4);
		sim_sleep_ms(sim->options.lease_ms * 3 / 2);
	}
	else
		usleep(200 + sim_random(rng) % 800);

	if (!db_begin(sc))
	{
		feed_requeue(sim, index, CONSUMER_LOST_DELAY_MS);
		return;
	}
	res = consumer_pay(sc, m, &t, "record", event_id);
	if (res == NULL)
	{
		snprintf(response, sizeof(response), "{\"event_id\": \"%s\"}", event_id);
		res = db_exec(sc, "complete", 4, complete);
		if (db_ok(res))
		{
			PQclear(res);
			res = NULL;
		}
	}
	if (res)
	{
		if (consumer_lease_lost(sim, res, begun_ms))
		{
			/* a retry took the key over: it applies, or its retries do */
			atomic_fetch_add(&sim->counters.leases_lost, 1);
			db_end(sc, false);
			feed_requeue(sim, index, 0);
		}
		else
			consumer_failed(sc, index, "record transaction", res);
		PQclear(res);
		return;
	}
	if (consumer_commit(sc, index, true, rng) == CONSUMER_ROLLED_BACK)
	{
		consumer_release(sc, &t, attempt, begun_ms);
		feed_requeue(sim, index, 0);
	}
}

void *
consumer_main(void *arg)
{
	SimConn    *sc = arg;
	Sim		   *sim = sc->sim;
	uint64_t	rng = sim->options.seed ^ ((uint64_t) sc->number * 0x9E3779B97F4A7C15ULL);
	int64_t		index;

	db_connect(sc);
	while (feed_next(sim, &index))
	{
		if (db_broken(sc))
			db_connect(sc);
		feed_seen(sim, index);
		if (sim->messages[index].kind == KIND_CLAIM)
			consumer_claim(sc, index, &rng);
		else
			consumer_record(sc, index, &rng);
	}
	PQfinish(sc->conn);
	sc->conn = NULL;
	atomic_store(&sc->pid, 0);
	return NULL;
}
