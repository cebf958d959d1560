-- dedup: dedup_begin, then dedup_complete (two transactions)
\set r random(1, 9223372036854775806)
SELECT outcome, attempts FROM dedup_begin('bench-records', 'req-' || :r);
SELECT dedup_complete('bench-records', 'req-' || :r, 201, '{"id": 1, "status": "succeeded"}', attempt => 1);
