# The outbox read the way a CDC pipeline reads it.  On a server with
# wal_level = logical, a wal2json slot (format 2, as Debezium's PostgreSQL
# connector with wal2json does) decodes dedup.outbox: one insert per event
# that committed (none for a rolled-back put, none for a repeated key), with
# Debezium's Outbox Event Router columns id (uuid), aggregatetype,
# aggregateid, type and payload (jsonb) carrying what was put.  A pgoutput
# slot on a publication of dedup.outbox (Debezium's default plugin) decodes
# the same one insert, with those columns.  The relay's take and ack write
# nothing to the log; the cleanup's trim of a published event past its
# topic's retention decodes as one delete, keyed by the id.
#
# Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.
use strict;
use warnings;
use DedupNode;
use PostgreSQL::Test::Utils;
use Test::More;

# some builds allow only listed output plugins; list wal2json where that is so
my @plugins;
my ($settings) = run_command([ 'postgres', '--describe-config' ]);
push @plugins, "output_plugin_libraries = 'pgoutput, test_decoding, wal2json'"
  if $settings =~ /^output_plugin_libraries/m;
my $node = DedupNode->create('cdc',
	conf => [ 'wal_level = logical', 'max_replication_slots = 4', 'max_wal_senders = 4', @plugins ]);
sub sql { return $node->safe_psql('postgres', $_[0]); }

sql(q{
CREATE EXTENSION dedup;
CREATE TABLE orders (id int PRIMARY KEY, amount int);
SELECT pg_create_logical_replication_slot('cdc', 'wal2json');
CREATE PUBLICATION outbox_pub FOR TABLE dedup.outbox;
SELECT pg_create_logical_replication_slot('cdc_pgoutput', 'pgoutput');
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
                        aggregate_id => '42', type => 'OrderCreated', aggregate_type => 'Order');});

sql(q{
CREATE TABLE changes AS
SELECT data::jsonb AS change
FROM pg_logical_slot_get_changes('cdc', NULL, NULL, 'format-version', '2',
                                 'add-tables', 'dedup.outbox', 'include-types', 'true');
CREATE TABLE inserts AS
SELECT (SELECT jsonb_object_agg(c->>'name', jsonb_build_object('type', c->>'type', 'value', c->'value'))
        FROM jsonb_array_elements(change->'columns') AS c) AS cols
FROM changes WHERE change->>'action' = 'I';});

is(sql('SELECT count(*) FROM inserts'), '1', 'one insert decoded for the one committed event');
is(sql(q{SELECT cols->'id'->>'type' || ' ' || (cols->'id'->>'value' = (SELECT id::text FROM dedup.outbox)) FROM inserts}),
	'uuid true', 'id: a uuid, the one put returned');
is( sql(q{SELECT concat_ws(' ', cols->'aggregatetype'->>'value', cols->'aggregateid'->>'value', cols->'type'->>'value') FROM inserts}),
	'Order 42 OrderCreated', 'aggregatetype, aggregateid, type');
is( sql(q{SELECT cols->'payload'->>'type' || ' ' || ((cols->'payload'->>'value')::jsonb = '{"order_id": 42, "amount": 990}') FROM inserts}),
	'jsonb true', 'payload: jsonb, the value put');
is( sql(q{SELECT count(*) FROM changes WHERE change->>'action' = 'B'}),
	sql(q{SELECT count(*) FROM changes WHERE change->>'action' = 'C'}),
	'the business row and the event in one transaction');

# pgoutput: one Insert message ('I') of dedup.outbox, after a Relation
# message ('R') that names Debezium's columns
is( sql(q{SELECT count(*) FILTER (WHERE substr(data, 1, 1) = 'I') || ' '
                 || bool_or(substr(data, 1, 1) = 'R' AND position('aggregatetype'::bytea IN data) > 0
                            AND position('aggregateid'::bytea IN data) > 0 AND position('payload'::bytea IN data) > 0)
          FROM pg_logical_slot_get_binary_changes('cdc_pgoutput', NULL, NULL, 'proto_version', '1',
                                                  'publication_names', 'outbox_pub')}),
	'1 true', "pgoutput: one insert, and the relation's columns");

# the relay's take and ack write nothing to the log; once the topic's
# retention passed, the cleanup deletes the published event, keyed by its
# id; Debezium's Outbox Event Router skips deletes (it reads inserts)
sql(q{SELECT dedup_outbox_ack(ARRAY(SELECT id FROM dedup_outbox_take('orders', 10)))});
my $changes_of_log = q{
SELECT coalesce(string_agg(data::jsonb->>'action', '' ORDER BY lsn), '')
  FROM pg_logical_slot_get_changes('cdc', NULL, NULL, 'format-version', '2',
                                   'add-tables', 'dedup.outbox', 'actions', 'insert,update,delete')
 WHERE data::jsonb->>'action' IN ('I', 'U', 'D')};
is(sql($changes_of_log), '', 'take and ack decode as nothing of dedup.outbox');
sql(q{SELECT dedup_set_scope('orders', retention => '1 second'); SELECT pg_sleep(1.1);});
sql('CALL dedup_cleanup()');
is(sql($changes_of_log), 'D', "the cleanup's trim decodes as one delete of dedup.outbox");
sql(q{SELECT dedup_outbox_put('orders', 'order-44', '{}') IS NOT NULL});
sql(q{SELECT dedup_outbox_ack(ARRAY(SELECT id FROM dedup_outbox_take('orders', 10)))});
sql('SELECT pg_sleep(1.1)');
sql('CALL dedup_cleanup()');
is( sql(q{SELECT string_agg(k->>'name', ',' ORDER BY k->>'name')
            FROM pg_logical_slot_get_changes('cdc', NULL, NULL, 'format-version', '2',
                                             'add-tables', 'dedup.outbox', 'actions', 'delete') AS c,
                 jsonb_array_elements(c.data::jsonb->'identity') AS k
           WHERE c.data::jsonb->>'action' = 'D'}),
	'id', "the delete's old key is the replica identity, the id");
sql(q{SELECT pg_drop_replication_slot('cdc_pgoutput'); SELECT pg_drop_replication_slot('cdc');});

done_testing();
