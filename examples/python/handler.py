#!/usr/bin/python3
"""An HTTP handler with an Idempotency-Key, on dedup's idempotency records.

The README quotes create_charge() from this file; test/integration/docs.sh runs
it as a program against a throwaway server, as the application role, and
requires its output.  Connect with libpq's environment (PGHOST, PGDATABASE,
PGUSER, ...).  Needs psycopg 3 (Debian: python3-psycopg).
"""
import json

import psycopg
from psycopg.rows import namedtuple_row


class TemporaryError(Exception):
    """The payment provider failed in a way that a retry may cure."""


class Provider:
    """A stand-in for a payment provider: counts its charges."""

    def __init__(self):
        self.calls = 0
        self.fail_next = False

    def charge(self, body):
        self.calls += 1
        if self.fail_next:
            self.fail_next = False
            raise TemporaryError("provider timeout")
        return {"charge": f"ch_{self.calls}", "amount": body["amount"]}


provider = Provider()


def connect():
    # autocommit: each `with conn.transaction()` is a transaction of its own
    # (without it, psycopg opens one at the first statement and a later
    # conn.transaction() is only a savepoint inside it); namedtuple_row: r.outcome
    return psycopg.connect(autocommit=True, row_factory=namedtuple_row)


def create_charge(conn, idem_key, body):
    with conn.transaction():                      # 1: take the key
        r = conn.execute("SELECT * FROM dedup_begin('charges', %s, %s::jsonb)",
                         [idem_key, json.dumps(body)]).fetchone()
    if r.outcome == "replay":
        return r.response_code, r.response        # the stored answer, errors included
    if r.outcome == "in_progress":
        return 409, {"error": "a request with this key is in progress"}
    if r.outcome == "mismatch":
        return 422, {"error": "this key was used with another request"}
    try:                                          # started: the work, outside any transaction
        charge = provider.charge(body)
    except TemporaryError:
        with conn.transaction():                  # give the key back: a retry starts afresh
            conn.execute("SELECT dedup_release('charges', %s, attempt => %s)",
                          [idem_key, r.attempts])
        return 503, {"error": "try again"}
    with conn.transaction():                      # 2: business write and response, at once
        conn.execute("INSERT INTO charges (id, amount) VALUES (%s, %s)",
                      [charge["charge"], body["amount"]])
        conn.execute("SELECT dedup_complete('charges', %s, 201, %s::jsonb, attempt => %s)",
                      [idem_key, json.dumps(charge), r.attempts])
    return 201, charge


def show(what, answer):
    code, body = answer
    text = json.dumps(body, sort_keys=True, separators=(",", ":"))
    print(f"{what + ':':20} {code} {text}")


def main():
    with connect() as conn, connect() as other:
        conn.execute("CREATE TABLE IF NOT EXISTS charges (id text PRIMARY KEY, amount int NOT NULL)")
        show("first request", create_charge(conn, "k-1", {"amount": 100}))
        show("client retries", create_charge(conn, "k-1", {"amount": 100}))
        show("same key, new body", create_charge(conn, "k-1", {"amount": 999}))
        provider.fail_next = True
        show("provider fails", create_charge(conn, "k-2", {"amount": 5}))
        show("client retries", create_charge(conn, "k-2", {"amount": 5}))
        # another worker holds k-3: its dedup_begin committed, its work goes on
        other.execute("SELECT dedup_begin('charges', 'k-3', '{\"amount\": 7}')")
        show("while another runs", create_charge(conn, "k-3", {"amount": 7}))
        n = conn.execute("SELECT count(*) AS n FROM charges").fetchone().n
        print(f"provider called {provider.calls} times, {n} charges written")


if __name__ == "__main__":
    main()
