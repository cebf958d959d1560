/*
 * outbox_relay.c: the benchmark's live relay.  It runs the relay loop the
 * README describes on one topic for a given time: take a batch
 * (dedup_outbox_take_batch), ack it (dedup_outbox_ack_batch), and when the
 * outbox is empty wait for dedup's NOTIFY.  For every event it takes it
 * writes one line to standard output: the seconds from the producer's put
 * (the payload's "t", the put statement's clock_timestamp(), just before
 * the producer commits) to the take's result, as the relay's backend
 * sees it (one clock, no skew).
 *
 *   outbox_relay CONNINFO TOPIC SECONDS
 *
 * Built and run by scripts/bench; not installed.
 *
 * Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <time.h>

#include <libpq-fe.h>

static double
relay_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static PGresult *
relay_exec(PGconn *conn, const char *name, int nparams, const char *const *params)
{
	PGresult   *res = PQexecPrepared(conn, name, nparams, params, NULL, NULL, 0);
	ExecStatusType st = PQresultStatus(res);

	if (st != PGRES_TUPLES_OK && st != PGRES_COMMAND_OK)
	{
		fprintf(stderr, "outbox_relay: %s: %s", name, PQerrorMessage(conn));
		exit(1);
	}
	return res;
}

static void
relay_prepare(PGconn *conn, const char *name, const char *sql)
{
	PGresult   *res = PQprepare(conn, name, sql, 0, NULL);

	if (PQresultStatus(res) != PGRES_COMMAND_OK)
	{
		fprintf(stderr, "outbox_relay: prepare %s: %s", name, PQerrorMessage(conn));
		exit(1);
	}
	PQclear(res);
}

/* Sleep until a NOTIFY arrives, or at most a second. */
static void
relay_wait(PGconn *conn)
{
	int			sock = PQsocket(conn);
	fd_set		fds;
	struct timeval tv = {1, 0};
	PGnotify   *n;

	FD_ZERO(&fds);
	FD_SET(sock, &fds);
	select(sock + 1, &fds, NULL, NULL, &tv);
	PQconsumeInput(conn);
	while ((n = PQnotifies(conn)) != NULL)
		PQfreemem(n);
}

int
main(int argc, char **argv)
{
	PGconn	   *conn;
	PGresult   *res;
	double		end;
	long		taken = 0;

	if (argc != 4)
	{
		fprintf(stderr, "usage: outbox_relay CONNINFO TOPIC SECONDS\n");
		return 2;
	}
	conn = PQconnectdb(argv[1]);
	if (PQstatus(conn) != CONNECTION_OK)
	{
		fprintf(stderr, "outbox_relay: %s", PQerrorMessage(conn));
		return 1;
	}
	res = PQexec(conn, "LISTEN dedup_outbox");
	PQclear(res);
	relay_prepare(conn, "take",
				  "SELECT batch_id, extract(epoch FROM clock_timestamp()"
				  " - (payload->>'t')::timestamptz) FROM dedup_outbox_take_batch($1, 100)");
	relay_prepare(conn, "ack", "SELECT dedup_outbox_ack_batch($1::bigint)");
	end = relay_now() + atof(argv[3]);
	while (relay_now() < end)
	{
		const char *take[] = {argv[2]};
		int			n;

		res = relay_exec(conn, "take", 1, take);
		n = PQntuples(res);
		if (n == 0)
		{
			PQclear(res);
			relay_wait(conn);
			continue;
		}
		for (int i = 0; i < n; i++)
			printf("%s\n", PQgetvalue(res, i, 1));
		{
			const char *ack[] = {PQgetvalue(res, 0, 0)};
			PGresult   *acked = relay_exec(conn, "ack", 1, ack);

			PQclear(acked);
		}
		taken += n;
		PQclear(res);
	}
	fprintf(stderr, "outbox_relay: %ld events taken and acked\n", taken);
	PQfinish(conn);
	return 0;
}
