-------------------------------------------------------------------------
-- Transactional outbox: the put
-- The put is C (src/outbox_put.c).  The relay: outbox_take.sql (the take and
-- the helpers it shares with the settle), outbox_settle.sql (ack, nack),
-- outbox_admin.sql (redrive, figures, trim), outbox_relay.sql (the public
-- functions).
-------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION @extschema@.dedup_outbox_put(topic text, key text, payload jsonb,
    aggregate_id text DEFAULT NULL, type text DEFAULT NULL,
    headers jsonb DEFAULT NULL, aggregate_type text DEFAULT NULL)
RETURNS uuid
AS 'MODULE_PATHNAME' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.dedup_outbox_put(text, text, jsonb, text, text, jsonb, text) IS
    'enqueue an event in the current transaction; the same (topic, key) within the topic''s retention yields one event; returns its id';
