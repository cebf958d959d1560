/*
 * main.c: dedup-sim's entry point — the run's state (a Sim, owned here and
 * passed to every other part), the options, the messages of the feed, the
 * set-up of the business tables and the scopes, the threads (consumers,
 * relays, fault injector), the progress line, and the report.
 *
 * Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.
 */
#include "sim.h"

#include <getopt.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const SimOptions main_defaults = {
	.conninfo = "",
	.messages = 100000,
	.max_copies = 4,
	.window = 2000,
	.consumers = 8,
	.accounts = 1000,
	.record_share = 0.2,
	.poison_share = 0.005,
	.kill_rate = 2.0,
	.rollback_share = 0.01,
	.fail_share = 0.01,
	.hang_share = 0.001,
	.relay_fault_share = 0.01,
	.relays = 2,
	.crashes = 0,
	.crash_command = NULL,
	.ttl_seconds = 10,
	.history_rate = 0.001,
	.lease_ms = 1000,
	.progress_seconds = 0,
	.timeout_seconds = 600,
	.seed = 0,
	.log_mode = false,
	.partitions = 8,
};

int64_t
sim_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* splitmix64: small, fast, good enough to pick faults and shuffle */
uint64_t
sim_random(uint64_t *state)
{
	uint64_t	z = (*state += 0x9E3779B97F4A7C15ULL);

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
	return z ^ (z >> 31);
}

double
sim_random_unit(uint64_t *state)
{
	return (sim_random(state) >> 11) * (1.0 / 9007199254740992.0);
}

void
sim_sleep_ms(int64_t ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};

	nanosleep(&ts, NULL);
}

static void
main_usage(void)
{
	printf("dedup-sim: an exactly-once simulation of dedup on a real server\n\n"
		   "Usage: dedup-sim [OPTION]... [CONNINFO]\n\n"
		   "An at-least-once feed delivers every message 1..K times to concurrent\n"
		   "consumers that apply a payment with dedup_claim (or dedup_begin and\n"
		   "dedup_complete around an external call) and dedup_outbox_put in one\n"
		   "transaction; a relay publishes the events to a downstream consumer that\n"
		   "dedups them again.  Faults are injected; at the end the database is\n"
		   "checked against the feed, and the exit status is 1 if an invariant broke.\n"
		   "CONNINFO is a libpq connection string or URI (default: the PG* variables).\n"
		   "The set-up drops and re-creates the schema sim.\n\n"
		   "Options (defaults in brackets):\n"
		   "  -n, --messages=N        distinct messages [100000]\n"
		   "  -k, --copies=K          each delivered 1..K times [4]\n"
		   "  -w, --window=MS         a message's other copies arrive within MS ms of\n"
		   "                          its first, as a broker's redeliveries do;\n"
		   "                          0: every copy anywhere in the feed [2000]\n"
		   "  -c, --consumers=C       consumer connections [8]\n"
		   "      --accounts=A        accounts the payments go to [1000]; an\n"
		   "                          account is its events' aggregate\n"
		   "      --aggregates=A      the same as --accounts: 1 is a hot-aggregate\n"
		   "                          feed, every event of one aggregate\n"
		   "      --records=SHARE     messages handled with dedup_begin/complete [0.2]\n"
		   "      --poison=SHARE      messages the business write rejects [0.005]\n"
		   "      --kill-rate=R       connections killed mid-transaction per second [2]\n"
		   "      --rollbacks=SHARE   business transactions rolled back [0.01]\n"
		   "      --fail=SHARE        external calls that fail (released) [0.01]\n"
		   "      --hang=SHARE        external calls that hang past the lease [0.001]\n"
		   "      --relay-faults=SHARE  relay batches not acked, and as many\n"
		   "                          published twice [0.01]\n"
		   "      --relays=N          relays at once on the topic, odd ones on the\n"
		   "                          batch API, even ones on the 1.0 one [2]\n"
		   "      --crashes=N         postmaster kills during the run [0]\n"
		   "      --crash-command=CMD shell command that kills the postmaster with\n"
		   "                          SIGKILL and starts the server again\n"
		   "      --no-faults         no kills, rollbacks, failures, hangs or relay faults\n"
		   "      --ttl=SECONDS       dedup window of the simulation's scopes [10]\n"
		   "      --history=SECONDS   give the consumers' claim scope a history of\n"
		   "                          SECONDS: late copies past the ttl are caught by\n"
		   "                          it, and its false positives (new messages it\n"
		   "                          refused) counted and left out [0: none]\n"
		   "      --history-rate=R    the history's false_positive_rate [0.001]\n"
		   "      --citus             the server is the coordinator of a Citus cluster\n"
		   "                          whose dedup is distributed (dedup_distribute()):\n"
		   "                          every relay takes batches (the 1.0 calls do not\n"
		   "                          run there); no --history\n"
		   "      --lease-ms=MS       lease of the records scope [1000]\n"
		   "      --progress=SECONDS  a progress line every SECONDS (0: live line\n"
		   "                          on a terminal, every 5 s otherwise) [0]\n"
		   "      --timeout=SECONDS   give up, exit 1, if not done by then [600]\n"
		   "      --seed=S            random seed [from the clock]\n"
		   "      --log               the partitioned-log simulation instead: producers\n"
		   "                          append numbered messages through dedup_advance\n"
		   "                          (strict, with epochs; a restart fences the old\n"
		   "                          instance), consumers apply them from their stored\n"
		   "                          position; --messages are spread over the partitions\n"
		   "      --partitions=P      partitions of --log [8]\n"
		   "      --unguarded         --log without dedup_advance, a control that must\n"
		   "                          break the invariants\n");
}

static double
main_number(const char *name, const char *value, double min, double max)
{
	char	   *end;
	double		d = strtod(value, &end);

	if (*end != '\0' || d < min || d > max)
	{
		fprintf(stderr, "dedup-sim: --%s must be a number from %g to %g\n", name, min, max);
		exit(2);
	}
	return d;
}

static double
main_share(const char *name, const char *value)
{
	return main_number(name, value, 0, 1);
}

static long
main_count(const char *name, const char *value, long min, long max)
{
	char	   *end;
	long		n = strtol(value, &end, 10);

	if (*end != '\0' || n < min || n > max)
	{
		fprintf(stderr, "dedup-sim: --%s must be an integer from %ld to %ld\n",
				name, min, max);
		exit(2);
	}
	return n;
}

static void
main_options(Sim *sim, int argc, char **argv)
{
	static const struct option longopts[] = {
		{"messages", required_argument, NULL, 'n'},
		{"copies", required_argument, NULL, 'k'},
		{"window", required_argument, NULL, 'w'},
		{"consumers", required_argument, NULL, 'c'},
		{"accounts", required_argument, NULL, 'A'},
		{"aggregates", required_argument, NULL, 'A'},
		{"records", required_argument, NULL, 'R'},
		{"poison", required_argument, NULL, 'P'},
		{"kill-rate", required_argument, NULL, 'K'},
		{"rollbacks", required_argument, NULL, 'B'},
		{"fail", required_argument, NULL, 'F'},
		{"hang", required_argument, NULL, 'H'},
		{"relay-faults", required_argument, NULL, 'L'},
		{"relays", required_argument, NULL, 'y'},
		{"crashes", required_argument, NULL, 'C'},
		{"crash-command", required_argument, NULL, 'X'},
		{"no-faults", no_argument, NULL, '0'},
		{"ttl", required_argument, NULL, 'T'},
		{"history", required_argument, NULL, 'j'},
		{"history-rate", required_argument, NULL, 'Y'},
		{"lease-ms", required_argument, NULL, 'E'},
		{"progress", required_argument, NULL, 'p'},
		{"seed", required_argument, NULL, 'S'},
		{"timeout", required_argument, NULL, 'O'},
		{"log", no_argument, NULL, 'G'},
		{"citus", no_argument, NULL, 'Z'},
		{"partitions", required_argument, NULL, 'Q'},
		{"unguarded", no_argument, NULL, 'U'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0}
	};
	int			c;
	SimOptions *o = &sim->options;

	o->seed = (uint64_t) time(NULL) ^ ((uint64_t) getpid() << 32);
	while ((c = getopt_long(argc, argv, "n:k:w:c:h", longopts, NULL)) != -1)
	{
		switch (c)
		{
			case 'n':
				o->messages = main_count("messages", optarg, 1, 100000000);
				break;
			case 'k':
				o->max_copies = main_count("copies", optarg, 1, 100);
				break;
			case 'w':
				o->window = main_count("window", optarg, 0, 3600000);
				break;
			case 'c':
				o->consumers = main_count("consumers", optarg, 1, 40);
				break;
			case 'A':
				o->accounts = main_count("accounts", optarg, 1, 10000000);
				break;
			case 'R':
				o->record_share = main_share("records", optarg);
				break;
			case 'P':
				o->poison_share = main_share("poison", optarg);
				break;
			case 'K':
				o->kill_rate = main_number("kill-rate", optarg, 0, 1000);
				break;
			case 'B':
				o->rollback_share = main_share("rollbacks", optarg);
				break;
			case 'F':
				o->fail_share = main_share("fail", optarg);
				break;
			case 'H':
				o->hang_share = main_share("hang", optarg);
				break;
			case 'y':
				o->relays = main_count("relays", optarg, 1, SIM_MAX_RELAYS);
				break;
			case 'L':
				o->relay_fault_share = main_share("relay-faults", optarg) / 2;
				break;
			case 'C':
				o->crashes = main_count("crashes", optarg, 0, 8);
				break;
			case 'X':
				o->crash_command = optarg;
				break;
			case '0':
				o->kill_rate = o->rollback_share = o->fail_share = 0;
				o->hang_share = o->relay_fault_share = 0;
				break;
			case 'T':
				o->ttl_seconds = main_count("ttl", optarg, 1, 86400);
				break;
			case 'j':
				o->history_seconds = main_count("history", optarg, 0, 86400);
				break;
			case 'Y':
				o->history_rate = main_number("history-rate", optarg, 0.0001, 0.1);
				break;
			case 'E':
				o->lease_ms = main_count("lease-ms", optarg, 10, 3600000);
				break;
			case 'p':
				o->progress_seconds = main_count("progress", optarg, 0, 3600);
				break;
			case 'O':
				o->timeout_seconds = main_count("timeout", optarg, 1, 86400);
				break;
			case 'S':
				o->seed = strtoull(optarg, NULL, 0);
				break;
			case 'G':
				o->log_mode = true;
				break;
			case 'Z':
				o->citus = true;
				break;
			case 'Q':
				o->partitions = main_count("partitions", optarg, 1, 1000);
				break;
			case 'U':
				o->log_unguarded = true;
				break;
			case 'h':
				main_usage();
				exit(0);
			default:
				fprintf(stderr, "Try \"dedup-sim --help\".\n");
				exit(2);
		}
	}
	if (optind < argc)
		o->conninfo = argv[optind++];
	if (optind < argc)
	{
		fprintf(stderr, "dedup-sim: too many arguments\n");
		exit(2);
	}
	if (o->citus && o->history_seconds > 0)
	{
		fprintf(stderr, "dedup-sim: --history does not run with --citus\n");
		exit(2);
	}
	if (o->crashes > 0 && o->crash_command == NULL)
	{
		fprintf(stderr, "dedup-sim: --crashes needs --crash-command\n");
		exit(2);
	}
}

/* The messages of the feed: account, amount, path, poison, copies. */
static void
main_messages(Sim *sim, uint64_t *rng)
{
	long		i;

	sim->messages = calloc(sim->options.messages, sizeof(Message));
	if (!sim->messages)
		abort();
	for (i = 0; i < sim->options.messages; i++)
	{
		Message    *m = &sim->messages[i];

		m->id = i + 1;
		m->account = 1 + sim_random(rng) % sim->options.accounts;
		m->amount = 1 + sim_random(rng) % 10000;
		m->kind = sim_random_unit(rng) < sim->options.record_share ? KIND_RECORD : KIND_CLAIM;
		if (m->kind == KIND_CLAIM && sim_random_unit(rng) < sim->options.poison_share)
			m->amount = -m->amount;
		m->copies = 1 + sim_random(rng) % sim->options.max_copies;
	}
}

static void
main_sql(PGconn *conn, const char *sql)
{
	PGresult   *res = PQexec(conn, sql);

	if (!db_ok(res))
	{
		fprintf(stderr, "dedup-sim: set-up failed: %s\nin: %s\n",
				PQresultErrorMessage(res), sql);
		exit(2);
	}
	PQclear(res);
}

/*
 * The business schema, the feed's messages (for the checks at the end) and
 * the scopes.  Scope names carry a run id: claims of an earlier run in the
 * same database must not count as duplicates.
 */
static void
main_setup(Sim *sim)
{
	PGconn	   *conn = db_plain(sim, "dedup-sim set-up");
	char		run[32];
	char		sql[1024];
	char		line[96];
	long		i;
	PGresult   *res;

	snprintf(run, sizeof(run), "%llx", (unsigned long long) (time(NULL) * 1000 + getpid() % 1000));
	snprintf(sim->scope_claims, sizeof(sim->scope_claims), "sim-%s-payments", run);
	snprintf(sim->scope_records, sizeof(sim->scope_records), "sim-%s-charges", run);
	snprintf(sim->scope_downstream, sizeof(sim->scope_downstream), "sim-%s-downstream", run);
	snprintf(sim->topic, sizeof(sim->topic), "sim-%s-payment-applied", run);

	main_sql(conn, "SET client_min_messages = warning");
	main_sql(conn, "CREATE EXTENSION IF NOT EXISTS dedup");
	main_sql(conn, "DROP SCHEMA IF EXISTS sim CASCADE");
	main_sql(conn, "CREATE SCHEMA sim");
	main_sql(conn,
			 "CREATE TABLE sim.messages (id bigint PRIMARY KEY, account int NOT NULL,"
			 " amount bigint NOT NULL, path text NOT NULL, copies int NOT NULL)");
	main_sql(conn,
			 "CREATE TABLE sim.accounts (id int PRIMARY KEY,"
			 " balance bigint NOT NULL DEFAULT 0)");
	/* no unique constraint: a message applied twice must show */
	main_sql(conn,
			 "CREATE TABLE sim.ledger (message_id bigint NOT NULL, account int NOT NULL,"
			 " amount bigint NOT NULL CHECK (amount > 0), event_id uuid NOT NULL,"
			 " path text NOT NULL, applied_at timestamptz NOT NULL DEFAULT clock_timestamp())");
	main_sql(conn, "CREATE INDEX ON sim.ledger (message_id)");
	main_sql(conn,
			 "CREATE TABLE sim.notifications (event_id uuid NOT NULL,"
			 " message_id bigint NOT NULL, amount bigint NOT NULL,"
			 " seq bigint NOT NULL, tx bigint NOT NULL DEFAULT txid_current(),"
			 " received_at timestamptz NOT NULL DEFAULT clock_timestamp())");
	main_sql(conn, "CREATE INDEX ON sim.notifications (event_id)");
	/*
	 * messages whose first delivery a history refused (--history): its false
	 * positives, never applied, and left out of what is to be applied
	 */
	main_sql(conn, "CREATE TABLE sim.refused (message_id bigint PRIMARY KEY)");
	main_sql(conn,
			 "CREATE VIEW sim.to_apply AS SELECT * FROM sim.messages AS m"
			 " WHERE NOT EXISTS (SELECT FROM sim.refused AS r WHERE r.message_id = m.id)");
	snprintf(sql, sizeof(sql),
			 "INSERT INTO sim.accounts (id) SELECT generate_series(1, %d)",
			 sim->options.accounts);
	main_sql(conn, sql);

	res = PQexec(conn, "COPY sim.messages FROM STDIN");
	if (PQresultStatus(res) != PGRES_COPY_IN)
	{
		fprintf(stderr, "dedup-sim: COPY failed: %s", PQerrorMessage(conn));
		exit(2);
	}
	PQclear(res);
	for (i = 0; i < sim->options.messages; i++)
	{
		const Message *m = &sim->messages[i];
		int			len = snprintf(line, sizeof(line), "%lld\t%d\t%lld\t%s\t%d\n",
								   (long long) m->id, m->account, (long long) m->amount,
								   m->kind == KIND_CLAIM ? "claim" : "record", m->copies);

		if (PQputCopyData(conn, line, len) != 1)
		{
			fprintf(stderr, "dedup-sim: COPY failed: %s", PQerrorMessage(conn));
			exit(2);
		}
	}
	if (PQputCopyEnd(conn, NULL) != 1 || !db_ok(res = PQgetResult(conn)))
	{
		fprintf(stderr, "dedup-sim: COPY failed: %s", PQerrorMessage(conn));
		exit(2);
	}
	PQclear(res);
	main_sql(conn, "ANALYZE sim.messages, sim.accounts");

	snprintf(sql, sizeof(sql),
			 "SELECT dedup_set_scope('%s', ttl => '%d s');"
			 "SELECT dedup_set_scope('%s', ttl => '%d s', lease => '%d ms');"
			 "SELECT dedup_set_scope('%s', ttl => '%d s');"
			 "SELECT dedup_set_scope('%s', retention => '%d s', lease => '2 s',"
			 " max_attempts => 1000)",
			 sim->scope_claims, sim->options.ttl_seconds,
			 sim->scope_records, sim->options.ttl_seconds, sim->options.lease_ms,
			 sim->scope_downstream, sim->options.ttl_seconds,
			 sim->topic, sim->options.ttl_seconds);
	main_sql(conn, sql);
	if (sim->options.history_seconds > 0)
	{
		snprintf(sql, sizeof(sql),
				 "SELECT dedup_set_scope('%s', history => '%d s', false_positive_rate => %g)",
				 sim->scope_claims, sim->options.history_seconds, sim->options.history_rate);
		main_sql(conn, sql);
	}
	PQfinish(conn);
}

static void *
main_consumer(void *arg)
{
	SimConn    *sc = arg;

	consumer_main(sc);
	atomic_fetch_sub(&sc->sim->consumers_left, 1);
	return NULL;
}

static void *
main_relay(void *arg)
{
	SimConn    *sc = arg;

	relay_main(sc);
	atomic_fetch_sub(&sc->sim->relays_left, 1);
	return NULL;
}

static void
main_progress(Sim *sim, int64_t start, bool tty, bool final)
{
	const SimCounters *c = &sim->counters;
	double		secs = (sim_now_ms() - start) / 1000.0;
	long		delivered = atomic_load(&c->deliveries);
	long		faults = c->kills + c->rollbacks + c->failed_calls + c->hung_calls +
		c->relay_faults + c->broker_dups + c->crashes;

	printf("%s%6.1f s  feed %3ld%%  delivered %ld  applied %ld  duplicates suppressed %ld"
		   "  retries %ld  faults %ld  relayed %ld  %.0f deliveries/s%s",
		   tty ? "\r" : "  ", secs, feed_position(sim) * 100 / feed_total(sim), delivered,
		   (long) c->applied,
		   (long) (c->dup_claims + c->replays),
		   (long) (c->busy_nowait + c->busy_in_progress),
		   faults, (long) c->acked, secs > 0 ? delivered / secs : 0.0,
		   tty && !final ? "   " : "\n");
	fflush(stdout);
}

int
main(int argc, char **argv)
{
	Sim		   *sim = calloc(1, sizeof(Sim));
	uint64_t	rng;
	pthread_t  *consumers;
	pthread_t	relays[SIM_MAX_RELAYS];
	pthread_t	killer;
	SimConn    *conns;
	int64_t		start;
	int64_t		last_progress;
	bool		tty = isatty(fileno(stdout));
	int			interval_ms;
	int			i;

	if (!sim)
		abort();
	sim->options = main_defaults;
	main_options(sim, argc, argv);
	rng = sim->options.seed;
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (sim->options.log_mode)
		return log_main(sim);
	main_messages(sim, &rng);
	feed_build(sim, &rng);
	printf("== dedup-sim: %ld messages, %ld deliveries (1..%d copies each%s), "
		   "%d consumers, seed %llu\n",
		   sim->options.messages, feed_total(sim), sim->options.max_copies,
		   sim->options.window > 0 ? ", later copies within a window of time" : ", anywhere",
		   sim->options.consumers, (unsigned long long) sim->options.seed);
	main_setup(sim);
	printf("   scopes %s (claims), %s (records), %s (downstream), topic %s; ttl %d s\n",
		   sim->scope_claims, sim->scope_records, sim->scope_downstream, sim->topic,
		   sim->options.ttl_seconds);
	if (sim->options.history_seconds > 0)
		printf("   history of %s: %d s, false_positive_rate %g\n",
			   sim->scope_claims, sim->options.history_seconds, sim->options.history_rate);

	conns = calloc(sim->options.consumers, sizeof(SimConn));
	consumers = calloc(sim->options.consumers, sizeof(pthread_t));
	if (!conns || !consumers)
		abort();
	for (i = 0; i < sim->options.consumers; i++)
	{
		char	   *name = malloc(32);

		snprintf(name, 32, "dedup-sim consumer %d", i + 1);
		conns[i].sim = sim;
		conns[i].name = name;
		conns[i].prepare = consumer_statements;
		conns[i].number = i + 1;
		faults_register(sim, &conns[i]);
	}
	for (i = 0; i < sim->options.relays; i++)
	{
		relay_setup(sim, i + 1);
		faults_register(sim, &sim->relay_downstreams[i]);
	}

	start = last_progress = sim_now_ms();
	atomic_store(&sim->consumers_left, sim->options.consumers);
	for (i = 0; i < sim->options.consumers; i++)
		pthread_create(&consumers[i], NULL, main_consumer, &conns[i]);
	atomic_store(&sim->relays_left, sim->options.relays);
	for (i = 0; i < sim->options.relays; i++)
		pthread_create(&relays[i], NULL, main_relay, &sim->relay_conns[i]);
	pthread_create(&killer, NULL, faults_killer_main, sim);

	interval_ms = sim->options.progress_seconds > 0 ? sim->options.progress_seconds * 1000 :
		tty ? 500 : 5000;
	/* the consumers until the feed is done, then the relay until drained */
	while (atomic_load(&sim->consumers_left) > 0 || atomic_load(&sim->relays_left) > 0)
	{
		if (atomic_load(&sim->consumers_left) == 0 && !atomic_load(&sim->consumers_done))
		{
			for (i = 0; i < sim->options.consumers; i++)
				pthread_join(consumers[i], NULL);
			atomic_store(&sim->consumers_done, true);
		}
		sim_sleep_ms(50);
		if (sim_now_ms() - start > (int64_t) sim->options.timeout_seconds * 1000)
		{
			main_progress(sim, start, tty, true);
			printf("\nFAILED: not done after %d s (--timeout): a delivery or an event is "
				   "stuck\n", sim->options.timeout_seconds);
			exit(1);
		}
		if (sim_now_ms() - last_progress >= interval_ms)
		{
			main_progress(sim, start, tty, false);
			last_progress = sim_now_ms();
		}
	}
	for (i = 0; i < sim->options.relays; i++)
		pthread_join(relays[i], NULL);
	atomic_store(&sim->stopping, true);
	pthread_join(killer, NULL);
	main_progress(sim, start, tty, true);
	return report_print(sim, sim_now_ms() - start);
}
