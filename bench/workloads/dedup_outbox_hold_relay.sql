-- the relay of the held-horizon run: take what is there (a batch of up to
-- 100) and ack it; the latency of take + ack is the figure
SELECT coalesce(max(batch_id), 0) AS batch, count(*) AS n FROM dedup_outbox_take_batch('bench-hold', 100) \gset
\if :n > 0
SELECT dedup_outbox_ack_batch(:batch);
\endif
