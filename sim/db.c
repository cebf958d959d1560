/*
 * db.c: the simulator's connections.  Every thread holds SimConns that
 * reconnect after a kill or a server crash (retrying for two minutes), with
 * their statements prepared again, and tell a broken connection (the
 * transaction's fate unknown) from an SQL error (the transaction failed).
 *
 * Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.
 */
#include "sim.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DB_RETRY_MS		120000	/* give up connecting after this long */

/*
 * Server messages outside a query's result: warnings are shown; the FATAL
 * of a killed backend or of a crash is not (it is counted, as a lost
 * connection, where the thread next uses it).
 */
static void
db_notice(void *arg, const char *message)
{
	if (strncmp(message, "FATAL:", 6) != 0)
		fprintf(stderr, "%s", message);
}

static PGconn *
db_open(Sim *sim, const char *name, bool quiet_retry)
{
	const char *keywords[] = {"dbname", "application_name", NULL};
	const char *values[] = {sim->options.conninfo, name, NULL};
	int64_t		deadline = sim_now_ms() + DB_RETRY_MS;

	for (;;)
	{
		PGconn	   *conn = PQconnectdbParams(keywords, values, 1);

		if (PQstatus(conn) == CONNECTION_OK)
		{
			PQsetNoticeProcessor(conn, db_notice, NULL);
			return conn;
		}
		if (sim_now_ms() > deadline || !quiet_retry)
		{
			fprintf(stderr, "dedup-sim: %s cannot connect: %s", name, PQerrorMessage(conn));
			exit(2);
		}
		PQfinish(conn);
		sim_sleep_ms(100);
	}
}

/* A connection for set-up, report or fault injection. */
PGconn *
db_plain(Sim *sim, const char *name)
{
	return db_open(sim, name, true);
}

/*
 * (Re)connect sc and prepare its statements.  A failure to prepare means
 * the connection broke again (a kill, a crash): start over.
 */
void
db_connect(SimConn *sc)
{
	for (;;)
	{
		const char *const *p;
		bool		ok = true;

		if (sc->conn)
			PQfinish(sc->conn);
		atomic_store(&sc->pid, 0);
		atomic_store(&sc->in_xact, false);
		sc->conn = db_open(sc->sim, sc->name, true);
		for (p = sc->prepare; p && p[0] && ok; p += 2)
		{
			PGresult   *res = PQprepare(sc->conn, p[0], p[1], 0, NULL);

			if (PQresultStatus(res) != PGRES_COMMAND_OK)
			{
				if (PQstatus(sc->conn) == CONNECTION_OK)
				{
					fprintf(stderr, "dedup-sim: cannot prepare %s: %s", p[0],
							PQerrorMessage(sc->conn));
					exit(2);
				}
				ok = false;
			}
			PQclear(res);
		}
		if (ok && sc->on_connect)
		{
			PGresult   *res = PQexec(sc->conn, sc->on_connect);

			ok = db_ok(res);
			PQclear(res);
		}
		if (ok)
		{
			atomic_store(&sc->pid, PQbackendPID(sc->conn));
			return;
		}
	}
}

/*
 * Run the prepared statement stmt; the caller PQclears the result.  Never
 * NULL: libpq's NULL (nothing sent on a dead connection) becomes a failed
 * result.
 */
PGresult *
db_exec(SimConn *sc, const char *stmt, int nparams, const char *const *params)
{
	PGresult   *res = PQexecPrepared(sc->conn, stmt, nparams, params, NULL, NULL, 0);

	return res ? res : PQmakeEmptyPGresult(sc->conn, PGRES_FATAL_ERROR);
}

bool
db_ok(PGresult *res)
{
	ExecStatusType st = PQresultStatus(res);

	return st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK;
}

const char *
db_sqlstate(PGresult *res)
{
	const char *s = PQresultErrorField(res, PG_DIAG_SQLSTATE);

	return s ? s : "";
}

/*
 * Whether the connection is gone: killed, server crashed or shut down.  The
 * transaction that was open has then either committed (if COMMIT had reached
 * the server) or not: at-least-once delivery redelivers the message, and the
 * claim decides.
 */
bool
db_broken(SimConn *sc)
{
	if (sc->conn == NULL || PQstatus(sc->conn) != CONNECTION_OK)
		return true;
	/* a terminated backend's FATAL may arrive before libpq sees the EOF */
	if (PQtransactionStatus(sc->conn) == PQTRANS_UNKNOWN)
		return true;
	return false;
}

/*
 * The messages of a Citus cluster whose node failed, as the coordinator
 * passes them on (most as XX000): the node's connection lost, or its
 * backend ended by its postmaster's death or a crash.
 */
static const char *const db_node_failures[] = {
	"remote node", "server closed the connection", "terminating connection",
	"postmaster was shut down", "the database system is", "connection establishment for",
	"could not establish any connections", "failure on connection marked as essential",
	"connection not open", "could not receive data", "could not send data",
	"could not commit transaction", NULL
};

/*
 * Whether an error res means the connection is lost rather than the
 * statement failed: a broken connection, or the FATAL of a terminated
 * backend (class 57: operator intervention) or a connection error (08);
 * with --citus, a node of the cluster that failed under the statement.
 */
bool
db_lost(SimConn *sc, PGresult *res)
{
	const char *state = db_sqlstate(res);
	Sim		   *sim = sc->sim;

	if (db_broken(sc) || strncmp(state, "57", 2) == 0 || strncmp(state, "08", 2) == 0)
		return true;
	if (sim->options.citus)
	{
		const char *message = PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY);

		for (int i = 0; message && db_node_failures[i]; i++)
			if (strstr(message, db_node_failures[i]))
				return true;
	}
	return false;
}

/*
 * Open a transaction; false when the connection is lost (counted: the
 * caller puts the delivery back).
 */
bool
db_begin(SimConn *sc)
{
	PGresult   *res = PQexec(sc->conn, "BEGIN");
	bool		ok = db_ok(res);

	if (ok)
		atomic_store(&sc->in_xact, true);
	else
		db_unexpected(sc, "BEGIN", res);
	PQclear(res);
	return ok;
}

/*
 * Commit; NULL when it took, else a failed result for the caller to judge
 * and clear.  A COMMIT that ended an aborted transaction (the tag ROLLBACK)
 * counts as failed.
 */
PGresult *
db_commit(SimConn *sc)
{
	PGresult   *res = PQexec(sc->conn, "COMMIT");

	atomic_store(&sc->in_xact, false);
	if (res && db_ok(res) && strcmp(PQcmdStatus(res), "COMMIT") == 0)
	{
		PQclear(res);
		return NULL;
	}
	if (res && db_ok(res))
	{
		PQclear(res);
		res = NULL;
	}
	return res ? res : PQmakeEmptyPGresult(sc->conn, PGRES_FATAL_ERROR);
}

/*
 * End the transaction; after an error this is the ROLLBACK that every
 * driver sends.  Whether a COMMIT took is for the caller to ask with
 * PQtransactionStatus beforehand or db_broken afterwards.
 */
void
db_end(SimConn *sc, bool commit)
{
	PGresult   *res = PQexec(sc->conn, commit ? "COMMIT" : "ROLLBACK");

	PQclear(res);
	atomic_store(&sc->in_xact, false);
}

/*
 * An error the simulation did not expect: counted (it fails the run) and
 * shown, the first ten of them.  A broken connection is not unexpected: it
 * is counted as such.
 */
void
db_unexpected(SimConn *sc, const char *what, PGresult *res)
{
	Sim		   *sim = sc->sim;
	long		n;

	if (db_lost(sc, res))
	{
		atomic_fetch_add(&sim->counters.lost_connections, 1);
		atomic_store(&sc->in_xact, false);
		return;
	}
	n = atomic_fetch_add(&sim->counters.unexpected, 1);
	if (n < 10)
		fprintf(stderr, "\ndedup-sim: %s: unexpected error %s: %s", what,
				db_sqlstate(res), PQresultErrorMessage(res));
}
