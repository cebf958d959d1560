-- Sequence marks: every outcome of dedup_advance, dedup_advance_batch,
-- dedup_new_epoch, dedup_position and dedup_streams, and every error with
-- its SQLSTATE and nothing changed.
\pset null '(null)'
CREATE FUNCTION pg_temp.state() RETURNS text LANGUAGE sql AS $$
  SELECT md5(coalesce(string_agg(s::text, ',' ORDER BY s::text), '')) FROM dedup.streams AS s
$$;
CREATE FUNCTION pg_temp.updates() RETURNS bigint LANGUAGE sql AS $$
  SELECT pg_stat_get_xact_tuples_updated('dedup.streams'::regclass)
$$;
CREATE FUNCTION pg_temp.hot_updates() RETURNS bigint LANGUAGE sql AS $$
  SELECT pg_stat_get_xact_tuples_hot_updated('dedup.streams'::regclass)
$$;

-- monotonic (the default): beyond the mark moves it; at or below is a duplicate
SELECT dedup_advance('orders', 'p-0', 5) AS first,
       dedup_advance('orders', 'p-0', 5) AS same,
       dedup_advance('orders', 'p-0', 3) AS below,
       dedup_advance('orders', 'p-0', 9) AS gap_allowed;
SELECT mark, epoch, expires_at > now() + interval '6 days' AS kept_for_retention
FROM dedup_position('orders', 'p-0');
-- a position of a stream never advanced: no row
SELECT count(*) AS unknown FROM dedup_position('orders', 'p-never');
-- a stream may start anywhere, 0 included
SELECT dedup_advance('orders', 'p-1', 0) AS zero_start, dedup_advance('orders', 'p-1', 0) AS zero_again;

-- a duplicate writes nothing (no update, no transaction id); a move is one
-- HOT update (the counters are this backend's, not yet reported: differences)
BEGIN;
SELECT pg_temp.updates() AS u0, pg_temp.hot_updates() AS h0 \gset
SELECT dedup_advance('orders', 'p-0', 7) AS dup;
SELECT pg_temp.updates() - :u0 AS updates_by_duplicate,
       pg_current_xact_id_if_assigned() IS NULL AS no_transaction_id;
SELECT dedup_advance('orders', 'p-0', 10) AS moved;
SELECT pg_temp.updates() - :u0 AS updates_by_move, pg_temp.hot_updates() - :h0 AS hot;
COMMIT;

-- it rolls back with the transaction
BEGIN;
SELECT dedup_advance('orders', 'p-0', 20);
ROLLBACK;
SELECT mark FROM dedup_position('orders', 'p-0');
-- and with a savepoint
BEGIN;
SAVEPOINT a;
SELECT dedup_advance('orders', 'p-0', 21);
ROLLBACK TO a;
SELECT dedup_advance('orders', 'p-0', 11) AS after_savepoint;
COMMIT;
SELECT mark FROM dedup_position('orders', 'p-0');

-- strict: only mark + 1; a gap is refused, naming the sequence expected
SELECT sequence_mode FROM dedup_set_scope('ledger', sequence_mode => 'strict');
SELECT dedup_advance('ledger', 'acct-1', 1) AS first, dedup_advance('ledger', 'acct-1', 2) AS next,
       dedup_advance('ledger', 'acct-1', 2) AS dup, dedup_advance('ledger', 'acct-1', 1) AS old;
CREATE TEMP TABLE before AS SELECT pg_temp.state() AS state;
\set VERBOSITY default
SELECT dedup_advance('ledger', 'acct-1', 4);
SELECT pg_temp.state() = (SELECT state FROM before) AS nothing_changed;
SELECT dedup_advance('ledger', 'acct-1', 3) AS in_order;
-- back to monotonic
SELECT sequence_mode FROM dedup_set_scope('ledger', sequence_mode => 'monotonic');
SELECT dedup_advance('ledger', 'acct-1', 10) AS gap_now_allowed;

-- epochs: a producer takes a new epoch; the older one is fenced, and so is a
-- call with none; a newer epoch starts afresh
SELECT dedup_new_epoch('events', 'producer-7') AS epoch;
SELECT mark, epoch FROM dedup_position('events', 'producer-7');
SELECT dedup_advance('events', 'producer-7', 100, epoch => 1) AS e1_first,
       dedup_advance('events', 'producer-7', 101, epoch => 1) AS e1_next,
       dedup_advance('events', 'producer-7', 100, epoch => 1) AS e1_dup;
SELECT dedup_new_epoch('events', 'producer-7') AS restarted;
DROP TABLE before;
CREATE TEMP TABLE before AS SELECT pg_temp.state() AS state;
SELECT dedup_advance('events', 'producer-7', 102, epoch => 1);
SELECT dedup_advance('events', 'producer-7', 102);
SELECT pg_temp.state() = (SELECT state FROM before) AS nothing_changed;
SELECT dedup_advance('events', 'producer-7', 0, epoch => 2) AS e2_starts_afresh,
       dedup_advance('events', 'producer-7', 0, epoch => 2) AS e2_dup;
-- a newer epoch given by the caller also takes the stream over
SELECT dedup_advance('events', 'producer-7', 5, epoch => 9) AS e9;
SELECT mark, epoch FROM dedup_position('events', 'producer-7');
-- an expired stream's epoch still counts for the next one
UPDATE dedup.streams SET expires_at = now() - interval '1 second' WHERE stream = 'producer-7';
SELECT dedup_new_epoch('events', 'producer-7') AS after_expiry;
SELECT dedup_advance('events', 'producer-7', 6, epoch => 10) AS e10_takes_over;
-- a stream without an epoch takes the first one given
SELECT dedup_advance('events', 'consumer-1', 1), dedup_advance('events', 'consumer-1', 2, epoch => 3);
SELECT mark, epoch FROM dedup_position('events', 'consumer-1');
-- the largest epoch a producer can use is 2^63 - 2: a stream there has no
-- newer one to give (22003, nothing written), never one that wraps to a
-- negative epoch and makes every fenced producer newer again
SELECT dedup_advance('events', 'producer-max', 1, epoch => 9223372036854775806) AS at_largest;
DROP TABLE before;
CREATE TEMP TABLE before AS SELECT pg_temp.state() AS state;
SELECT regress_try($$SELECT dedup_new_epoch('events', 'producer-max')$$) AS no_newer_epoch;
SELECT pg_temp.state() = (SELECT state FROM before) AS nothing_changed;
SELECT regress_try($$SELECT dedup_advance('events', 'producer-max', 2, epoch => 9223372036854775805)$$)
  AS older_still_fenced;
SELECT mark, epoch FROM dedup_position('events', 'producer-max');

-- batches: the streams that moved, in the order given
SELECT * FROM dedup_advance_batch('orders', ARRAY['p-2', 'p-0', 'p-3'], ARRAY[1, 11, 1]::bigint[]);
SELECT * FROM dedup_advance_batch('orders', ARRAY['p-3', 'p-2', 'p-0'], ARRAY[2, 1, 12]::bigint[]);
SELECT * FROM dedup_advance_batch('events', ARRAY['producer-7', 'new-one'], ARRAY[7, 1]::bigint[],
                                  epochs => ARRAY[10, NULL]::bigint[]);
SELECT * FROM dedup_advance_batch('orders', ARRAY[]::text[], ARRAY[]::bigint[]);

-- a scope's streams, the others' not
SELECT stream, mark, epoch FROM dedup_streams('orders') ORDER BY stream;
SELECT count(*) AS events_streams FROM dedup_streams('events');
SELECT count(*) AS none FROM dedup_streams('no-such-scope');

-- an expired stream counts as absent (decided at the call, not by the cleanup)
UPDATE dedup.streams SET expires_at = now() - interval '1 second'
WHERE stream = 'p-1';
SELECT count(*) AS gone FROM dedup_position('orders', 'p-1');
SELECT dedup_advance('orders', 'p-1', 0) AS afresh_after_expiry;
SELECT count(*) AS streams_rows FROM dedup.streams WHERE scope = 'orders';
UPDATE dedup.streams SET expires_at = now() - interval '1 second' WHERE stream = 'p-3';
SELECT kind, deleted FROM (SELECT 'stream' AS kind, deleted FROM dedup_cleanup_batch(2::bigint << 32)) AS c;
SELECT count(*) AS streams_rows_after_cleanup FROM dedup.streams WHERE scope = 'orders';

-- bad input: the SQLSTATE, and nothing changed (a batch refused part way
-- through keeps none of its advances)
SELECT sequence_mode FROM dedup_set_scope('strict2', sequence_mode => 'strict');
SELECT dedup_advance('strict2', 'x', 1);
DROP TABLE before;
CREATE TEMP TABLE before AS SELECT pg_temp.state() AS state;
CREATE TEMP TABLE cases (n serial, stmt text);
INSERT INTO cases (stmt) VALUES
  ($$SELECT dedup_advance(NULL, 's', 1)$$),
  ($$SELECT dedup_advance('', 's', 1)$$),
  ($$SELECT dedup_advance('orders', NULL, 1)$$),
  ($$SELECT dedup_advance('orders', '', 1)$$),
  ($$SELECT dedup_advance('orders', repeat('s', 201), 1)$$),
  ($$SELECT dedup_advance('orders', 'p-0', NULL)$$),
  ($$SELECT dedup_advance('orders', 'p-0', -1)$$),
  ($$SELECT dedup_advance('orders', 'p-0', 99, epoch => -1)$$),
  ($$SELECT dedup_advance('orders', 'p-0', 99, epoch => 9223372036854775807)$$),
  ($$SELECT dedup_advance('orders', 'p-0', 99, nowait => NULL)$$),
  ($$SELECT * FROM dedup_advance_batch('orders', NULL, ARRAY[1]::bigint[])$$),
  ($$SELECT * FROM dedup_advance_batch('orders', ARRAY['a'], NULL)$$),
  ($$SELECT * FROM dedup_advance_batch('orders', ARRAY['a', 'b'], ARRAY[1]::bigint[])$$),
  ($$SELECT * FROM dedup_advance_batch('orders', ARRAY['a'], ARRAY[1]::bigint[], ARRAY[1, 2]::bigint[])$$),
  ($$SELECT * FROM dedup_advance_batch('orders', ARRAY['a', NULL], ARRAY[1, 2]::bigint[])$$),
  ($$SELECT * FROM dedup_advance_batch('orders', ARRAY['a', 'b'], ARRAY[1, NULL]::bigint[])$$),
  ($$SELECT * FROM dedup_advance_batch('orders', ARRAY['a', ''], ARRAY[1, 2]::bigint[])$$),
  ($$SELECT * FROM dedup_advance_batch('orders', ARRAY['a', 'b'], ARRAY[1, -2]::bigint[])$$),
  ($$SELECT * FROM dedup_advance_batch('orders', ARRAY['a', 'a'], ARRAY[1, 2]::bigint[])$$),
  ($$SELECT * FROM dedup_advance_batch('orders', ARRAY[['a'], ['b']], ARRAY[1, 2]::bigint[])$$),
  ($$SELECT count(*) FROM dedup_advance_batch('orders', ARRAY(SELECT 's-' || g FROM generate_series(1, 100001) g),
                                             ARRAY(SELECT g::bigint FROM generate_series(1, 100001) g))$$),
  ($$SELECT * FROM dedup_advance_batch('strict2', ARRAY['a', 'x'], ARRAY[1, 5]::bigint[])$$),
  ($$SELECT dedup_new_epoch(NULL, 's')$$),
  ($$SELECT dedup_new_epoch('orders', NULL)$$),
  ($$SELECT * FROM dedup_position('orders', NULL)$$),
  ($$SELECT * FROM dedup_streams(NULL)$$),
  ($$SELECT * FROM dedup_set_scope('orders', sequence_mode => 'sloppy')$$),
  ($$SET TRANSACTION READ ONLY; SELECT dedup_advance('orders', 'p-0', 99)$$),
  ($$SET TRANSACTION READ ONLY; SELECT dedup_new_epoch('orders', 'p-0')$$);
SELECT n, stmt, regress_try(stmt) AS result FROM cases ORDER BY n;
SELECT pg_temp.state() = (SELECT state FROM before) AS nothing_changed;

-- leave nothing behind for the tests after this one
SELECT dedup_reset_scope('ledger') AND dedup_reset_scope('strict2') AS reset;
TRUNCATE dedup.streams;
