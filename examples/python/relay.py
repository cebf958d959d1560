#!/usr/bin/python3
"""An outbox relay: takes the events of a topic in batches, publishes them,
acks them; when there is nothing to take, waits a second and polls again.

The README quotes relay_once() from this file; test/integration/docs.sh runs it
as a program against a throwaway server, as a role granted dedup_grant_relay,
and requires its output.  Connect with libpq's environment (PGHOST,
PGDATABASE, PGUSER, ...).  Needs psycopg 3 (Debian: python3-psycopg).
"""
import time

import psycopg
from psycopg.rows import namedtuple_row


def publish(event):
    """A stand-in for the broker's client: Kafka, RabbitMQ, SNS, a webhook..."""
    print(f"published {event.type} {event.payload}")


def relay_once(conn, topic):
    """One batch: take, publish, ack. Returns how many events it published."""
    batch = conn.execute("SELECT * FROM dedup_outbox_take_batch(%s, 100)", [topic]).fetchall()
    if not batch:
        return 0
    failed = []
    for event in batch:
        try:
            publish(event)
        except Exception:
            failed.append(event.id)
    # published ones never come back; failed ones come back after 30 seconds
    conn.execute("SELECT dedup_outbox_ack_batch(%s, failed => %s::uuid[], retry_delay => '30 seconds')",
                 [batch[0].batch_id, failed])
    return len(batch) - len(failed)


def main(topic="orders", forever=False):
    # autocommit: each take and each ack commits at once (a take holds the
    # topic's relay lock until its transaction ends)
    # (a relay may instead LISTEN dedup_outbox on a direct connection and take
    # when notified: each committed put sends one notification per topic)
    with psycopg.connect(autocommit=True, row_factory=namedtuple_row) as conn:
        while True:
            while relay_once(conn, topic) > 0:
                pass
            if not forever:
                break
            time.sleep(1)


if __name__ == "__main__":
    main()
