-- a PgQ producer for the held-horizon run: one event a transaction
SELECT pgq.insert_event('bench-hold', 'OrderCreated', '{"order": 1}');
