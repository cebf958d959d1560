# test/perl/DedupNode.pm: a PostgreSQL::Test::Cluster node for dedup's TAP
# tests (test/t/*.pl), run by `make installcheck` through PGXS's
# prove_installcheck against the installed server.
#
# DedupNode->create makes and starts a node with the settings of every test
# server of dedup, test/perl/dedup.conf, which scripts/lib.sh's server_start
# appends too (fsync off, restart_after_crash on, wal_level replica, 50
# connections, 10 prepared transactions), and dedup preloaded (or what the
# test asks for); the harness picks the port and the socket directory.  Then
# the few things the tests share that the harness has no method for: a
# crash with SIGKILL and the start after it (test/perl/DedupServer.pm's,
# which scripts/lib.sh's server_crash runs too), the SQLSTATE or message of a
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

use Cwd ();
use DedupServer;
use File::Basename qw(dirname);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils ();    # its functions named in full: an import would hide methods
use Test::More;

our @ISA = ('PostgreSQL::Test::Cluster');

# test/fixture, beside test/perl
my $fixture_dir = dirname(__FILE__) . '/../fixture';

# tree_file(PATH): PATH, relative to the top of the tree (or of the copy
# that scripts/lib.sh's run_tap_tests makes), as the tests can open it
sub tree_file
{
	my ($path) = @_;
	return Cwd::abs_path(dirname(__FILE__) . '/../..') . "/$path";
}

# DedupNode->create(NAME, preload => LIBRARIES, streaming => 0|1|'logical',
#                   conf => [LINES], start => 0|1)
# A new node, initialized and (unless start => 0) started.  preload is
# shared_preload_libraries ('dedup' unless given; '' for none); conf lines
# come last in postgresql.conf, so they win over dedup.conf's.
sub create
{
	my ($class, $name, %params) = @_;
	my $preload = defined $params{preload} ? $params{preload} : 'dedup';
	my $node = $class->new($name);

	$node->init(allows_streaming => $params{streaming} || 0);
	my @conf = ("shared_preload_libraries = '$preload'");
	# after dedup.conf's replica
	push @conf, 'wal_level = logical' if ($params{streaming} || '') eq 'logical';
	push @conf, @{ $params{conf} || [] };
	$node->append_conf('postgresql.conf',
		"\n# test/perl/dedup.conf\n" . DedupServer::conf() . "\n# DedupNode\n" . join("\n", @conf));
	$node->start unless defined $params{start} && !$params{start};
	return $node;
}

# $node->crash_restart: kill the postmaster with SIGKILL, as a crash would,
# and start it again (crash recovery replays the WAL): DedupServer's
# crash_restart, with the harness's start.  Returns whether the server
# started again.
sub crash_restart
{
	my ($self) = @_;
	my $pid = $self->{_pid};

	print "### Killing node \"" . $self->name . "\" using signal 9\n";
	return 1
	  if DedupServer::crash_restart(
		$pid,
		# the node is not running: a failed start may have read a pid
		sub { $self->{_pid} = undef; $self->start(fail_ok => 1) },
		$self->data_dir . '/postmaster.pid',
		$self->host . '/.s.PGSQL.' . $self->port . '.lock');
	diag 'crash_restart: the server did not start again; see ' . $self->logfile;
	return 0;
}

# $node->crash_command: a shell command that does what crash_restart does,
# with pg_ctl, for a program that crashes the server itself
# (sim/dedup-sim's --crash-command).  The node's pid is then stale: call
# $node->_update_pid(-1) once the program is done.
sub crash_command
{
	my ($self) = @_;
	my @command = (
		'perl', '-I', Cwd::abs_path(dirname(__FILE__)), '-MDedupServer', '-e',
		'exit !DedupServer::crash_dir(@ARGV)', $self->data_dir,
		$self->host . '/.s.PGSQL.' . $self->port . '.lock',
		'pg_ctl', '-w', '-D', $self->data_dir, '-l', $self->logfile, 'start');
	return join ' ', map { my $arg = $_; $arg =~ s/'/'\\''/g; "'$arg'" } @command;
}

# process_state(PID) and pid_gone_within(PID, SECONDS): DedupServer's
sub process_state { return DedupServer::process_state(@_); }
sub pid_gone_within { return DedupServer::pid_gone_within(@_); }

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
# that must show rows survive an operation (pg_dump and pg_restore in
# test/t/006_dump.pl, ALTER EXTENSION UPDATE in test/t/014_upgrade.pl;
# pg_upgrade in test/integration/pg_upgrade.sh through test/fixture.sh).
# See test/fixture/*.sql.

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
