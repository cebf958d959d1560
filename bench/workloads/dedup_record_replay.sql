-- dedup: a retried request gets replay and the stored response
\set r random(1, :dupkeys)
SELECT outcome, response_code, response FROM dedup_begin('bench-replay', 'dup-' || :r);
