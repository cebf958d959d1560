-- dedup: claim of an existing key
\set r random(1, :dupkeys)
SELECT dedup_claim('bench-dup', 'dup-' || :r);
