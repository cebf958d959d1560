# The exactly-once simulation (sim/dedup-sim, built by make sim, which make
# installcheck does first) at a small size with every fault on and the
# postmaster killed with SIGKILL twice, while the cleanup worker deletes
# what expires every second and switches the time buckets of dedup.claims
# every two seconds (after the simulation it must have dropped one whose
# rows had all expired).  Fails on any broken invariant (the simulator
# exits 1 and says which), and checks that the server really went through
# crash recovery twice and that the simulation ran long enough for the
# cleanup to delete expired rows.
# Then a hot-aggregate feed (--aggregates 1: every event of one aggregate,
# checked to reach downstream in commit order).
# Then the partitioned-log mode (--log): producers appending through
# dedup_advance in a strict scope, restarted under new epochs with their
# old instances still sending, consumers crashing and resuming from their
# stored positions, connections killed and the postmaster killed once.
# Each mode is run once more without the dedup it tests, and must fail; the
# first with a dedup window shorter than the redeliveries fails, and with a
# history behind that window holds.  The simulator kills the postmaster
# through the node's crash_command (test/perl/DedupServer.pm's crash).
# (Was test/integration/sim.sh.)
#
# Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.
use strict;
use warnings;
use DedupNode;
use IPC::Run;
use Test::More;

# In the 17 and 18 chroots of scripts/test's matrix: the host's run covers
# it; the simulator does not depend on the major, and it would add minutes to each.
plan skip_all => "runs on the host's major only (matrix chroot of PostgreSQL $ENV{DEDUP_MATRIX_MAJOR})"
  if $ENV{DEDUP_MATRIX_MAJOR};

my $sim = DedupNode::tree_file('sim/dedup-sim');
plan skip_all => "$sim is not built (make sim)" unless -x $sim;

my $node = DedupNode->create(
	'sim',
	conf => [
		"dedup.cleanup_databases = 'dedup_sim'", "dedup.cleanup_interval = '1s'",
		"dedup.bucket_interval = '2s'", 'restart_after_crash = off'
	]);
$node->safe_psql('postgres', 'CREATE DATABASE dedup_sim');
my $conninfo = $node->connstr('dedup_sim');
my $crash_command = $node->crash_command;
my $logdir = PostgreSQL::Test::Utils::tempdir();

# simulate(NAME, ARGS...): run the simulator with ARGS against dedup_sim,
# its output (stdout and stderr) to a file of NAME; its exit status and
# output.  A crash restarted the node behind the harness's back: its pid is
# read again (none if a start failed: the checks then say what failed).
sub simulate
{
	my ($name, @args) = @_;
	my $out = "$logdir/$name.log";
	IPC::Run::run([ $sim, @args, $conninfo ], '>', $out, '2>&1');
	my $status = $? >> 8;
	$node->_update_pid(-1);
	return ($status, PostgreSQL::Test::Utils::slurp_file($out));
}
sub lines_matching { my ($re, $text) = @_; return scalar(grep { /$re/ } split /\n/, $text); }
sub tail { my ($n, $text) = @_; my @l = split /\n/, $text; return join("\n", @l > $n ? @l[ -$n .. -1 ] : @l); }

# a run that should have held but did not: what broke goes to the harness's
# output (CI shows that, not the log), with the figures it depends on
sub diag_broken
{
	my ($status, $out) = @_;
	return if $status == 0;
	diag join("\n",
		grep { /FAIL|dedup window|copies arrived|unexpected error|postmaster kills|dedup-sim:/ }
		  split /\n/, $out);
}

# the ttl, also the downstream's dedup window, is longer than a relay's
# slowest redelivery of a batch (a relay dead before its ack, its lease of
# 2 s passed, the next take after a postmaster kill): 9.5 s seen on a
# 2-core machine, where a ttl of 8 s let 95 events be applied twice
my ($status, $out) = simulate(
	'sim', qw(--messages 40000 --consumers 6 --ttl 15 --kill-rate 10
	  --rollbacks 0.02 --fail 0.02 --hang 0.002 --relay-faults 0.05 --crashes 2),
	'--crash-command', $crash_command, '--progress', '2');
note tail(40, $out);
diag_broken($status, $out);
is($status, 0, 'simulator exit status');
is(lines_matching(qr/^exactly once: every invariant holds$/, $out), 1, 'report says exactly once');
is(lines_matching(qr/^  crash [0-9]: server up again/, $out), 2, 'postmaster kills done');
is($node->log_count('automatic recovery in progress'), 2, 'crash recoveries in the server log');
my ($killed) = $out =~ / ([0-9]+) connections killed mid-transaction/;
cmp_ok($killed // 0, '>', 0, 'connections killed mid-transaction: ' . ($killed // 0));
my ($lost) = $out =~ /^  connections lost *([0-9]+) /m;
cmp_ok($lost // 0, '>', 0,
	'statements or commits that met a lost connection, and were redelivered: ' . ($lost // 0));
# the figures count from the last server start, which a postmaster kill late
# in the run makes recent: rows it saw expire may still be in a bucket that
# retires at the next passes (a ttl after its last claim, then sealed once
# its writers ended)
ok( $node->poll_within(
		30, 'dedup_sim', 'SELECT coalesce(sum(rows_deleted), 0) > 0 FROM dedup_cleanup_stats()', 't'),
	'the cleanup worker deleted expired rows since the last restart');
note 'the cleanup worker deleted '
  . $node->safe_psql('dedup_sim', 'SELECT sum(rows_deleted) FROM dedup_cleanup_stats()')
  . ' expired rows since the last restart';
# a bucket goes once its rows have expired: a ttl and an interval after it opened
ok( $node->poll_within(
		30, 'dedup_sim', 'SELECT max(bucket) - count(*) FILTER (WHERE bucket > 0) > 0 FROM dedup.buckets', 't'),
	'a bucket of dedup.claims was dropped whole');
note $node->safe_psql('dedup_sim',
	q{SELECT max(bucket) - count(*) FILTER (WHERE bucket > 0) || ' buckets dropped, ' || count(*) || ' listed at the end' FROM dedup.buckets}
);

# A hot-aggregate feed: every payment to one account, every event of one
# aggregate, three relays (two on batches of several events of it, one on
# the 1.0 take), relay deaths and double publishes: every invariant holds,
# the events of the aggregate first reaching downstream in commit order
($status, $out) = simulate(
	'sim-hot', qw(--messages 6000 --consumers 4 --aggregates 1 --relays 3 --ttl 30
	  --relay-faults 0.05));
note tail(20, $out);
diag_broken($status, $out);
is($status, 0, 'hot aggregate: simulator exit status');
is( lines_matching(
		qr/^  events of an aggregate first delivered downstream out of commit order  *0  *0  ok$/, $out),
	1,
	'hot aggregate: in commit order downstream');

# The checks can fail: with a dedup window (ttl 1 s) shorter than the time
# over which copies arrive (anywhere in a feed of about 3 s), late copies
# are applied again, and the simulator must say so and exit 1.
($status, $out) = simulate(
	'sim-short', qw(--messages 15000 --consumers 4 --window 0 --ttl 1 --no-faults
	  --progress 10));
note tail(25, $out);
is($status, 1, 'exit status with a window shorter than the redeliveries');
cmp_ok(lines_matching(qr/^  messages applied more than once .*FAILED$/, $out),
	'>', 0, 'double effects past the dedup window are reported');

# the same short window with a history of an hour behind it: the late copies
# are caught (by expired claims, then by the buckets' folds into the
# history), every invariant holds but for the history's false positives,
# which are counted and left out of what must be applied
($status, $out) = simulate(
	'sim-history', qw(--messages 15000 --consumers 4 --window 0 --ttl 1 --no-faults
	  --records 0 --history 3600 --progress 10));
note tail(25, $out);
diag_broken($status, $out);
is($status, 0, 'exit status with a history behind a short window');
my ($caught) = $out =~ /^  history *([0-9]+) duplicates answered by the history/m;
cmp_ok($caught // 0, '>', 0, 'late copies the history caught: ' . ($caught // 0));
# a bucket is folded when it retires: a ttl after its last claim, once
# sealed, at the next pass; the run may end a pass or two before the first
# (seen: a bucket sealed, every row expired a second before the run ended)
ok( $node->poll_within(
		30, 'dedup_sim', 'SELECT coalesce(sum(keys), 0) > 0 FROM dedup.history_generations', 't'),
	'claims of the run folded into the history');
note $node->safe_psql('dedup_sim', 'SELECT coalesce(sum(keys), 0) FROM dedup.history_generations')
  . ' claims of the run folded into the history';

($status, $out) = simulate(
	'sim-log', qw(--log --messages 40000 --partitions 8 --consumers 4 --kill-rate 20
	  --rollbacks 0.02 --crashes 1), '--crash-command', $crash_command);
note tail(30, $out);
diag_broken($status, $out);
is($status, 0, 'partitioned log: simulator exit status');
is(lines_matching(qr/^exactly once: every message appended once and applied once/, $out),
	1, 'partitioned log: report says exactly once');
is(lines_matching(qr/^  ok  /, $out), 8, 'partitioned log: every invariant ok');
my ($fenced) = $out =~ / ([0-9]+) sends of the old instances fenced/;
is($fenced, 40, 'partitioned log: every zombie send fenced (5 a partition)');
is( lines_matching(
		qr/^  storage *dedup\.streams rows: 8 \(broker\) \+ 8 \(consumers\), for 40000 messages$/, $out),
	1,
	'partitioned log: one stream row a partition and scope');

($status, $out) = simulate(
	'sim-log-unguarded', qw(--log --unguarded --messages 8000 --partitions 4 --consumers 2
	  --rollbacks 0.02 --no-faults));
note tail(12, $out);
is($status, 1, 'partitioned log without dedup_advance: exit status');
cmp_ok(lines_matching(qr/^  FAIL none twice/, $out),
	'>', 0, 'without dedup_advance the double appends and effects are reported');

done_testing();
