# Claims survive a crash.  Two clients claim keys (many of them duplicates)
# and write one business row per new claim, in one transaction; the server
# is killed with SIGKILL under that load, twice, and restarted (crash
# recovery replays the WAL that the claim path wrote directly); the third
# time while the time buckets of dedup.claims switch.  Then: exactly one
# business row per claimed key, no business row without its claim, no claim
# without its business row, and the claims' index of every bucket agrees
# with its table (amcheck, heapallindexed).  Last, rows of the current
# bucket written before a restart are still deleted once expired.
#
# Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.
use strict;
use warnings;
use DedupNode;
use IPC::Run;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep);

# the cleanup runs only when the test calls it: the worker's pass at each
# start would race the last check (it deletes the 1-second claim the test
# counts before its own pass)
my $node = DedupNode->create('crash', conf => ['restart_after_crash = off', 'dedup.cleanup_enabled = off']);
$node->safe_psql('postgres', q{
CREATE EXTENSION dedup;
CREATE EXTENSION amcheck;
CREATE TABLE orders (message_id text NOT NULL, created_at timestamptz DEFAULT now());});

my $load_sql = PostgreSQL::Test::Utils::tempdir() . '/load.sql';
append_to_file($load_sql, q{\set r random(1, 20000)
BEGIN;
INSERT INTO orders (message_id) SELECT 'm-' || :round || '-' || :r WHERE dedup_claim('crash', 'm-' || :round || '-' || :r);
COMMIT;
});

# round 3: the time buckets of dedup.claims switch under the load, as fast
# as the cleanup can (each bucket aged past dedup.bucket_interval at once),
# so that the kill lands among the switch's steps
my $switch = q{UPDATE dedup.buckets SET opened_at = opened_at - interval '7 hours' WHERE state = 'c'};
my $connstr = $node->connstr('postgres');
for my $round (1 .. 3)
{
	my ($out, $err) = ('', '');
	my $load = IPC::Run::start(
		[ 'pgbench', '-n', '-c', '2', '-j', '2', '-T', '30', '-D', "round=$round", '-f', $load_sql, $connstr ],
		'>', \$out, '2>', \$err);
	my $switcher;
	if ($round == 3)
	{
		$switcher = IPC::Run::start(
			[ 'bash', '-c', 'while :; do psql -X -q -d "$1" -c "$2" -c "CALL dedup_cleanup()" >/dev/null 2>&1; done',
				'switcher', $connstr, $switch ]);
		sleep 3;
	}
	else
	{
		sleep 2;
	}
	ok($node->crash_restart, "round $round: killed under load, the server started again");
	$load->finish;
	$switcher->kill_kill if $switcher;
	note "round $round: recovered with "
	  . $node->safe_psql('postgres', 'SELECT count(*) FROM orders') . ' orders';
}
note 'buckets after round 3: ' . $node->safe_psql('postgres',
	q{SELECT string_agg(bucket || ':' || state::text, ' ' ORDER BY bucket) FROM dedup.buckets});
cmp_ok($node->safe_psql('postgres', 'SELECT count(*) FROM dedup.buckets'), '>=', 3,
	'the buckets switched under the load');
# the switch goes on after the crash, whatever step it was at
$node->safe_psql('postgres', "$switch; CALL dedup_cleanup();");
is($node->safe_psql('postgres', q{SELECT count(*) FROM dedup.buckets WHERE state IN ('n', 'x')}), '0',
	'a switch the crash interrupted was completed');

my ($unique, $orders, $claims, $unclaimed, $checked) = split /\n/, $node->safe_psql('postgres', q{
SELECT count(*) = count(DISTINCT message_id) FROM orders;
SELECT count(*) FROM orders;
SELECT count(*) FROM dedup.claims;
BEGIN;
SELECT count(*) FROM orders WHERE dedup_claim('crash', message_id);
ROLLBACK;
SELECT bool_and(bt_index_check(i.indexrelid, true) IS NOT NULL)
FROM dedup.buckets b JOIN pg_index i ON i.indrelid = b.relid AND i.indisprimary;});
note "orders unique: $unique, orders: $orders, claims: $claims, orders whose key was not claimed: $unclaimed, amcheck: $checked";
cmp_ok($orders, '>', 0, 'orders were written');
is($unique, 't', 'no message has two business effects');
is($orders, $claims, 'one claim per order, one order per claim');
is($unclaimed, '0', "every order's key was claimed");
is($checked, 't', "amcheck finds every bucket's index in agreement with its table");
cmp_ok($node->log_count('automatic recovery in progress'), '>=', 2,
	'the server went through crash recovery twice at least');

# The cleanup reads the current bucket only once a row in it may have
# expired, by the expiries noted in shared memory since its switch: a
# restart loses them, and the rows written before it must still go.  A
# claim of a 1-second ttl written before a crash, one of a day after (whose
# expiry alone is noted then): the 1-second one is deleted once expired.
$node->safe_psql('postgres', "$switch; CALL dedup_cleanup();");
$node->safe_psql('postgres', q{SELECT dedup_claim('short', 's', ttl => '1 second')});
$node->stop('immediate');
$node->start;
$node->safe_psql('postgres', q{SELECT dedup_claim('short', 'd', ttl => '1 day')});
sleep 1.2;
my $current = $node->safe_psql('postgres', q{SELECT relid FROM dedup.buckets WHERE state = 'c'});
is($node->safe_psql('postgres', "SELECT count(*) FROM $current"), '2',
	'the current bucket holds the two claims');
$node->safe_psql('postgres', 'CALL dedup_cleanup()');
is($node->safe_psql('postgres', "SELECT count(*) FROM $current"), '1',
	'a row of the current bucket written before a restart is deleted once expired');

done_testing();
