-- dedup relay: take a batch of 100 events under one lease, then ack the batch
-- (two transactions, as a relay that publishes in between does)
SELECT coalesce(max(batch_id), 0) AS batch, count(*) AS n FROM dedup_outbox_take_batch('bench-drain', 100) \gset
\if :n > 0
SELECT dedup_outbox_ack_batch(:batch);
\endif
