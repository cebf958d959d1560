/*
 * sim.h: what the parts of dedup-sim share — one Sim, the state of a run
 * (the options, the messages of the feed, the counters the progress line
 * and the report read, the scopes, the feed, the connections), and the
 * functions each file offers.  There is no global variable: main.c owns
 * the run's Sim and hands it to every part, as an argument or through the
 * SimConn a thread works with (SimConn.sim).
 *
 * dedup-sim is an exactly-once simulation against a real server: an
 * at-least-once feed delivers every message 1..K times to concurrent
 * consumers that claim (dedup_claim) or begin/complete (dedup_begin) it,
 * apply a payment and put an outbox event in one transaction; a relay takes
 * the events and publishes them to a downstream consumer that dedups them
 * with its own scope; faults are injected all along.  At the end the
 * database is checked against what the feed sent.
 *
 * Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.
 */
#ifndef DEDUP_SIM_H
#define DEDUP_SIM_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <libpq-fe.h>

/* the command-line options; see usage() in main.c */
typedef struct SimOptions
{
	const char *conninfo;
	long		messages;		/* distinct messages in the feed */
	int			max_copies;		/* each is delivered 1..max_copies times */
	int			window;			/* a message's other copies arrive within
								 * this many ms of its first; 0 = every
								 * copy anywhere in the feed */
	int			consumers;		/* concurrent consumer connections */
	int			accounts;
	double		record_share;	/* share of messages handled with records */
	double		poison_share;	/* share rejected by the business write */
	double		kill_rate;		/* connections killed per second */
	double		rollback_share; /* consumer transactions rolled back */
	double		fail_share;		/* external calls that fail */
	double		hang_share;		/* external calls that hang past the lease */
	double		relay_fault_share;	/* relay batches published, not acked */
	int			relays;			/* relays running at once on the topic */
	int			crashes;		/* postmaster kills (needs crash_command) */
	const char *crash_command;
	int			ttl_seconds;	/* dedup window of every scope */
	int			history_seconds;	/* a history of the claim scopes; 0: none */
	double		history_rate;	/* its false_positive_rate */
	int			lease_ms;		/* lease of the records scope */
	int			progress_seconds;
	int			timeout_seconds;	/* give up (exit 1) after this long */
	uint64_t	seed;
	bool		log_mode;		/* --log: the partitioned-log simulation (log.c) */
	bool		citus;			/* --citus: a Citus coordinator, dedup distributed */
	int			partitions;		/* its partitions */
	bool		log_unguarded;	/* --log without dedup_advance: must fail */
} SimOptions;

typedef enum MessageKind
{
	KIND_CLAIM,					/* dedup_claim in the business transaction */
	KIND_RECORD					/* dedup_begin, an external call, dedup_complete */
} MessageKind;

typedef struct Message
{
	int64_t		id;
	int32_t		account;
	int64_t		amount;			/* negative for a poison message */
	MessageKind kind;
	int			copies;
} Message;

/* what happened, counted by every thread; read by progress and report */
typedef struct SimCounters
{
	atomic_long deliveries;		/* deliveries handed to consumers */
	atomic_long applied;		/* business transactions committed */
	atomic_long applied_record; /* ... of them through records */
	atomic_long dup_claims;		/* dedup_claim returned false */
	atomic_long history_caught; /* ... and dedup_seen said "history" */
	atomic_long history_false;	/* ... for a message never applied: a false positive */
	atomic_long replays;		/* dedup_begin returned replay */
	atomic_long busy_nowait;	/* 55P03: a copy was being applied */
	atomic_long busy_in_progress;	/* dedup_begin: in_progress */
	atomic_long restarts;		/* dedup_begin started with attempt > 1 */
	atomic_long leases_lost;	/* dedup_complete: 55006, rolled back */
	atomic_long poison_rejected;	/* business write failed, dead-lettered */
	atomic_long poison_dup;		/* a poison message's claim said false */
	atomic_long poison_left;	/* its claim still there after rollback */
	atomic_long mismatches;		/* dedup_begin: mismatch (never expected) */
	atomic_long client_retries; /* extra deliveries from hung calls */
	atomic_long redeliveries;	/* deliveries put back after a failure */
	atomic_long external_calls;
	atomic_long kills;			/* pg_terminate_backend that hit */
	atomic_long rollbacks;		/* injected rollbacks */
	atomic_long failed_calls;	/* injected external failures (released) */
	atomic_long hung_calls;		/* injected hangs past the lease */
	atomic_long relay_faults;	/* injected relay deaths before ack */
	atomic_long broker_dups;	/* batches the broker published twice */
	atomic_long crashes;		/* postmaster kills done */
	atomic_long lost_connections;	/* errors that broke a connection */
	atomic_long unexpected;		/* SQL errors nobody expected */
	atomic_long published;		/* events published downstream */
	atomic_long acked;			/* events acked (as counted by the ack) */
	atomic_long downstream_new; /* events applied downstream */
	atomic_long downstream_dup; /* published again, suppressed downstream */
	atomic_long max_gap_ms;		/* longest time from a message's commit to
								 * a later copy */
	atomic_long crash_outage_ms[8];
	/* the partitioned-log mode */
	atomic_long log_sends;		/* producer sends (advance + append) */
	atomic_long log_duplicate_sends;	/* sends the broker's mark said were in */
	atomic_long log_fenced;		/* sends of an old producer instance refused */
	atomic_long log_restarts;	/* producers restarted under a new epoch */
	atomic_long log_seeks;		/* consumer seeks back (redeliveries) */
	atomic_long log_consumer_crashes;	/* consumers that resumed from the mark */
} SimCounters;

typedef struct Sim Sim;
typedef struct Feed Feed;		/* feed.c's, opaque */

/* a connection of one thread, with the pid the fault injector may kill */
typedef struct SimConn
{
	Sim		   *sim;			/* the run it belongs to */
	PGconn	   *conn;
	const char *name;			/* application_name */
	const char *const *prepare; /* name, sql pairs, NULL-terminated */
	const char *on_connect;		/* a command to run after connecting */
	int			number;			/* consumers: 1..C, seeds its random numbers */
	atomic_int	pid;			/* backend pid, 0 when not connected */
	atomic_bool in_xact;		/* inside a transaction: a kill target */
} SimConn;

#define SIM_MAX_RELAYS 16
#define SIM_MAX_FAULT_TARGETS 64

/*
 * The state of a run.  main.c creates it, fills in the options, the
 * messages and the scopes before any thread starts, and passes it on; the
 * threads then share the counters and the two flags (atomics), the feed
 * (under its own lock), and read the rest.
 */
struct Sim
{
	SimOptions	options;
	SimCounters counters;
	Message    *messages;		/* options.messages of them (not with --log) */
	Feed	   *feed;			/* feed.c's deliveries (not with --log) */
	long		planned_deliveries; /* for the crash schedule: set by
									 * feed_build or log_main */
	atomic_bool consumers_done; /* the consumers have ended: relays drain */
	atomic_bool stopping;		/* every worker thread has ended */
	atomic_int	consumers_left; /* main.c: consumer threads still running */
	atomic_int	relays_left;	/* main.c: relay threads still running */
	char		scope_claims[64];
	char		scope_records[64];
	char		scope_downstream[64];
	char		topic[64];
	/* relay n's connections are [n - 1] (relay.c) */
	SimConn		relay_conns[SIM_MAX_RELAYS];
	SimConn		relay_downstreams[SIM_MAX_RELAYS];
	/* the connections the fault injector may kill (faults.c) */
	SimConn    *fault_targets[SIM_MAX_FAULT_TARGETS];
	int			nfault_targets;
};

/* main.c */
extern int64_t sim_now_ms(void);
extern uint64_t sim_random(uint64_t *state);
extern double sim_random_unit(uint64_t *state);
extern void sim_sleep_ms(int64_t ms);

/* feed.c: the at-least-once feed */
extern void feed_build(Sim *sim, uint64_t *rng);
extern long feed_total(Sim *sim);
extern long feed_position(Sim *sim);
extern bool feed_next(Sim *sim, int64_t *index);
extern void feed_ack(Sim *sim, int64_t index);
extern void feed_requeue(Sim *sim, int64_t index, int delay_ms);
extern void feed_add(Sim *sim, int64_t index, int delay_ms);
extern void feed_applied(Sim *sim, int64_t index);
extern void feed_seen(Sim *sim, int64_t index);

/* db.c: connections that survive kills and crashes */
extern void db_connect(SimConn *sc);
extern PGresult *db_exec(SimConn *sc, const char *stmt, int nparams,
						 const char *const *params);
extern bool db_ok(PGresult *res);
extern const char *db_sqlstate(PGresult *res);
extern bool db_broken(SimConn *sc);
extern bool db_lost(SimConn *sc, PGresult *res);
extern bool db_begin(SimConn *sc);
extern PGresult *db_commit(SimConn *sc);
extern void db_end(SimConn *sc, bool commit);
extern void db_unexpected(SimConn *sc, const char *what, PGresult *res);
extern PGconn *db_plain(Sim *sim, const char *what);

/* consumer.c */
extern const char *const consumer_statements[];
extern void *consumer_main(void *arg);	/* arg: the consumer's SimConn */

/* relay.c: the relays' connections and the downstream consumer's */
extern void relay_setup(Sim *sim, int n);
extern void *relay_main(void *arg);	/* arg: the relay's SimConn */

/* faults.c */
extern void faults_register(Sim *sim, SimConn *sc);
extern void *faults_killer_main(void *arg);	/* arg: the Sim */

/* log.c: the partitioned-log mode */
extern int	log_main(Sim *sim);

/* report.c */
extern int	report_print(Sim *sim, int64_t elapsed_ms);

#endif							/* DEDUP_SIM_H */
