# test/perl/DedupServer.pm: what dedup's two harnesses share about a test
# server, in Perl that needs no harness: the settings every test server
# starts with (test/perl/dedup.conf), and the crash of a server with
# SIGKILL and its start after it.  test/perl/DedupNode.pm (the TAP tests)
# uses it as a module; scripts/lib.sh's server_crash (the integration
# scripts, the demo) calls it on the command line:
#   perl -I test/perl -MDedupServer -e 'exit !DedupServer::crash_dir(@ARGV)' \
#       DATADIR LOCK_FILES START_COMMAND...
# as does a program that crashes the server itself (sim/dedup-sim's
# --crash-command) in a TAP test (DedupNode's crash_command).
#
# Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.

package DedupServer;

use strict;
use warnings;

use File::Basename qw(dirname);
use Time::HiRes qw(usleep time);

# conf_file(): the path of test/perl/dedup.conf, beside this file
sub conf_file { return dirname(__FILE__) . '/dedup.conf'; }

# conf(): dedup.conf's text, to append to a postgresql.conf
sub conf
{
	open my $fh, '<', conf_file() or die 'cannot read ' . conf_file() . ": $!";
	local $/;
	my $text = <$fh>;
	close $fh;
	return $text;
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

# crash_restart(PID, START, FILES): kill the postmaster PID with SIGKILL,
# as a crash would, and start the server again with START, a function that
# returns whether the start worked (crash recovery replays the WAL).  Waits
# for the postmaster to be gone (or a zombie nobody reaps), removes FILES,
# its lock files (a zombie's PID would look alive), and retries the start
# every 0.5 s, 20 times, while its orphaned backends, which exit when they
# notice its death, still hold shared memory.  Returns whether the server
# started again.
sub crash_restart
{
	my ($pid, $start, @files) = @_;

	kill 'KILL', $pid;
	for (1 .. 100)
	{
		my $state = process_state($pid);
		last if !defined $state || $state eq 'Z';
		usleep(100_000);
	}
	unlink @files;
	for (1 .. 20)
	{
		return 1 if $start->();
		usleep(500_000);
	}
	return 0;
}

# crash_dir(DATADIR, LOCK_FILES, START_COMMAND...): crash_restart of the
# server of DATADIR (its postmaster.pid's), its socket's lock files those
# LOCK_FILES, a glob pattern, names, START_COMMAND its start (run with its
# output discarded)
sub crash_dir
{
	my ($datadir, $lock_files, @command) = @_;
	open my $fh, '<', "$datadir/postmaster.pid" or die "$datadir/postmaster.pid: $!";
	my $pid = <$fh>;
	close $fh;
	chomp $pid;
	my $started = crash_restart(
		$pid,
		sub {
			my $child = fork // die "fork: $!";
			if ($child == 0)
			{
				open STDOUT, '>', '/dev/null';
				open STDERR, '>', '/dev/null';
				exec @command or exit 127;
			}
			waitpid $child, 0;
			return $? == 0;
		},
		"$datadir/postmaster.pid",
		glob($lock_files));
	print STDERR "crash_restart: the server did not start again: @command\n" unless $started;
	return $started;
}

1;
