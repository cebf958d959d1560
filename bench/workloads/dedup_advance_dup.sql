-- dedup: a duplicate advance (a sequence below the stream's mark), alone
\set p random(0, 99)
SELECT dedup_advance('bench-seq', 'p-' || :p, 1);
