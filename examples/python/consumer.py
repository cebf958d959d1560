#!/usr/bin/python3
"""A queue consumer on dedup_claim: each message applied once, however often
it is delivered.

doc/claims.md quotes consume() from this file; test/integration/docs.sh runs it as
a program against a throwaway server, as the application role, and requires
its output.  Connect with libpq's environment (PGHOST, PGDATABASE, PGUSER,
...).  Needs psycopg 3 (Debian: python3-psycopg).
"""
import psycopg
from psycopg.rows import namedtuple_row


def consume(conn, msg):
    with conn.transaction():
        new = conn.execute("SELECT dedup_claim('payments-consumer', %s) AS new",
                           [msg["id"]]).fetchone().new
        if new:
            conn.execute("UPDATE accounts SET balance = balance + %s WHERE id = %s",
                         [msg["amount"], msg["account"]])
    # committed: the claim and the balance change together; ack the message now.
    # A crash before the commit loses both, and the redelivery claims again (true).
    # A redelivery after the commit gets false and is only acked.
    return new


def main():
    # autocommit: `with conn.transaction()` is then a transaction of its own
    with psycopg.connect(autocommit=True, row_factory=namedtuple_row) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS accounts (id int PRIMARY KEY, balance int NOT NULL)")
        conn.execute("INSERT INTO accounts VALUES (1, 0), (2, 0) ON CONFLICT DO NOTHING")
        deliveries = [  # an at-least-once broker: m-1 and m-3 are delivered twice
            {"id": "m-1", "account": 1, "amount": 100},
            {"id": "m-2", "account": 2, "amount": 50},
            {"id": "m-1", "account": 1, "amount": 100},
            {"id": "m-3", "account": 1, "amount": 7},
            {"id": "m-3", "account": 1, "amount": 7},
        ]
        for msg in deliveries:
            print(msg["id"], "applied" if consume(conn, msg) else "duplicate, only acked")
        for a in conn.execute("SELECT id, balance FROM accounts ORDER BY id"):
            print(f"account {a.id}: {a.balance}")


if __name__ == "__main__":
    main()
