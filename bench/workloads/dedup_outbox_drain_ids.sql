-- dedup relay on the 1.0 API: take 100 events, then ack them by their ids
SELECT coalesce(array_agg(id), '{}') AS ids FROM dedup_outbox_take('bench-drain', 100) \gset
SELECT dedup_outbox_ack(:ids);
