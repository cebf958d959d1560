/*
 * log.c: dedup-sim's partitioned-log mode (--log): sequence marks
 * (dedup_advance) under the failures Kafka's idempotent producer and
 * exactly-once consumers are built for.
 *
 * P partitions, each with its source messages 1..M.  One producer per
 * partition appends them to the broker's log, sim.log, each append a
 * transaction that first advances the partition's stream in a strict scope
 * (its epoch, seq): a send whose outcome was lost (a killed connection) is
 * sent again with the same seq and is a duplicate if it had committed, and
 * sends are sometimes repeated on purpose.  Halfway, each producer restarts:
 * the new instance takes a new epoch (dedup_new_epoch), reads where the log
 * stands and goes on from there with seq 0, while the old instance, a
 * zombie, keeps sending its next messages with the old epoch: every one of
 * them must be fenced (55006).
 *
 * Consumers read the log from their stored position (dedup_position, mark
 * + 1) and apply each entry in a transaction that advances the partition's
 * stream in their own scope, so the input position commits with the
 * output.  They crash (forget everything, resume from the stored position)
 * and are redelivered entries they had applied (seek back): the advance
 * says false.  Connections are killed mid-transaction and the postmaster
 * may be killed too.
 *
 * The mode's state (its scopes, partition size, threads left) is a LogRun
 * of log_main's, which its producers and consumers point to.
 *
 * Invariants at the end: every source message is in the log exactly once,
 * at contiguous offsets; every log entry has exactly one effect; the
 * consumers' positions are the ends of the partitions; fencing happened;
 * one stream row per partition and scope.
 *
 * Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.
 */
#include "sim.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LOG_ZOMBIE_SENDS 5		/* sends of the old producer after the restart */
#define Min(a, b) ((a) < (b) ? (a) : (b))
#define Max(a, b) ((a) > (b) ? (a) : (b))
#define LOG_CONSUME_BATCH 50

/* the state of the --log mode, log_main's, shared with its threads */
typedef struct LogRun
{
	Sim		   *sim;
	char		scope_broker[64];
	char		scope_consumer[64];
	long		per_partition;
	atomic_int	producers_left;
	atomic_int	threads_done;	/* producers and consumers that ended */
} LogRun;

static const char *const log_producer_statements[] = {
	"advance", "SELECT dedup_advance($1, $2, $3::bigint, epoch => $4::bigint)",
	"append", "INSERT INTO sim.log (partition, \"offset\", source_n, epoch)"
	" SELECT $1::int, coalesce(max(l.\"offset\"), 0) + 1, $2::bigint, $3::bigint"
	" FROM sim.log AS l WHERE l.partition = $1::int RETURNING \"offset\"",
	"new_epoch", "SELECT dedup_new_epoch($1, $2)",
	"log_end", "SELECT coalesce(max(source_n), 0) FROM sim.log WHERE partition = $1::int",
	NULL
};

static const char *const log_consumer_statements[] = {
	"position", "SELECT coalesce((SELECT mark FROM dedup_position($1, $2)), 0)",
	"read", "SELECT \"offset\", source_n FROM sim.log WHERE partition = $1::int"
	" AND \"offset\" > $2::bigint ORDER BY \"offset\" LIMIT " "50",
	"advance", "SELECT dedup_advance($1, $2, $3::bigint)",
	"apply", "INSERT INTO sim.effects (partition, \"offset\", source_n)"
	" VALUES ($1::int, $2::bigint, $3::bigint)",
	NULL
};

static long
log_total(const LogRun *lr)
{
	return (long) lr->sim->options.partitions * lr->per_partition;
}

/*
 * One send of a producer instance: advance (epoch, seq) in the broker's
 * scope, and append when it moved.  1: appended; 0: a duplicate; -1: the
 * outcome is unknown (connection lost, or an injected rollback: send
 * again); -2: fenced.
 */
static int
log_send(LogRun *lr, SimConn *sc, int partition, long n, long epoch, long seq,
		 uint64_t *rng)
{
	Sim		   *sim = lr->sim;
	char		p[16], ntext[24], etext[24], stext[24], stream[32];
	const char *adv[] = {lr->scope_broker, stream, stext, etext};
	const char *app[] = {p, ntext, etext};
	PGresult   *res;
	int			outcome;

	snprintf(p, sizeof(p), "%d", partition);
	snprintf(stream, sizeof(stream), "p-%d", partition);
	snprintf(ntext, sizeof(ntext), "%ld", n);
	snprintf(etext, sizeof(etext), "%ld", epoch);
	snprintf(stext, sizeof(stext), "%ld", seq);
	if (db_broken(sc))
		db_connect(sc);
	if (!db_begin(sc))
		return -1;
	if (sim->options.log_unguarded)
		res = PQmakeEmptyPGresult(sc->conn, PGRES_TUPLES_OK);
	else
		res = db_exec(sc, "advance", 4, adv);
	if (sim->options.log_unguarded)
		outcome = 1;
	else if (!db_ok(res))
	{
		outcome = strcmp(db_sqlstate(res), "55006") == 0 ? -2 : -1;
		if (outcome == -1)
			db_unexpected(sc, "dedup_advance (producer)", res);
		PQclear(res);
		db_end(sc, false);
		return outcome;
	}
	else
		outcome = PQgetvalue(res, 0, 0)[0] == 't';
	PQclear(res);
	if (outcome == 1)
	{
		res = db_exec(sc, "append", 3, app);
		if (!db_ok(res))
		{
			db_unexpected(sc, "append", res);
			PQclear(res);
			db_end(sc, false);
			return -1;
		}
		PQclear(res);
	}
	if (sim_random_unit(rng) < sim->options.rollback_share)
	{
		atomic_fetch_add(&sim->counters.rollbacks, 1);
		db_end(sc, false);
		return -1;
	}
	res = db_commit(sc);
	if (res)
	{
		db_unexpected(sc, "COMMIT (producer)", res);
		PQclear(res);
		return -1;			/* committed or not: sent again, the mark decides */
	}
	return outcome;
}

/* A producer instance sends n = from..to with seq, seq + 1, ... until all took. */
static void
log_produce(LogRun *lr, SimConn *sc, int partition, long from, long to, long epoch,
			long seq, uint64_t *rng, bool zombie)
{
	Sim		   *sim = lr->sim;

	for (long n = from; n <= to && !atomic_load(&sim->stopping); n++, seq++)
	{
		int			outcome;
		bool		lost = false;

		atomic_fetch_add(&sim->counters.log_sends, 1);
		while ((outcome = log_send(lr, sc, partition, n, epoch, seq, rng)) == -1)
		{
			atomic_fetch_add(&sim->counters.redeliveries, 1);
			lost = true;
		}
		if (outcome == -2)
			atomic_fetch_add(&sim->counters.log_fenced, 1);
		else if (outcome == 0)
			atomic_fetch_add(&sim->counters.log_duplicate_sends, 1);
		/*
		 * Expected: a zombie is fenced, every time; a live instance is never
		 * fenced, and its send is a duplicate only when an earlier try of it
		 * was lost after it had committed.
		 */
		if (!sim->options.log_unguarded &&
			(zombie ? outcome != -2 : (outcome == -2 || (outcome == 0 && !lost))))
		{
			atomic_fetch_add(&sim->counters.unexpected, 1);
			fprintf(stderr, "\ndedup-sim: partition %d, message %ld, epoch %ld: unexpected "
					"send outcome %d%s\n", partition, n, epoch, outcome, zombie ? " (zombie)" : "");
		}
		/* a network duplicate: the same send again, which must be a duplicate */
		if (outcome == 1 && sim_random_unit(rng) < 0.02)
		{
			atomic_fetch_add(&sim->counters.log_sends, 1);
			while ((outcome = log_send(lr, sc, partition, n, epoch, seq, rng)) == -1)
				atomic_fetch_add(&sim->counters.redeliveries, 1);
			if (outcome == 0)
				atomic_fetch_add(&sim->counters.log_duplicate_sends, 1);
			else if (!sim->options.log_unguarded)
				atomic_fetch_add(&sim->counters.unexpected, 1);
		}
	}
}

/* One statement returning one number, retried over lost connections. */
static long
log_number(SimConn *sc, const char *stmt, int nparams, const char *const *params)
{
	for (;;)
	{
		PGresult   *res;
		long		value;

		if (db_broken(sc))
			db_connect(sc);
		res = db_exec(sc, stmt, nparams, params);
		if (db_ok(res))
		{
			value = atol(PQgetvalue(res, 0, 0));
			PQclear(res);
			return value;
		}
		db_unexpected(sc, stmt, res);
		PQclear(res);
		sim_sleep_ms(20);
	}
}

typedef struct LogProducer
{
	LogRun	   *run;
	int			partition;
	SimConn		conn;
	SimConn		zombie_conn;
} LogProducer;

/*
 * A partition's producer: epoch 1 sends the first half; then a restart: the
 * new instance takes epoch 2 first, then reads where the log stands, and
 * sends the rest, while the old one keeps sending its next messages.
 */
static void *
log_producer_main(void *arg)
{
	LogProducer *lp = arg;
	LogRun	   *lr = lp->run;
	uint64_t	rng = lr->sim->options.seed ^ (0x1000ULL + lp->partition);
	char		stream[32], p[16];
	const char *epoch_params[] = {lr->scope_broker, stream};
	const char *end_params[] = {p};
	long		per_partition = lr->per_partition;
	long		half = per_partition / 2;
	long		old_epoch;
	long		epoch;
	long		resume;

	snprintf(stream, sizeof(stream), "p-%d", lp->partition);
	snprintf(p, sizeof(p), "%d", lp->partition);
	db_connect(&lp->conn);
	old_epoch = log_number(&lp->conn, "new_epoch", 2, epoch_params);
	log_produce(lr, &lp->conn, lp->partition, 1, half, old_epoch, 0, &rng, false);

	/*
	 * The restart: the new instance fences the old one, then sees where the
	 * log stands.  (A new_epoch whose outcome was lost and is asked again
	 * only bumps the epoch once more: the old instance's stays older.)
	 */
	atomic_fetch_add(&lr->sim->counters.log_restarts, 1);
	epoch = log_number(&lp->conn, "new_epoch", 2, epoch_params);
	resume = log_number(&lp->conn, "log_end", 1, end_params) + 1;
	if (half + 1 <= per_partition)
	{
		/* the old instance, still alive, sends on: its epoch, its next seq */
		db_connect(&lp->zombie_conn);
		log_produce(lr, &lp->zombie_conn, lp->partition, half + 1,
					Min(half + LOG_ZOMBIE_SENDS, per_partition), old_epoch, half, &rng, true);
	}
	log_produce(lr, &lp->conn, lp->partition, resume, per_partition, epoch, 0, &rng, false);
	atomic_fetch_sub(&lr->producers_left, 1);
	atomic_fetch_add(&lr->threads_done, 1);
	return NULL;
}

/* Apply one log entry, advancing the consumer's stream; see log_send. */
static int
log_apply(LogRun *lr, SimConn *sc, int partition, long offset, long source_n,
		  uint64_t *rng)
{
	Sim		   *sim = lr->sim;
	char		p[16], otext[24], ntext[24], stream[32];
	const char *adv[] = {lr->scope_consumer, stream, otext};
	const char *app[] = {p, otext, ntext};
	PGresult   *res;
	int			outcome;

	snprintf(p, sizeof(p), "%d", partition);
	snprintf(stream, sizeof(stream), "p-%d", partition);
	snprintf(otext, sizeof(otext), "%ld", offset);
	snprintf(ntext, sizeof(ntext), "%ld", source_n);
	if (!db_begin(sc))
		return -1;
	if (sim->options.log_unguarded)
		outcome = 1;
	else
	{
		res = db_exec(sc, "advance", 3, adv);
		if (!db_ok(res))
		{
			db_unexpected(sc, "dedup_advance (consumer)", res);
			PQclear(res);
			db_end(sc, false);
			return -1;
		}
		outcome = PQgetvalue(res, 0, 0)[0] == 't';
		PQclear(res);
	}
	if (outcome == 1)
	{
		res = db_exec(sc, "apply", 3, app);
		if (!db_ok(res))
		{
			db_unexpected(sc, "apply", res);
			PQclear(res);
			db_end(sc, false);
			return -1;
		}
		PQclear(res);
	}
	if (sim_random_unit(rng) < sim->options.rollback_share)
	{
		atomic_fetch_add(&sim->counters.rollbacks, 1);
		db_end(sc, false);
		return -1;
	}
	res = db_commit(sc);
	if (res)
	{
		db_unexpected(sc, "COMMIT (consumer)", res);
		PQclear(res);
		return -1;
	}
	return outcome;
}

typedef struct LogConsumer
{
	LogRun	   *run;
	int			number;			/* 0..C-1: partitions number, number + C, ... */
	SimConn		conn;
} LogConsumer;

/*
 * A consumer: for each of its partitions, resume from the stored position
 * and apply what the log has beyond it; crash now and then (resume from the
 * stored position again), and seek back to be redelivered what it applied.
 * Done when the producers are and its partitions are consumed to their end.
 */
static void *
log_consumer_main(void *arg)
{
	LogConsumer *lc = arg;
	LogRun	   *lr = lc->run;
	Sim		   *sim = lr->sim;
	uint64_t	rng = sim->options.seed ^ (0x2000ULL + lc->number);
	int			nparts = sim->options.partitions;
	long	   *position = calloc(nparts, sizeof(long));
	bool	   *known = calloc(nparts, sizeof(bool));

	db_connect(&lc->conn);
	for (;;)
	{
		bool		producers_done = atomic_load(&lr->producers_left) == 0;
		bool		all_consumed = true;

		for (int part = lc->number; part < nparts; part += sim->options.consumers)
		{
			char		p[16], stream[32], after[24];
			const char *pos_params[] = {lr->scope_consumer, stream};
			const char *read_params[] = {p, after};
			PGresult   *res;
			int			rows;

			snprintf(p, sizeof(p), "%d", part);
			snprintf(stream, sizeof(stream), "p-%d", part);
			if (db_broken(&lc->conn))
			{
				db_connect(&lc->conn);
				if (!sim->options.log_unguarded)
					memset(known, 0, nparts * sizeof(bool));
			}
			if (!known[part] && !sim->options.log_unguarded)
				position[part] = log_number(&lc->conn, "position", 2, pos_params);
			known[part] = true;
			if (!producers_done)
				all_consumed = false;
			/* a seek back: redelivery of entries already applied */
			if (position[part] > 0 && sim_random_unit(&rng) < 0.05)
			{
				position[part] -= 1 + sim_random(&rng) % Min(position[part], 20);
				atomic_fetch_add(&sim->counters.log_seeks, 1);
				all_consumed = false;
			}
			snprintf(after, sizeof(after), "%ld", position[part]);
			res = db_exec(&lc->conn, "read", 2, read_params);
			if (!db_ok(res))
			{
				db_unexpected(&lc->conn, "read", res);
				PQclear(res);
				all_consumed = false;
				continue;
			}
			rows = PQntuples(res);
			if (rows > 0)
				all_consumed = false;
			for (int i = 0; i < rows; i++)
			{
				long		offset = atol(PQgetvalue(res, i, 0));
				long		source_n = atol(PQgetvalue(res, i, 1));
				int			outcome;

				atomic_fetch_add(&sim->counters.deliveries, 1);
				outcome = log_apply(lr, &lc->conn, part, offset, source_n, &rng);
				if (outcome < 0)
				{
					/* lost or rolled back: read again from the stored position */
					atomic_fetch_add(&sim->counters.redeliveries, 1);
					known[part] = sim->options.log_unguarded;
					break;
				}
				if (outcome == 1)
					atomic_fetch_add(&sim->counters.applied, 1);
				else
					atomic_fetch_add(&sim->counters.dup_claims, 1);
				position[part] = offset;
				/* (unguarded, nothing is stored to resume from: no crashes) */
				if (!sim->options.log_unguarded && sim_random_unit(&rng) < 0.01)
				{
					/* a crash: everything in memory is gone */
					atomic_fetch_add(&sim->counters.log_consumer_crashes, 1);
					memset(known, 0, nparts * sizeof(bool));
					break;
				}
			}
			PQclear(res);
		}
		if (all_consumed)
			break;
		if (atomic_load(&sim->stopping))
			break;
		sim_sleep_ms(2);
	}
	free(position);
	free(known);
	atomic_fetch_add(&lr->threads_done, 1);
	return NULL;
}

static void
log_sql(PGconn *conn, const char *sql)
{
	PGresult   *res = PQexec(conn, sql);

	if (!db_ok(res))
	{
		fprintf(stderr, "dedup-sim: set-up failed: %s\nin: %s\n", PQresultErrorMessage(res), sql);
		exit(2);
	}
	PQclear(res);
}

static long
log_check(PGconn *conn, const char *sql)
{
	PGresult   *res = PQexec(conn, sql);
	long		value;

	if (!db_ok(res))
	{
		fprintf(stderr, "dedup-sim: check failed: %s\nin: %s\n", PQresultErrorMessage(res), sql);
		exit(2);
	}
	value = atol(PQgetvalue(res, 0, 0));
	PQclear(res);
	return value;
}

static long
log_scope_rows(PGconn *conn, const char *scope)
{
	char		sql[256];

	snprintf(sql, sizeof(sql), "SELECT count(*) FROM dedup_streams('%s')", scope);
	return log_check(conn, sql);
}

/* The set-up, the threads, and the report of the partitioned-log mode. */
int
log_main(Sim *sim)
{
	LogRun		lrun = {.sim = sim};
	LogRun	   *lr = &lrun;
	PGconn	   *conn = db_plain(sim, "dedup-sim set-up");
	char		sql[1024];
	char		run[32];
	int			P = sim->options.partitions;
	LogProducer *producers = calloc(P, sizeof(LogProducer));
	LogConsumer *consumers = calloc(sim->options.consumers, sizeof(LogConsumer));
	pthread_t  *threads = calloc(P + sim->options.consumers, sizeof(pthread_t));
	pthread_t	killer;
	int64_t		start;
	const SimCounters *c = &sim->counters;
	int			broken = 0;

	lr->per_partition = Max(sim->options.messages / P, 2);
	sim->planned_deliveries = log_total(lr);
	snprintf(run, sizeof(run), "%llx", (unsigned long long) sim->options.seed);
	snprintf(lr->scope_broker, sizeof(lr->scope_broker), "sim-%s-broker", run);
	snprintf(lr->scope_consumer, sizeof(lr->scope_consumer), "sim-%s-consumer", run);
	printf("== dedup-sim --log: %d partitions of %ld messages, %d consumers, seed %llu\n",
		   P, lr->per_partition, sim->options.consumers, (unsigned long long) sim->options.seed);
	log_sql(conn, "SET client_min_messages = warning");
	log_sql(conn, "CREATE EXTENSION IF NOT EXISTS dedup");
	log_sql(conn, "DROP SCHEMA IF EXISTS sim CASCADE");
	log_sql(conn, "CREATE SCHEMA sim");
	/* no unique constraints: a message appended or applied twice must show */
	log_sql(conn, "CREATE TABLE sim.log (partition int NOT NULL, \"offset\" bigint NOT NULL,"
			" source_n bigint NOT NULL, epoch bigint NOT NULL)");
	log_sql(conn, "CREATE INDEX ON sim.log (partition, \"offset\")");
	log_sql(conn, "CREATE TABLE sim.effects (partition int NOT NULL, \"offset\" bigint NOT NULL,"
			" source_n bigint NOT NULL)");
	snprintf(sql, sizeof(sql),
			 "SELECT dedup_set_scope('%s', sequence_mode => 'strict', retention => '1 day');"
			 "SELECT dedup_set_scope('%s', retention => '1 day')",
			 lr->scope_broker, lr->scope_consumer);
	log_sql(conn, sql);
	printf("   scopes %s (the broker's producer marks, strict), %s (the consumers' positions)\n",
		   lr->scope_broker, lr->scope_consumer);

	start = sim_now_ms();
	atomic_store(&lr->producers_left, P);
	for (int i = 0; i < P; i++)
	{
		char	   *name = malloc(48);
		char	   *zname = malloc(48);

		snprintf(name, 48, "dedup-sim producer %d", i);
		snprintf(zname, 48, "dedup-sim zombie producer %d", i);
		producers[i].run = lr;
		producers[i].partition = i;
		producers[i].conn.sim = sim;
		producers[i].conn.name = name;
		producers[i].conn.prepare = log_producer_statements;
		producers[i].zombie_conn.sim = sim;
		producers[i].zombie_conn.name = zname;
		producers[i].zombie_conn.prepare = log_producer_statements;
		faults_register(sim, &producers[i].conn);
		pthread_create(&threads[i], NULL, log_producer_main, &producers[i]);
	}
	for (int i = 0; i < sim->options.consumers; i++)
	{
		char	   *name = malloc(48);

		snprintf(name, 48, "dedup-sim log consumer %d", i);
		consumers[i].run = lr;
		consumers[i].number = i;
		consumers[i].conn.sim = sim;
		consumers[i].conn.name = name;
		consumers[i].conn.prepare = log_consumer_statements;
		faults_register(sim, &consumers[i].conn);
		pthread_create(&threads[P + i], NULL, log_consumer_main, &consumers[i]);
	}
	pthread_create(&killer, NULL, faults_killer_main, sim);
	while (atomic_load(&lr->threads_done) < P + sim->options.consumers)
	{
		sim_sleep_ms(50);
		if (sim_now_ms() - start > (int64_t) sim->options.timeout_seconds * 1000)
		{
			printf("\nFAILED: not done after %d s (--timeout): a partition is stuck\n",
				   sim->options.timeout_seconds);
			exit(1);
		}
	}
	for (int i = 0; i < P + sim->options.consumers; i++)
		pthread_join(threads[i], NULL);
	atomic_store(&sim->consumers_done, true);
	atomic_store(&sim->stopping, true);
	pthread_join(killer, NULL);

	PQfinish(conn);
	conn = db_plain(sim, "dedup-sim checks");
	printf("\n== what happened (%.1f s)\n", (sim_now_ms() - start) / 1000.0);
	printf("  producers             %ld sends: %ld appended, %ld duplicates of a send that had\n"
		   "                        taken (resent after a lost outcome, or on purpose), %ld\n"
		   "                        restarts under a new epoch, %ld sends of the old instances fenced\n",
		   (long) c->log_sends, log_check(conn, "SELECT count(*) FROM sim.log"),
		   (long) c->log_duplicate_sends, (long) c->log_restarts, (long) c->log_fenced);
	printf("  consumers             %ld deliveries: %ld applied, %ld duplicates suppressed by\n"
		   "                        the stored position (%ld seeks back, %ld crashes resumed from it)\n",
		   (long) c->deliveries, (long) c->applied, (long) c->dup_claims,
		   (long) c->log_seeks, (long) c->log_consumer_crashes);
	printf("  faults                %ld connections killed, %ld rollbacks, %ld postmaster kills;\n"
		   "                        %ld statements met a lost connection, %ld sends and reads again\n",
		   (long) c->kills, (long) c->rollbacks, (long) c->crashes,
		   (long) c->lost_connections, (long) c->redeliveries);
	printf("  storage               dedup.streams rows: %ld (broker) + %ld (consumers), for %ld messages\n",
		   log_scope_rows(conn, lr->scope_broker), log_scope_rows(conn, lr->scope_consumer),
		   log_total(lr));

	printf("\n== invariants\n");
#define LOG_INVARIANT(what, sql, want) do { \
		long got_ = log_check(conn, sql); \
		printf("  %-4s %s%s\n", got_ == (want) ? "ok" : "FAIL", what, \
			   got_ == (want) ? "" : " (broken)"); \
		if (got_ != (want)) { broken++; printf("       got %ld, want %ld\n", got_, (long) (want)); } \
	} while (0)
	LOG_INVARIANT("every source message is in the log",
				  "SELECT count(DISTINCT (partition, source_n)) FROM sim.log", log_total(lr));
	LOG_INVARIANT("none twice (no duplicate append, no zombie append)",
				  "SELECT count(*) - count(DISTINCT (partition, source_n)) FROM sim.log", 0);
	LOG_INVARIANT("offsets contiguous from 1 in every partition",
				  "SELECT count(*) FROM (SELECT partition, max(\"offset\") m, count(*) n,"
				  " count(DISTINCT \"offset\") d FROM sim.log GROUP BY partition) s"
				  " WHERE m <> n OR d <> n", 0);
	LOG_INVARIANT("every log entry applied",
				  "SELECT count(*) FROM sim.log l WHERE NOT EXISTS (SELECT FROM sim.effects e"
				  " WHERE e.partition = l.partition AND e.\"offset\" = l.\"offset\")", 0);
	LOG_INVARIANT("none applied twice",
				  "SELECT count(*) - count(DISTINCT (partition, \"offset\")) FROM sim.effects", 0);
	{
		char		pos[512];

		snprintf(pos, sizeof(pos),
				 "SELECT count(*) FROM (SELECT partition, max(\"offset\") m FROM sim.log GROUP BY 1) l"
				 " LEFT JOIN LATERAL dedup_position('%s', 'p-' || l.partition) s ON true"
				 " WHERE s.mark IS DISTINCT FROM l.m", lr->scope_consumer);
		LOG_INVARIANT("each consumer position is its partition's end", pos, 0);
	}
	printf("  %-4s the old producer instances were fenced\n", c->log_fenced > 0 ? "ok" : "FAIL");
	if (c->log_fenced == 0)
		broken++;
	printf("  %-4s no unexpected error\n", c->unexpected == 0 ? "ok" : "FAIL");
	if (c->unexpected != 0)
		broken++;
	PQfinish(conn);
	if (broken)
	{
		printf("\nFAILED: %d invariants broken\n", broken);
		return 1;
	}
	printf("\nexactly once: every message appended once and applied once, through %ld kills,"
		   " %ld crashes of consumers and %ld producer restarts\n",
		   (long) c->kills, (long) c->log_consumer_crashes, (long) c->log_restarts);
	return 0;
}
