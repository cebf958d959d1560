# test/perl/DedupNode.pm: a PostgreSQL::Test::Cluster node for dedup's TAP
# tests (test/t/*.pl), run by `make installcheck` through PGXS's
# prove_installcheck against the installed server.
#
# DedupNode->create makes and starts a node as scripts/lib.sh's server_start
# made a server: dedup preloaded (or what the test asks for), fsync off,
# restart_after_crash on, wal_level replica, 50 connections, 10 prepared
# transactions; the harness picks the port and the socket directory.  Then
# the few things the tests share that the harness has no method for: a
# crash with SIGKILL and the start after it, the SQLSTATE or message of a
# statement that fails, a poll with a time limit of its own, the server
# log's lines, a process's exit within a time, and the fixture of every
# kind of dedup row (test/fixture/*.sql, which test/fixture.sh reads too).
#
# One file, as a user other than root, against the PostgreSQL of pg_config:
#   make installcheck REGRESS= ISOLATION= TAP_TESTS=1 PROVE_TESTS=test/t/002_crash.pl
# as root (as scripts/test does, as postgres, in a copy of the tree):
#   . scripts/lib.sh; run_tap_tests /tmp/tap.log test/t/002_crash.pl
#
# Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.

package DedupNode;

use strict;
use warnings;

use File::Basename qw(dirname);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils ();    # its functions named in full: an import would hide methods
use Test::More;
use Time::HiRes qw(usleep time);

our @ISA = ('PostgreSQL::Test::Cluster');

# test/fixture, beside test/perl
my $fixture_dir = dirname(__FILE__) . '/../fixture';

# DedupNode->create(NAME, preload => LIBRARIES, streaming => 0|1|'logical',
#                   conf => [LINES], start => 0|1)
# A new node, initialized and (unless start => 0) started.  preload is
# shared_preload_libraries ('dedup' unless given; '' for none); conf lines
# come last in postgresql.conf, so they win over the defaults here.
sub create
{
	my ($class, $name, %params) = @_;
	my $preload = defined $params{preload} ? $params{preload} : 'dedup';
	my $node = $class->new($name);

	$node->init(allows_streaming => $params{streaming} || 0);
	my @conf = (
		"shared_preload_libraries = '$preload'",
		'fsync = off',
		'restart_after_crash = on',
		'log_statement = none',
		'max_connections = 50',
		'max_prepared_transactions = 10',
		"shared_buffers = '128MB'");
	push @conf, 'wal_level = replica' unless $params{streaming};
	push @conf, "cron.database_name = 'postgres'" if $preload =~ /pg_cron/;
	push @conf, @{ $params{conf} || [] };
	$node->append_conf('postgresql.conf', join("\n", @conf));
	$node->start unless defined $params{start} && !$params{start};
	return $node;
}

# $node->crash_restart: kill the postmaster with SIGKILL, as a crash would,
# and start it again (crash recovery replays the WAL).  Waits for the
# postmaster to be gone (or a zombie nobody reaps), removes its lock files
# (a zombie's PID would look alive), and retries the start while its
# orphaned backends, which exit when they notice its death, still hold
# shared memory.  Returns whether the server started again.
sub crash_restart
{
	my ($self) = @_;
	my $pid = $self->{_pid};

	$self->kill9;
	for (1 .. 100)
	{
		my $state = process_state($pid);
		last if !defined $state || $state eq 'Z';
		usleep(100_000);
	}
	unlink $self->data_dir . '/postmaster.pid';
	unlink $self->host . '/.s.PGSQL.' . $self->port . '.lock';
	for (1 .. 20)
	{
		return 1 if $self->start(fail_ok => 1);
		usleep(500_000);
	}
	diag 'crash_restart: the server did not start again; see ' . $self->logfile;
	return 0;
}

# process_state(PID): the state letter of /proc/PID/stat (Z for a zombie),
# or undef when there is no such process
sub process_state
{
	my ($pid) = @_;
	open my $fh, '<', "/proc/$pid/stat" or return undef;
	my $stat = <$fh>;
	close $fh;
	return $stat =~ /^\d+ \(.*\) (\S)/ ? $1 : undef;
}

# pid_gone_within(PID, SECONDS): the seconds process PID took to exit (or
# become a zombie), polling every 20 ms; undef if it was still there after
# SECONDS
sub pid_gone_within
{
	my ($pid, $limit) = @_;
	my $start = time;
	while (1)
	{
		my $state = process_state($pid);
		return time - $start if !defined $state || $state eq 'Z';
		return undef if time - $start > $limit;
		usleep(20_000);
	}
}

# $node->psql_error(DB, SQL, VERBOSITY): what psql prints for SQL run with
# that VERBOSITY (sqlstate, terse), its file and line prefix taken off:
# "ERROR:  25006" for a failure, the rows for a success
sub psql_error
{
	my ($self, $db, $sql, $verbosity) = @_;
	my ($ret, $out, $err) =
	  $self->psql($db, $sql, extra_params => [ '-v', "VERBOSITY=$verbosity" ]);
	$err =~ s/^psql:[^:]*:\d+: //mg;
	return join("\n", grep { $_ ne '' } ($out, $err));
}

# $node->sqlstate(DB, SQL): "ERROR:  " and the SQLSTATE SQL fails with
sub sqlstate { my ($self, $db, $sql) = @_; return $self->psql_error($db, $sql, 'sqlstate'); }

# $node->message(DB, SQL): "ERROR:  " and the message SQL fails with
sub message { my ($self, $db, $sql) = @_; return $self->psql_error($db, $sql, 'terse'); }

# $node->poll_within(SECONDS, DB, SQL, WANT): the harness's poll_query_until
# with a time limit of SECONDS instead of its default
sub poll_within
{
	my ($self, $seconds, $db, $sql, $want) = @_;
	local $PostgreSQL::Test::Utils::timeout_default = $seconds;
	return $self->poll_query_until($db, $sql, $want);
}

# $node->log_count(TEXT): how many lines of the server's log hold TEXT
sub log_count
{
	my ($self, $text) = @_;
	my $log = PostgreSQL::Test::Utils::slurp_file($self->logfile);
	return scalar(grep { index($_, $text) >= 0 } split /\n/, $log);
}

# $node->log_within(SECONDS, TEXT): whether the server's log gets a line
# holding TEXT within SECONDS
sub log_within
{
	my ($self, $seconds, $text) = @_;
	local $PostgreSQL::Test::Utils::timeout_default = $seconds;
	return eval { $self->wait_for_log(qr/\Q$text\E/); 1 } ? 1 : 0;
}

# The fixture: a database holding every kind of dedup row, for the tests
# that must show rows survive an operation (pg_dump and pg_restore here,
# ALTER EXTENSION UPDATE in test/integration/upgrade.sh through
# test/fixture.sh).  See test/fixture/*.sql.

# $node->fixture_fill(DB): claims, records, scope settings and outbox events
sub fixture_fill
{
	my ($self, $db) = @_;
	$self->safe_psql($db, PostgreSQL::Test::Utils::slurp_file("$fixture_dir/fill.sql"));
	is( $self->safe_psql(
			$db,
			"SELECT pending || ' ' || in_flight || ' ' || dead FROM dedup_outbox_stats('events')"
		),
		'9 2 1',
		"$db: the fixture's outbox has 9 pending, 2 in flight and 1 dead event");
	return;
}

# $node->fixture_snapshot(DB): what every dedup table holds, one line per table
sub fixture_snapshot
{
	my ($self, $db) = @_;
	return $self->safe_psql($db, PostgreSQL::Test::Utils::slurp_file("$fixture_dir/snapshot.sql"));
}

# $node->fixture_check(DB): the rows behave as they did where they were
# made (changes the database); one assertion per line of check.sql
sub fixture_check
{
	my ($self, $db) = @_;
	my @lines = split /\n/,
	  $self->safe_psql($db, PostgreSQL::Test::Utils::slurp_file("$fixture_dir/check.sql"));
	for my $line (@lines)
	{
		my ($label, $got, $want) = split /\|/, $line, 3;
		is($got, $want, "$db: $label");
	}
	is(scalar(@lines), 13, "$db: every check of the fixture ran");
	return;
}

1;
