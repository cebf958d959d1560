-- a producer for the held-horizon run: one event a transaction, over 1,000 aggregates
\set i random(1, 1000000000)
SELECT dedup_outbox_put('bench-hold', 'e-' || :i, '{"order": 1}', aggregate_id => 'agg-' || (:i % 1000));
