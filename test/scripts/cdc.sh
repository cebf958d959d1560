#!/usr/bin/env bash
# Scripted test: the outbox read the way a CDC pipeline reads it.  On a
# server with wal_level = logical, a wal2json slot (format 2, as Debezium's
# PostgreSQL connector with wal2json does) decodes dedup.outbox: one insert
# per event that committed (none for a rolled-back put, none for a repeated
# key), with Debezium's Outbox Event Router columns id (uuid),
# aggregatetype, aggregateid, type and payload (jsonb) carrying what was put.
#
# Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.
set -euo pipefail
. "$(dirname "$0")/../../scripts/lib.sh"

# some builds allow only listed output plugins; list wal2json where that is so
plugins=()
settings=$("$PG_BINDIR/postgres" --describe-config 2>/dev/null || true)
if grep -q '^output_plugin_libraries' <<<"$settings"; then
	plugins=("output_plugin_libraries = 'pgoutput, test_decoding, wal2json'")
fi
test_server cdc 90 "wal_level = logical" "max_replication_slots = 4" "max_wal_senders = 4" "${plugins[@]}"

q <<'SQL' >/dev/null
CREATE EXTENSION dedup;
CREATE TABLE orders (id int PRIMARY KEY, amount int);
SELECT pg_create_logical_replication_slot('cdc', 'wal2json');
BEGIN;
INSERT INTO orders VALUES (42, 990);
SELECT dedup_outbox_put('orders', 'order-42-created', '{"order_id": 42, "amount": 990}',
                        aggregate_id => '42', type => 'OrderCreated', aggregate_type => 'Order');
-- a retried put in the same transaction: no second event
SELECT dedup_outbox_put('orders', 'order-42-created', '{"order_id": 42, "amount": 990}',
                        aggregate_id => '42', type => 'OrderCreated', aggregate_type => 'Order');
COMMIT;
BEGIN;
INSERT INTO orders VALUES (43, 10);
SELECT dedup_outbox_put('orders', 'order-43-created', '{"order_id": 43}', aggregate_id => '43');
ROLLBACK;
-- a retried producer transaction after commit: no second event either
SELECT dedup_outbox_put('orders', 'order-42-created', '{"order_id": 42, "amount": 990}',
                        aggregate_id => '42', type => 'OrderCreated', aggregate_type => 'Order');
SQL

q <<'SQL' >/dev/null
CREATE TABLE changes AS
SELECT data::jsonb AS change
FROM pg_logical_slot_get_changes('cdc', NULL, NULL, 'format-version', '2',
                                 'add-tables', 'dedup.outbox', 'include-types', 'true');
CREATE TABLE inserts AS
SELECT (SELECT jsonb_object_agg(c->>'name', jsonb_build_object('type', c->>'type', 'value', c->'value'))
        FROM jsonb_array_elements(change->'columns') AS c) AS cols
FROM changes WHERE change->>'action' = 'I';
SQL

check "one insert decoded for the one committed event" "$(q -c "SELECT count(*) FROM inserts")" 1
check "id: a uuid, the one put returned" \
	"$(q -c "SELECT cols->'id'->>'type' || ' ' || (cols->'id'->>'value' = (SELECT id::text FROM dedup.outbox)) FROM inserts")" "uuid true"
check "aggregatetype, aggregateid, type" \
	"$(q -c "SELECT concat_ws(' ', cols->'aggregatetype'->>'value', cols->'aggregateid'->>'value', cols->'type'->>'value') FROM inserts")" \
	"Order 42 OrderCreated"
check "payload: jsonb, the value put" \
	"$(q -c "SELECT cols->'payload'->>'type' || ' ' || ((cols->'payload'->>'value')::jsonb = '{\"order_id\": 42, \"amount\": 990}') FROM inserts")" "jsonb true"
check "the business row and the event in one transaction" \
	"$(q -c "SELECT count(*) FROM changes WHERE change->>'action' = 'B'")" \
	"$(q -c "SELECT count(*) FROM changes WHERE change->>'action' = 'C'")"

# the relay's take updates the row and its ack deletes it; Debezium's Outbox
# Event Router skips both (it reads inserts)
q -c "SELECT dedup_outbox_ack(ARRAY(SELECT id FROM dedup_outbox_take('orders', 10)))" >/dev/null
check "ack decodes as one delete of dedup.outbox, and nothing else of it" \
	"$(q -c "SELECT string_agg(data::jsonb->>'action', '' ORDER BY lsn)
	         FROM pg_logical_slot_get_changes('cdc', NULL, NULL, 'format-version', '2',
	                                          'add-tables', 'dedup.outbox', 'actions', 'insert,update,delete')
	         WHERE data::jsonb->>'action' IN ('I', 'U', 'D')")" "UD"
q -c "SELECT pg_drop_replication_slot('cdc')" >/dev/null
echo "cdc: all checks passed"
