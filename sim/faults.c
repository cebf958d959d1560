/*
 * faults.c: the fault injector.  A thread that, at random times (a Poisson
 * process of --kill-rate per second), terminates the backend of a
 * connection that is inside a transaction (pg_terminate_backend), and, at
 * evenly spaced points of the feed, runs --crash-command, which kills the
 * postmaster with SIGKILL and starts the server again; every connection
 * then breaks and reconnects.
 *
 * Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.
 */
#include "sim.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define FAULTS_TICK_MS	20

/* A connection the killer may terminate; call before the threads start. */
void
faults_register(Sim *sim, SimConn *sc)
{
	if (sim->nfault_targets < SIM_MAX_FAULT_TARGETS)
		sim->fault_targets[sim->nfault_targets++] = sc;
}

/* Terminate the backend of a random connection that is in a transaction. */
static void
faults_kill_one(Sim *sim, PGconn **admin, uint64_t *rng)
{
	int			tries;

	for (tries = 0; tries < 4 * sim->nfault_targets; tries++)
	{
		SimConn    *sc = sim->fault_targets[sim_random(rng) % sim->nfault_targets];
		int			pid = atomic_load(&sc->pid);
		char		pidtext[16];
		const char *params[] = {pidtext};
		PGresult   *res;

		if (pid == 0 || !atomic_load(&sc->in_xact))
			continue;
		if (*admin == NULL || PQstatus(*admin) != CONNECTION_OK)
		{
			PGresult   *quiet;

			PQfinish(*admin);
			*admin = db_plain(sim, "dedup-sim fault injector");
			/* a target gone meanwhile is no news: no "is not a PostgreSQL backend" warning */
			quiet = PQexec(*admin, "SET client_min_messages = error");
			PQclear(quiet);
		}
		snprintf(pidtext, sizeof(pidtext), "%d", pid);
		res = PQexecParams(*admin, "SELECT pg_terminate_backend($1::int)", 1, NULL,
						   params, NULL, NULL, 0);
		if (db_ok(res) && PQgetvalue(res, 0, 0)[0] == 't')
			atomic_fetch_add(&sim->counters.kills, 1);
		PQclear(res);
		return;
	}
}

/* Kill the postmaster and start it again, through --crash-command. */
static void
faults_crash(Sim *sim, int n)
{
	int64_t		start = sim_now_ms();
	long		delivered = atomic_load(&sim->counters.deliveries);
	int			rc;

	printf("\n  crash %d: postmaster killed (SIGKILL) after %ld deliveries; restarting\n",
		   n + 1, delivered);
	fflush(stdout);
	rc = system(sim->options.crash_command);
	if (rc != 0)
	{
		fprintf(stderr, "dedup-sim: the crash command failed (status %d): %s\n",
				rc, sim->options.crash_command);
		exit(2);
	}
	if (n < 8)
		atomic_store(&sim->counters.crash_outage_ms[n], (long) (sim_now_ms() - start));
	atomic_fetch_add(&sim->counters.crashes, 1);
	printf("  crash %d: server up again after %.1f s; connections come back\n",
		   n + 1, (sim_now_ms() - start) / 1000.0);
	fflush(stdout);
}

void *
faults_killer_main(void *arg)
{
	Sim		   *sim = arg;
	uint64_t	rng = sim->options.seed ^ 0xdeadULL;
	PGconn	   *admin = NULL;
	int			crashes_done = 0;
	int64_t		next_kill = 0;

	while (!atomic_load(&sim->stopping))
	{
		int64_t		now = sim_now_ms();

		if (sim->options.kill_rate > 0)
		{
			if (next_kill == 0)
				next_kill = now - log(1.0 - sim_random_unit(&rng)) * 1000.0 / sim->options.kill_rate;
			else if (now >= next_kill && !atomic_load(&sim->consumers_done))
			{
				faults_kill_one(sim, &admin, &rng);
				next_kill = 0;
			}
		}
		if (crashes_done < sim->options.crashes &&
			atomic_load(&sim->counters.deliveries) >=
			sim->planned_deliveries * (crashes_done + 1) / (sim->options.crashes + 1))
		{
			faults_crash(sim, crashes_done++);
			PQfinish(admin);
			admin = NULL;
		}
		sim_sleep_ms(FAULTS_TICK_MS);
	}
	PQfinish(admin);
	return NULL;
}
