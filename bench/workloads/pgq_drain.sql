-- PgQ consumer: next batch, its events, finish it
SELECT pgq.next_batch('bench', 'relay') AS batch_id \gset
SELECT count(*) FROM pgq.get_batch_events(:batch_id);
SELECT pgq.finish_batch(:batch_id);
