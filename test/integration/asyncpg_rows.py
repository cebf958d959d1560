"""dedup's row results through asyncpg (test/integration/asyncpg.sh runs it; not named
asyncpg.py, which would be imported for asyncpg itself).

asyncpg reads a composite value in binary, column by column, and cannot
read one that holds a type it has no binary codec for (an extension's):
"text encoding of composite types is not supported".  So every row a
public function returns must hold built-in types only.  Each such call is
made here both ways a client makes it, with the values asserted:
  - fetchval("SELECT f(...)"), the row as one composite value (an
    asyncpg.Record for a row type, dedup_begin_result; a tuple for the
    record of a function's OUT columns);
  - fetchrow / fetch("SELECT * FROM f(...)"), its columns.
In each database named on the command line, as DB:VERSION: 1.1 (created at
1.1, or updated from 1.0: the same calls) or 1.0 (a database still at 1.0
with the 1.1 library: 1.0's calls, that worked through asyncpg in 1.0).
A control shows the check can fail: a composite holding a
dedup_fingerprint is refused by asyncpg.  Prints "ok: ..." for each check,
"FAIL: ..." and exits 1 at the first that fails.
"""

import asyncio
import datetime
import json
import os
import sys

import asyncpg

REQUEST = '{"amount": 100, "currency": "eur"}'
OTHER = '{"amount": 200, "currency": "eur"}'


def check(what, got, want):
    if got != want:
        print(f"FAIL: {what}: got [{got!r}], want [{want!r}]")
        sys.exit(1)
    print(f"ok: {what}")


def is_time(v):
    return isinstance(v, datetime.datetime) and v.tzinfo is not None


async def records(conn, db, version):
    """dedup_begin, dedup_lookup, dedup_complete: the record forms."""
    fp = await conn.fetchval("SELECT dedup_fingerprint($1::jsonb)::text", REQUEST)
    check(f"{db}: a fingerprint's text is 32 hex digits", len(fp) == 32 and int(fp, 16) >= 0, True)

    # 1.0's natural call: the whole row as one value
    r = await conn.fetchval("SELECT dedup_begin($1, $2, $3)", "payments", "pay-1", REQUEST)
    check(f"{db}: fetchval(SELECT dedup_begin(...)) is a row", isinstance(r, asyncpg.Record), True)
    check(f"{db}: dedup_begin started", (r["outcome"], r["status"], r["attempts"]),
          ("started", "processing", 1))
    check(f"{db}: its lease and first_seen_at are times",
          (is_time(r["lease_expires_at"]), is_time(r["first_seen_at"])), (True, True))
    check(f"{db}: no response yet", (r["response_code"], r["response"]), (None, None))
    if version != "1.0":
        check(f"{db}: request_fingerprint is the request's, as text", r["request_fingerprint"], fp)
        check(f"{db}: dedup_begin's row has 8 columns", len(r), 8)
    else:
        check(f"{db}: 1.0's dedup_begin row has 7 columns", len(r), 7)

    # the columns
    r = await conn.fetchrow("SELECT * FROM dedup_begin($1, $2, $3)", "payments", "pay-1", REQUEST)
    check(f"{db}: fetchrow(SELECT * FROM dedup_begin(...)) while leased", r["outcome"], "in_progress")
    if version != "1.0":
        check(f"{db}: ... with the stored request's fingerprint", r["request_fingerprint"], fp)
    r = await conn.fetchrow("SELECT outcome, attempts FROM dedup_begin($1, $2, $3)", "payments",
                            "pay-1", OTHER)
    check(f"{db}: another request under the key", tuple(r), ("mismatch", 1))
    if version != "1.0":
        r = await conn.fetchval("SELECT dedup_begin($1, $2, $3)", "payments", "pay-1", OTHER)
        check(f"{db}: a mismatch names the stored request's fingerprint",
              (r["outcome"], r["request_fingerprint"]), ("mismatch", fp))

    # dedup_lookup: the row, and its columns
    rows = await conn.fetch("SELECT * FROM dedup_lookup($1, $2)", "payments", "pay-1")
    check(f"{db}: fetch(SELECT * FROM dedup_lookup(...)) finds one row", len(rows), 1)
    r = rows[0]
    check(f"{db}: dedup_lookup's columns", (r["kind"], r["status"], r["attempts"], r["response_code"]),
          ("record", "processing", 1, None))
    check(f"{db}: dedup_lookup's request_fingerprint reads as 1.0's text", r["request_fingerprint"], fp)
    check(f"{db}: dedup_lookup's times", (is_time(r["lease_expires_at"]), is_time(r["expires_at"]),
                                         r["completed_at"]), (True, True, None))
    if version != "1.0":
        r = await conn.fetchval("SELECT dedup_lookup($1, $2)", "payments", "pay-1")
        check(f"{db}: fetchval(SELECT dedup_lookup(...)) is a record", isinstance(r, tuple), True)
        check(f"{db}: ... with the columns of the SETOF record",
              (r[0], r[1], r[2], r[9]), ("record", "processing", 1, fp))

    # dedup_complete (void), then the replay and the lookup of the complete record
    check(f"{db}: fetchval(SELECT dedup_complete(...)) is void",
          await conn.fetchval("SELECT dedup_complete($1, $2, $3, $4, $5)", "payments", "pay-1", 201,
                              '{"id": 7}', 1), None)
    r = await conn.fetchval("SELECT dedup_begin($1, $2, $3)", "payments", "pay-1", REQUEST)
    check(f"{db}: the replay", (r["outcome"], r["status"], r["response_code"], json.loads(r["response"]),
                                r["lease_expires_at"]), ("replay", "complete", 201, {"id": 7}, None))
    r = await conn.fetchrow("SELECT * FROM dedup_lookup($1, $2)", "payments", "pay-1")
    check(f"{db}: the complete record looked up",
          (r["status"], r["response_code"], json.loads(r["response"]), is_time(r["completed_at"]),
           r["request_fingerprint"]), ("complete", 201, {"id": 7}, True, fp))
    # a claim has no record: NULL fingerprint
    await conn.fetchval("SELECT dedup_claim($1, $2)", "payments", "claimed")
    r = await conn.fetchrow("SELECT * FROM dedup_lookup($1, $2)", "payments", "claimed")
    check(f"{db}: a claim looked up", (r["kind"], r["status"], r["request_fingerprint"]),
          ("claim", "complete", None))
    check(f"{db}: an absent key: no row",
          await conn.fetchrow("SELECT * FROM dedup_lookup($1, $2)", "payments", "absent"), None)

    # a request of none: begin's fingerprint NULL
    r = await conn.fetchval("SELECT dedup_begin($1, $2)", "payments", "no-request")
    check(f"{db}: a begin with no request", (r["outcome"], r.get("request_fingerprint")), ("started", None))
    # a record begun before the update (asyncpg.sh begins it at 1.0)
    r = await conn.fetchrow("SELECT * FROM dedup_lookup($1, $2)", "payments", "before-update")
    if r is not None:
        check(f"{db}: a record of 1.0 looked up", (r["status"], r["request_fingerprint"]), ("processing", fp))

    if version == "1.0":
        return
    # the 1.1 form (ttl, ignore) and the other kinds of key
    fp_ign = await conn.fetchval("SELECT dedup_fingerprint($1::jsonb, $2)::text",
                                 '{"order": 7, "sent_at": "10:00"}', ["sent_at"])
    r = await conn.fetchval("SELECT dedup_begin($1, $2, $3, $4, $5, $6)", "payments", "pay-2",
                            '{"order": 7, "sent_at": "10:00"}', None, datetime.timedelta(hours=2),
                            ["sent_at"])
    check(f"{db}: the 1.1 form, with ignore", (r["outcome"], r["request_fingerprint"]), ("started", fp_ign))
    for kind, key in (("bytea", b"\x01\x02"), ("uuid", "9b2b9c8e-3c41-4a4b-9d3e-6a3b3f2a1c11"),
                      ("bigint", 42)):
        r = await conn.fetchval(f"SELECT dedup_begin($1, $2::{kind}, $3)", "payments", key, REQUEST)
        check(f"{db}: dedup_begin of a {kind} key", (r["outcome"], r["request_fingerprint"]), ("started", fp))
        r = await conn.fetchval(f"SELECT dedup_lookup($1, $2::{kind})", "payments", key)
        check(f"{db}: dedup_lookup of a {kind} key", (r[0], r[9]), ("record", fp))


async def scopes(conn, db, version):
    r = await conn.fetchval("SELECT dedup_set_scope($1, ttl => $2)", "payments", datetime.timedelta(days=2))
    check(f"{db}: fetchval(SELECT dedup_set_scope(...))", (r[0], r[1], r[5]),
          ("payments", datetime.timedelta(days=2), True))
    r = await conn.fetchval("SELECT dedup_scope($1)", "payments")
    check(f"{db}: fetchval(SELECT dedup_scope(...))", (r[0], r[1]), ("payments", datetime.timedelta(days=2)))
    r = await conn.fetchrow("SELECT * FROM dedup_scope($1)", "payments")
    check(f"{db}: fetchrow(SELECT * FROM dedup_scope(...))", (r["scope"], r["max_attempts"] >= 1),
          ("payments", True))
    if version != "1.0":
        check(f"{db}: dedup_scope's 1.1 columns", (r["sequence_mode"], r["history"]), ("monotonic", None))


async def outbox(conn, db, version):
    for key in ("e-1", "e-2"):
        await conn.fetchval("SELECT dedup_outbox_put($1, $2, $3::jsonb)", "orders", key, '{"n": 1}')
    if version != "1.0":
        r = await conn.fetchval("SELECT dedup_outbox_take_batch($1, 1)", "orders")
        check(f"{db}: fetchval(SELECT dedup_outbox_take_batch(...))",
              (isinstance(r[0], int), r[3], r[7], json.loads(r[5])), (True, "e-1", 1, {"n": 1}))
        check(f"{db}: its ack", await conn.fetchval("SELECT dedup_outbox_ack_batch($1)", r[0]), 1)
        rows = await conn.fetch("SELECT * FROM dedup_outbox_take_batch($1, 10)", "orders")
        check(f"{db}: fetch(SELECT * FROM dedup_outbox_take_batch(...))",
              [(x["aggregateid"], x["seq"] > 0) for x in rows], [("e-2", True)])
        await conn.fetchval("SELECT dedup_set_scope($1, max_attempts => 1)", "orders")
        check(f"{db}: its nack (dead at max_attempts 1)",
              await conn.fetchval("SELECT dedup_outbox_nack_batch($1, error => 'down')", rows[0]["batch_id"]), 1)
        r = await conn.fetchval("SELECT dedup_outbox_dead($1)", "orders")
        check(f"{db}: fetchval(SELECT dedup_outbox_dead(...))", (r[3], r[9]), ("e-2", "down"))
        r = await conn.fetchrow("SELECT * FROM dedup_outbox_dead($1)", "orders")
        check(f"{db}: fetchrow(SELECT * FROM dedup_outbox_dead(...))", (r["attempts"], is_time(r["died_at"])),
              (1, True))
        await conn.fetchval("SELECT dedup_outbox_redrive($1)", "orders")
    # the 1.0 take and ack
    rows = await conn.fetch("SELECT * FROM dedup_outbox_take($1, 1)", "orders")
    want = "e-2" if version != "1.0" else "e-1"
    check(f"{db}: fetch(SELECT * FROM dedup_outbox_take(...))", [x["aggregateid"] for x in rows], [want])
    r = await conn.fetchrow("SELECT * FROM dedup_outbox_stats($1)", "orders")
    check(f"{db}: fetchrow(SELECT * FROM dedup_outbox_stats(...))", (r["topic"], r["in_flight"]), ("orders", 1))
    r = await conn.fetchval("SELECT dedup_outbox_stats($1)", "orders")
    check(f"{db}: fetchval(SELECT dedup_outbox_stats(...))", (r[0], r[2]), ("orders", 1))
    check(f"{db}: the 1.0 ack", await conn.fetchval("SELECT dedup_outbox_ack($1)", [rows[0]["id"]]), 1)
    r = await conn.fetchval("SELECT dedup_outbox_take($1, 1)", "orders")
    if version != "1.0":
        check(f"{db}: fetchval(SELECT dedup_outbox_take(...)) with nothing left", r, None)
    else:
        check(f"{db}: fetchval(SELECT dedup_outbox_take(...))", (r[2], r[6]), ("e-2", 1))


async def streams_and_figures(conn, db, version):
    if version != "1.0":
        check(f"{db}: dedup_advance", await conn.fetchval("SELECT dedup_advance($1, $2, 5)", "feed", "s-1"), True)
        r = await conn.fetchval("SELECT dedup_position($1, $2)", "feed", "s-1")
        check(f"{db}: fetchval(SELECT dedup_position(...))", (r[0], r[1]), (5, None))
        r = await conn.fetchrow("SELECT * FROM dedup_streams($1)", "feed")
        check(f"{db}: fetchrow(SELECT * FROM dedup_streams(...))", (r["stream"], r["mark"]), ("s-1", 5))
        r = await conn.fetchval("SELECT dedup_streams($1)", "feed")
        check(f"{db}: fetchval(SELECT dedup_streams(...))", (r[0], is_time(r[3])), ("s-1", True))
        await conn.fetchval("SELECT dedup_set_scope($1, history => '1 day')", "kept")
        await conn.fetchval("SELECT dedup_claim($1, $2)", "kept", "k-1")
        # (a scope's history has a generation once the cleanup folded one:
        # none yet, so its columns are checked as prepared)
        stmt = await conn.prepare("SELECT dedup_history($1)")
        check(f"{db}: SELECT dedup_history(...) is a record", stmt.get_attributes()[0].type.name, "record")
        check(f"{db}: ... and runs", await stmt.fetchval("kept"), None)
        stmt = await conn.prepare("SELECT * FROM dedup_history($1)")
        check(f"{db}: SELECT * FROM dedup_history(...)'s columns",
              [a.type.name for a in stmt.get_attributes()],
              ["int8", "timestamptz", "timestamptz", "timestamptz", "float8", "int4", "int8", "int8", "int8"])
        r = await conn.fetchval("SELECT dedup_cleanup_batch(0, 100)")
        check(f"{db}: fetchval(SELECT dedup_cleanup_batch(...))", isinstance(r[0], int), True)
        r = await conn.fetchrow("CALL dedup_cleanup()")
        check(f"{db}: fetchrow(CALL dedup_cleanup())", isinstance(r["deleted"], int), True)
    r = await conn.fetchval("SELECT dedup_cleanup_stats() LIMIT 1")
    check(f"{db}: fetchval(SELECT dedup_cleanup_stats())", isinstance(r[1], str), True)
    r = await conn.fetchrow("SELECT * FROM dedup_cleanup_stats() LIMIT 1")
    check(f"{db}: fetchrow(SELECT * FROM dedup_cleanup_stats())", isinstance(r["rows_deleted"], int), True)
    if version != "1.0":
        r = await conn.fetchval("SELECT dedup_scope_stats() LIMIT 1")
        check(f"{db}: fetchval(SELECT dedup_scope_stats())", isinstance(r[2], int), True)
        keys = await conn.fetch("SELECT * FROM dedup_claim_batch($1, $2::text[])", "payments", ["b-1", "b-2"])
        check(f"{db}: dedup_claim_batch's new keys", sorted(k[0] for k in keys), ["b-1", "b-2"])
        # a set of dedup_fingerprint, not in a row: asyncpg reads it as text
        fp = await conn.fetchval("SELECT dedup_fingerprint('b-3'::text)::text")
        keys = await conn.fetch("SELECT * FROM dedup_claim_batch($1, ARRAY[dedup_fingerprint('b-3'::text)])",
                                "payments")
        check(f"{db}: dedup_claim_batch's new fingerprints, as their text", [k[0] for k in keys], [fp])


async def built_in_only(conn, db, version):
    """Every row a public function returns: its columns are of built-in types."""
    odd = await conn.fetchval("""
        WITH f AS (
            SELECT p.oid, p.prorettype, p.proallargtypes, p.proargmodes
            FROM pg_proc AS p
            JOIN pg_depend AS d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'
            JOIN pg_extension AS e ON e.oid = d.refobjid AND e.extname = 'dedup'
            WHERE p.pronamespace <> 'dedup'::regnamespace)
        SELECT coalesce(string_agg(DISTINCT x, ', '), '') FROM (
            SELECT f.oid::regprocedure || ' column ' || format_type(u.t, NULL) AS x
            FROM f, unnest(f.proallargtypes, f.proargmodes) AS u(t, m)
            WHERE u.m IN ('o', 'b', 't') AND u.t >= 16384
            UNION ALL
            SELECT f.oid::regprocedure || ' column ' || a.attname || ' ' || format_type(a.atttypid, NULL)
            FROM f JOIN pg_type AS t ON t.oid = f.prorettype AND t.typtype = 'c'
            JOIN pg_attribute AS a ON a.attrelid = t.typrelid AND a.attnum > 0 AND NOT a.attisdropped
            WHERE a.atttypid >= 16384) AS o""")
    if version == "1.0":
        # 1.0's install script is frozen: its dedup_lookup has a dedup_fingerprint
        check(f"{db}: 1.0's rows: dedup_lookup's request_fingerprint only", odd,
              "dedup_lookup(text,text) column dedup_fingerprint")
    else:
        check(f"{db}: every row a public function returns holds built-in types only", odd, "")


async def control(conn, db):
    """The check can fail: a composite holding a dedup_fingerprint."""
    await conn.execute("CREATE TYPE pg_temp.with_fp AS (outcome text, fp dedup_fingerprint)")
    try:
        await conn.fetchval("SELECT ROW('x', dedup_fingerprint('a'::text))::pg_temp.with_fp")
    except asyncpg.exceptions.UnsupportedClientFeatureError as e:
        check(f"{db}: control: asyncpg refuses a composite holding a dedup_fingerprint",
              "composite" in str(e), True)
        return
    check(f"{db}: control: asyncpg refuses a composite holding a dedup_fingerprint", "read it", "refused")


async def main():
    host, port = os.environ["PGHOST"], int(os.environ["PGPORT"])
    for arg in sys.argv[1:]:
        db, version = arg.split(":")
        conn = await asyncpg.connect(host=host, port=port, user="postgres", database=db)
        try:
            await control(conn, db)
            await built_in_only(conn, db, version)
            await scopes(conn, db, version)
            await records(conn, db, version)
            await outbox(conn, db, version)
            await streams_and_figures(conn, db, version)
        finally:
            await conn.close()


asyncio.run(main())
