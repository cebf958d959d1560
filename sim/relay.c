/*
 * relay.c: the outbox relays and the downstream consumer they publish to.
 * Several relays run at once on the topic (--relays).  Each takes a batch
 * of events, publishes it to the downstream service — whose own
 * transaction dedups the events with dedup_claim_batch in its scope and
 * records a notification per new event — and acks it.  Odd relays use the
 * batch API (dedup_outbox_take_batch, dedup_outbox_ack_batch with the
 * batch's id), even ones the 1.0 API (dedup_outbox_take, dedup_outbox_ack
 * with the ids and the attempts take returned), which does not run on a
 * Citus cluster (--citus: every relay uses batches).  When the outbox is
 * empty a relay waits for dedup's NOTIFY (a cluster sends none: it takes
 * again after RELAY_IDLE_WAIT_MS).  Faults injected here: a relay that dies
 * after publishing and before acking (its batch comes back when its lease
 * passes and is published again), and a broker that delivers a batch
 * twice.  Each event goes downstream with its seq (take_batch's; 0 from the
 * 1.0 take, which has none), so that the report checks that the events of
 * an aggregate first reached downstream in commit order.
 *
 * Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.
 */
#include "sim.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>

#define RELAY_BATCH		"100"
#define RELAY_IDLE_WAIT_MS 100

static const char *const relay_statements[] = {
	"take", "SELECT id, payload->>'message_id', payload->>'amount', attempts, 0, 0 "
	"FROM dedup_outbox_take($1::text, " RELAY_BATCH ")",
	"ack", "SELECT dedup_outbox_ack($1::uuid[], $2::int[])",
	"take_batch", "SELECT id, payload->>'message_id', payload->>'amount', attempts, batch_id, seq "
	"FROM dedup_outbox_take_batch($1::text, " RELAY_BATCH ")",
	"ack_batch", "SELECT dedup_outbox_ack_batch($1::bigint)",
	"stats", "SELECT coalesce(sum(pending), 0), coalesce(sum(in_flight), 0) "
	"FROM dedup_outbox_stats($1::text)",
	NULL
};

static const char *const relay_downstream_statements[] = {
	"notify", "INSERT INTO sim.notifications (event_id, message_id, amount, seq) "
	"SELECT e.id, e.message_id, e.amount, e.seq "
	"FROM dedup_claim_batch($1::text, $2::uuid[]) AS k(id) "
	"JOIN unnest($2::uuid[], $3::bigint[], $4::bigint[], $5::bigint[]) AS e(id, message_id, amount, seq) "
	"ON e.id = k.id",
	NULL
};

/*
 * The connections of relay n (from 1), named: sim->relay_conns[n - 1] and
 * sim->relay_downstreams[n - 1].
 */
void
relay_setup(Sim *sim, int n)
{
	char	   *name = malloc(32);
	char	   *downstream = malloc(40);

	if (!name || !downstream)
		abort();
	snprintf(name, 32, "dedup-sim relay %d", n);
	snprintf(downstream, 40, "dedup-sim downstream %d", n);
	sim->relay_conns[n - 1] = (SimConn) {.sim = sim, .name = name,
		.prepare = relay_statements, .on_connect = "LISTEN dedup_outbox", .number = n};
	sim->relay_downstreams[n - 1] = (SimConn) {.sim = sim, .name = downstream,
	.prepare = relay_downstream_statements, .number = n};
}

/* A batch taken from the outbox, as array literals for the statements. */
typedef struct RelayBatch
{
	int			n;
	char	   *batch_id;		/* of the batch API; "0" for the 1.0 one */
	char	   *ids;
	char	   *attempts;
	char	   *message_ids;
	char	   *amounts;
	char	   *seqs;
} RelayBatch;

static char *
relay_array(PGresult *res, int column)
{
	int			n = PQntuples(res);
	size_t		size = 3;
	char	   *out;
	char	   *p;
	int			i;

	for (i = 0; i < n; i++)
		size += PQgetlength(res, i, column) + 1;
	out = p = malloc(size);
	if (!out)
		abort();
	*p++ = '{';
	for (i = 0; i < n; i++)
	{
		if (i > 0)
			*p++ = ',';
		strcpy(p, PQgetvalue(res, i, column));
		p += PQgetlength(res, i, column);
	}
	*p++ = '}';
	*p = '\0';
	return out;
}

static void
relay_batch_free(RelayBatch *b)
{
	free(b->batch_id);
	free(b->ids);
	free(b->attempts);
	free(b->message_ids);
	free(b->amounts);
	free(b->seqs);
}

/*
 * Publish a batch downstream: the downstream service's transaction claims
 * the event ids in its own scope and records the new ones.  Returns false
 * when the transaction failed (the relay then does not ack).
 */
static bool
relay_publish(SimConn *sc, const RelayBatch *b)
{
	Sim		   *sim = sc->sim;
	const char *params[] = {sim->scope_downstream, b->ids, b->message_ids, b->amounts, b->seqs};
	PGresult   *res;
	long		inserted;

	if (db_broken(sc))
		db_connect(sc);
	if (!db_begin(sc))
		return false;
	res = db_exec(sc, "notify", 5, params);
	if (!db_ok(res))
	{
		db_unexpected(sc, "downstream", res);
		PQclear(res);
		if (!db_broken(sc))
			db_end(sc, false);
		return false;
	}
	inserted = atol(PQcmdTuples(res));
	PQclear(res);
	res = db_commit(sc);
	if (res)
	{
		db_unexpected(sc, "downstream COMMIT", res);
		PQclear(res);
		return false;
	}
	atomic_fetch_add(&sim->counters.published, b->n);
	atomic_fetch_add(&sim->counters.downstream_new, inserted);
	atomic_fetch_add(&sim->counters.downstream_dup, b->n - inserted);
	return true;
}

/* Whether the topic has nothing left to hand out or in flight. */
static bool
relay_drained(SimConn *sc)
{
	Sim		   *sim = sc->sim;
	const char *params[] = {sim->topic};
	PGresult   *res = db_exec(sc, "stats", 1, params);
	bool		drained;

	if (!db_ok(res))
	{
		db_unexpected(sc, "dedup_outbox_stats", res);
		PQclear(res);
		return false;
	}
	drained = atol(PQgetvalue(res, 0, 0)) == 0 && atol(PQgetvalue(res, 0, 1)) == 0;
	PQclear(res);
	return drained;
}

/* Sleep until a NOTIFY from a producer's commit, or RELAY_IDLE_WAIT_MS. */
static void
relay_wait(SimConn *sc)
{
	int			sock = PQsocket(sc->conn);
	fd_set		fds;
	struct timeval tv = {0, RELAY_IDLE_WAIT_MS * 1000};
	PGnotify   *n;

	if (sock < 0)
		return;
	FD_ZERO(&fds);
	FD_SET(sock, &fds);
	select(sock + 1, &fds, NULL, NULL, &tv);
	PQconsumeInput(sc->conn);
	while ((n = PQnotifies(sc->conn)) != NULL)
		PQfreemem(n);
}

void *
relay_main(void *arg)
{
	SimConn    *sc = arg;
	Sim		   *sim = sc->sim;
	int			n = sc->number;
	SimConn    *downstream = &sim->relay_downstreams[n - 1];
	bool		batch_api = n % 2 == 1 || sim->options.citus;
	uint64_t	rng = sim->options.seed ^ (0x7e1a7 * (uint64_t) n);

	db_connect(sc);
	db_connect(downstream);
	for (;;)
	{
		const char *take[] = {sim->topic};
		RelayBatch	b;
		PGresult   *res;
		double		r;

		if (db_broken(sc))
			db_connect(sc);
		res = db_exec(sc, batch_api ? "take_batch" : "take", 1, take);
		if (!db_ok(res))
		{
			db_unexpected(sc, "dedup_outbox_take", res);
			PQclear(res);
			sim_sleep_ms(RELAY_IDLE_WAIT_MS);
			continue;
		}
		b.n = PQntuples(res);
		if (b.n == 0)
		{
			PQclear(res);
			if (atomic_load(&sim->consumers_done) && relay_drained(sc))
				break;
			relay_wait(sc);
			continue;
		}
		b.ids = relay_array(res, 0);
		b.message_ids = relay_array(res, 1);
		b.amounts = relay_array(res, 2);
		b.attempts = relay_array(res, 3);
		b.batch_id = strdup(PQgetvalue(res, 0, 4));
		b.seqs = relay_array(res, 5);
		PQclear(res);

		r = sim_random_unit(&rng);
		if (!relay_publish(downstream, &b))
		{
			/* not published: no ack, the leases will pass */
			relay_batch_free(&b);
			continue;
		}
		if (r < 2 * sim->options.relay_fault_share && r >= sim->options.relay_fault_share)
		{
			/* the broker delivers the batch a second time */
			atomic_fetch_add(&sim->counters.broker_dups, 1);
			relay_publish(downstream, &b);
		}
		if (r < sim->options.relay_fault_share)
		{
			/* the relay dies after publishing, before its ack */
			atomic_fetch_add(&sim->counters.relay_faults, 1);
			PQfinish(sc->conn);
			sc->conn = NULL;
			relay_batch_free(&b);
			continue;
		}
		{
			const char *ack[] = {b.ids, b.attempts};
			const char *ack_batch[] = {b.batch_id};

			res = batch_api ? db_exec(sc, "ack_batch", 1, ack_batch) : db_exec(sc, "ack", 2, ack);
			if (db_ok(res))
				atomic_fetch_add(&sim->counters.acked, atol(PQgetvalue(res, 0, 0)));
			else
				db_unexpected(sc, "dedup_outbox_ack", res);
			PQclear(res);
		}
		relay_batch_free(&b);
	}
	PQfinish(sc->conn);
	PQfinish(downstream->conn);
	sc->conn = downstream->conn = NULL;
	atomic_store(&sc->pid, 0);
	atomic_store(&downstream->pid, 0);
	return NULL;
}
