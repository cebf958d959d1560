-- dedup relay: take 100 events with a lease, then ack them (two transactions, as a relay
-- that publishes in between does)
SELECT coalesce(array_agg(id), '{}') AS ids FROM dedup_outbox_take('bench-drain', 100) \gset
SELECT dedup_outbox_ack(:ids);
