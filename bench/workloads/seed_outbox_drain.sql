-- seed poller: read 100 unpublished events and mark them published, in one statement
WITH batch AS (
    SELECT id FROM seed_outbox WHERE NOT published ORDER BY id LIMIT 100 FOR UPDATE SKIP LOCKED
)
UPDATE seed_outbox AS o SET published = true FROM batch WHERE o.id = batch.id
RETURNING o.id, o.aggregatetype, o.aggregateid, o.type, o.payload;
