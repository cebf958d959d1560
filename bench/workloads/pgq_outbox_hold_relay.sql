-- the PgQ consumer of the held-horizon run: a tick of what is there, then
-- the next batch, its events, and finish it (next_batch and finish_batch
-- each update the consumer's row of pgq.subscription)
SELECT pgq.ticker('bench-hold');
SELECT b AS batch, b IS NOT NULL AS has FROM pgq.next_batch('bench-hold', 'relay') AS b \gset
\if :has
SELECT count(*) FROM pgq.get_batch_events(:batch);
SELECT pgq.finish_batch(:batch);
\endif
