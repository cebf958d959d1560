-- dedup relay on a hot topic: take a batch of 100 events (several of one
-- aggregate), then ack it (two transactions, as a relay that publishes in
-- between does)
SELECT coalesce(max(batch_id), 0) AS batch, count(*) AS n FROM dedup_outbox_take_batch('bench-hot', 100) \gset
\if :n > 0
SELECT dedup_outbox_ack_batch(:batch);
\endif
