# dedup on a hot standby, and after its promotion.  A primary (cleanup off)
# holds 1000 live claims and 2000 that expire within 2 seconds; a streaming
# standby made from its base backup has cleanup on.  Checks, polling (never
# sleeping blindly for a result):
#   - the standby replays the claims; no cleanup launcher runs there, and the
#     expired claims stay (a standby never cleans);
#   - on the standby, dedup_claim() and dedup_cleanup_batch() fail with
#     SQLSTATE 25006, and reads work;
#   - after the primary is stopped and the standby promoted, the postmaster
#     starts the launcher; its worker deletes exactly the expired claims, the
#     figures say 2000, and dedup_claim() writes again.
#
# Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.
use strict;
use warnings;
use DedupNode;
use Test::More;
use Time::HiRes qw(sleep);

my $primary = DedupNode->create(
	'primary',
	streaming => 1,
	conf => [
		"wal_keep_size = '64MB'", 'hot_standby = on',
		"dedup.cleanup_databases = 'app'", 'dedup.cleanup_interval = 1',
		'dedup.cleanup_enabled = off'
	]);
my $launchers = q{SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'dedup cleanup launcher'};

# 1. the primary: 1000 live claims, 2000 expiring within 2 seconds, and the
# list of the live ones
$primary->safe_psql('postgres', 'CREATE DATABASE app');
$primary->safe_psql('app', q{
CREATE EXTENSION dedup;
SELECT count(*) FROM dedup_claim_batch('long', ARRAY(SELECT 'live-' || i FROM generate_series(1, 1000) i), ttl => '1 hour');
SELECT count(*) FROM dedup_claim_batch('short', ARRAY(SELECT 'gone-' || i FROM generate_series(1, 2000) i), ttl => '2 seconds');
CREATE TABLE live AS SELECT key FROM dedup.claims WHERE expires_at > now() + interval '10 minutes';});
# and in a second database: scope settings, records and outbox events
$primary->safe_psql('postgres', 'CREATE DATABASE app2');
$primary->safe_psql('app2', q{
CREATE EXTENSION dedup;
SELECT dedup_set_scope('orders', ttl => '2 hours');
SELECT outcome FROM dedup_begin('charges', 'c-1', lease => '1 hour');
SELECT outcome FROM dedup_begin('charges', 'c-2');
SELECT dedup_complete('charges', 'c-2', 201, '{"ok": true}');
SELECT dedup_outbox_put('events', 'e-' || g, '{}') FROM generate_series(1, 2) AS g;
SELECT dedup_advance('log', 'p-0', 41);});
is($primary->safe_psql('app', q{SELECT count(*) || ' ' || (SELECT count(*) FROM live) FROM dedup.claims}),
	'3000 1000', 'primary holds 3000 claims, 1000 of them live');
# the launcher runs on a primary even with cleanup off (idle): the standby
# below must not have one
ok($primary->poll_within(30, 'app', $launchers, '1'),
	'the primary runs the cleanup launcher (idle: cleanup is off)');

# 2. the standby: a base backup with the WAL it needs, streaming from the
# primary, and cleanup on (later lines of postgresql.conf win over the
# copied primary's)
$primary->backup('base');
my $standby = DedupNode->new('standby');
$standby->init_from_backup($primary, 'base', has_streaming => 1);
$standby->append_conf('postgresql.conf', 'dedup.cleanup_enabled = on');
$standby->start;
is($standby->safe_psql('app', 'SELECT pg_is_in_recovery()'), 't', 'standby is in recovery');
is($standby->safe_psql('app', 'SHOW dedup.cleanup_enabled'), 'on', 'standby has cleanup on');
is($primary->safe_psql('app', q{SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'}),
	'1', 'primary streams to the standby');

# 3. on the standby: the claims are there, no launcher, nothing cleaned
ok($standby->poll_within(30, 'app', 'SELECT count(*) FROM dedup.claims', '3000'),
	'standby replayed the 3000 claims');
ok($standby->poll_within(30, 'app', 'SELECT count(*) FROM dedup.claims WHERE expires_at < now()', '2000'),
	'the 2000 short claims have expired on the standby');
sleep 2.5;    # two cleanup intervals and more: nothing may be cleaned
is($standby->safe_psql('app', $launchers), '0', 'no cleanup launcher on the standby');
is($standby->safe_psql('app', q{SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'dedup cleanup worker'}),
	'0', 'no cleanup worker on the standby');
is($standby->safe_psql('app', 'SELECT count(*) FROM dedup.claims'), '3000', 'the standby cleaned nothing');
is($standby->safe_psql('app', 'SELECT coalesce(sum(rows_deleted + batches), 0) FROM dedup_cleanup_stats()'),
	'0', "the standby's figures show no pass");
is($standby->safe_psql('app', 'SELECT pg_is_in_recovery()'), 't', 'standby still in recovery');

is($standby->sqlstate('app', q{SELECT dedup_claim('s', 'k', ttl => '1 hour')}),
	'ERROR:  25006', 'dedup_claim of a new key fails with 25006 on the standby');
is($standby->sqlstate('app', q{SELECT dedup_claim('long', 'live-1', ttl => '1 hour')}),
	'ERROR:  25006', 'dedup_claim of a live key fails with 25006 on the standby');
is($standby->sqlstate('app', q{SELECT count(*) FROM dedup_claim_batch('s', ARRAY['a', 'b'], ttl => '1 hour')}),
	'ERROR:  25006', 'dedup_claim_batch fails with 25006 on the standby');
is($standby->sqlstate('app', 'SELECT * FROM dedup_cleanup_batch()'),
	'ERROR:  25006', 'dedup_cleanup_batch fails with 25006 on the standby');
is($standby->message('app', q{SELECT dedup_claim('s', 'k', ttl => '1 hour')}),
	'ERROR:  cannot execute dedup_claim() during recovery', 'the error says why');
is($standby->safe_psql('app', q{SELECT count(*) FROM dedup_lookup('long', 'live-1')}),
	'1', 'dedup_lookup works on the standby: a live key');
is($standby->safe_psql('app', q{SELECT count(*) FROM dedup_lookup('short', 'gone-1')}),
	'0', 'dedup_lookup works on the standby: an expired key is absent');
is($standby->safe_psql('app', q{SELECT count(*) FROM dedup_lookup('s', 'k')}),
	'0', 'dedup_lookup works on the standby: an unknown key is absent');

# every other write function is refused with 25006 naming the standby, and
# every read function works
for my $sql (
	q{SELECT dedup_begin('charges', 'c-3')},
	q{SELECT dedup_complete('charges', 'c-1', 200)},
	q{SELECT dedup_release('charges', 'c-1')},
	q{SELECT dedup_set_scope('orders', ttl => '1 hour')},
	q{SELECT dedup_reset_scope('orders')},
	q{SELECT dedup_outbox_put('events', 'e-3', '{}')},
	q{SELECT count(*) FROM dedup_outbox_take('events')},
	q{SELECT dedup_outbox_ack(ARRAY['a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'::uuid])},
	q{SELECT dedup_outbox_nack(ARRAY['a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'::uuid])},
	q{SELECT dedup_outbox_redrive('events')},
	q{SELECT dedup_advance('log', 'p-0', 99)},
	q{SELECT count(*) FROM dedup_advance_batch('log', ARRAY['p-0'], ARRAY[99]::bigint[])},
	q{SELECT dedup_new_epoch('log', 'p-0')},
	q{CALL dedup_cleanup()})
{
	my ($fn) = $sql =~ /^(?:SELECT (?:count\(\*\) FROM )?|CALL )([a-z_]+)/;
	is($standby->sqlstate('app2', $sql), 'ERROR:  25006', "$fn fails with 25006 on the standby");
	$fn = 'dedup_cleanup_batch' if $fn eq 'dedup_cleanup';
	is($standby->message('app2', $sql), "ERROR:  cannot execute $fn() during recovery",
		"$fn: the error names the standby");
}
is( $standby->safe_psql('app2',
		q{SELECT (SELECT mark FROM dedup_position('log', 'p-0')) || ' ' || (SELECT count(*) FROM dedup_streams('log'))}),
	'41 1', 'dedup_position and dedup_streams work on the standby');
is($standby->safe_psql('app2', q{SELECT ttl FROM dedup_scope('orders')}), '02:00:00',
	'dedup_scope works on the standby');
is( $standby->safe_psql('app2',
		q{SELECT string_agg(status, ',' ORDER BY status) FROM (SELECT status FROM dedup_lookup('charges', 'c-1') UNION ALL SELECT status FROM dedup_lookup('charges', 'c-2')) AS r}),
	'complete,processing', 'dedup_lookup of records works on the standby');
is($standby->safe_psql('app2', q{SELECT pending || ' ' || in_flight || ' ' || dead FROM dedup_outbox_stats('events')}),
	'2 0 0', 'dedup_outbox_stats works on the standby');
is($standby->safe_psql('app2', 'SELECT count(*) >= 0 FROM dedup_cleanup_stats()'), 't',
	'dedup_cleanup_stats works on the standby');
is($standby->safe_psql('app2', q{SELECT dedup_fingerprint('x'::text) = dedup_fingerprint('x'::bytea)}), 't',
	'fingerprints work on the standby');

# 4. the primary goes away, the standby is promoted: the launcher starts and
# its worker deletes exactly the expired claims
$primary->stop;
$standby->promote;
is($standby->safe_psql('app', 'SELECT pg_is_in_recovery()'), 'f', 'promoted: out of recovery');
ok($standby->poll_within(30, 'app', $launchers, '1'),
	'the postmaster started the cleanup launcher after promotion');
ok($standby->poll_within(30, 'app', 'SELECT count(*) FROM dedup.claims', '1000'),
	'the promoted server cleaned down to 1000 claims');
is( $standby->safe_psql('app',
		'SELECT count(*) FROM dedup.claims c FULL JOIN live l USING (key) WHERE c.key IS NULL OR l.key IS NULL'),
	'0', 'rows left are exactly the live ones');
is($standby->safe_psql('app', q{SELECT rows_deleted || ' ' || errors FROM dedup_cleanup_stats() WHERE kind = 'claim'}),
	'2000 0', 'figures: 2000 claims deleted, no errors');
is( $standby->safe_psql('app',
		q{SELECT count(*) FROM dedup_claim_batch('long', ARRAY(SELECT 'live-' || i FROM generate_series(1, 1000) i))}),
	'0', 'live claims are still duplicates');
is($standby->safe_psql('app', q{SELECT dedup_claim('s', 'k', ttl => '1 hour')}), 't',
	'dedup_claim writes on the promoted server');
is($standby->safe_psql('app', q{SELECT dedup_claim('s', 'k', ttl => '1 hour')}), 'f',
	'and the same key again is a duplicate');
is($standby->safe_psql('app', 'SELECT deleted FROM dedup_cleanup_batch()'), '0',
	'dedup_cleanup_batch runs on the promoted server');

done_testing();
