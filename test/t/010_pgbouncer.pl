# dedup behind PgBouncer in transaction pooling, as the README's "Behind a
# connection pooler" says to use it.  Clients share one server connection
# (default_pool_size = 1, so that sharing is certain):
# - settings through dedup_set_scope and SET LOCAL reach only the claims
#   they were meant for: 20 claims of other clients keep the 1-day default;
# - a session-level SET through the pooler does leak to the next client on
#   the same server connection (the hazard the README warns of);
# - claims, records and the relay's take/ack work through the pooler, and a
#   relay listening on a direct connection hears one NOTIFY per put's commit.
# Skipped when PgBouncer is not installed (Debian's pgbouncer; scripts/test
# installs it on the host).  (Was test/integration/pgbouncer.sh.)
#
# Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.
use strict;
use warnings;
use DedupNode;
use IPC::Run;
use Test::More;

my ($pgbouncer) = grep { -x } map { "$_/pgbouncer" } split(/:/, $ENV{PATH} || ''), '/usr/sbin';
plan skip_all => 'PgBouncer is not installed (Debian package pgbouncer)' unless $pgbouncer;

my $node = DedupNode->create('pgbouncer');
$node->safe_psql('postgres',
	q{CREATE EXTENSION dedup; SELECT dedup_set_scope('short-lived', ttl => '90 seconds')});

# PgBouncer, transaction pooling, on a socket of its own; the server's
# superuser is the user the test runs as
my $user = getpwuid($<);
my $bdir = PostgreSQL::Test::Utils::tempdir_short();
my $bport = PostgreSQL::Test::Cluster::get_free_port();
my ($host, $port) = ($node->host, $node->port);
PostgreSQL::Test::Utils::append_to_file(
	"$bdir/pgbouncer.ini", <<"CONF");
[databases]
postgres = host=$host port=$port dbname=postgres user=$user
[pgbouncer]
listen_addr =
listen_port = $bport
unix_socket_dir = $bdir
auth_type = trust
auth_file = $bdir/users.txt
pool_mode = transaction
default_pool_size = 1
max_client_conn = 50
logfile = $bdir/pgbouncer.log
pidfile = $bdir/pgbouncer.pid
CONF
PostgreSQL::Test::Utils::append_to_file("$bdir/users.txt", qq{"$user" ""\n});
PostgreSQL::Test::Utils::system_or_bail($pgbouncer, '-d', "$bdir/pgbouncer.ini");

END
{
	if (open my $fh, '<', "$bdir/pgbouncer.pid")
	{
		my $pid = <$fh>;
		kill 'TERM', $pid if $pid && $pid =~ /^(\d+)/;
	}
}

# pooled(SQL...): psql through the pooler, one -c a statement; dies on an error
sub pooled
{
	my @cmd = ('psql', '-X', '-q', '-At', '-v', 'ON_ERROR_STOP=1', '-h', $bdir, '-p', $bport,
		'-d', 'postgres', map { ('-c', $_) } @_);
	my ($out, $err) = ('', '');
	IPC::Run::run(\@cmd, '>', \$out, '2>', \$err)
	  or die "psql through the pooler failed: @_: $err";
	chomp $out;
	return $out;
}

my $up = 0;
for (1 .. 50)
{
	$up = eval { pooled('SELECT 1') eq '1' };
	last if $up;
	select(undef, undef, undef, 0.1);
}
ok($up, 'PgBouncer answers')
  or BAIL_OUT('pgbouncer did not start: ' . PostgreSQL::Test::Utils::slurp_file("$bdir/pgbouncer.log"));

# the server's clock, read just before a claim
sub clock
{
	return $node->safe_psql('postgres', 'SELECT clock_timestamp()');
}

# seconds from SINCE (read just before the claim) to a claim's expiry, to
# the ten seconds: the claim's ttl, however long the machine took since
sub ttl_of
{
	my ($scope, $key, $since) = @_;
	return $node->safe_psql('postgres',
		"SELECT round(extract(epoch FROM expires_at - '$since'::timestamptz) / 10) * 10 FROM dedup_lookup('$scope', '$key')"
	);
}

# the documented ways: a scope's own ttl, and SET LOCAL inside one transaction
my $before = clock();
is(pooled(q{SELECT dedup_claim('short-lived', 'a')}), 't', "a scope's ttl through the pooler");
is( pooled(
		'BEGIN', q{SET LOCAL dedup.default_ttl = '90s'},
		q{SELECT dedup_claim('local', 'a')}, 'COMMIT'),
	't',
	'SET LOCAL through the pooler');
pooled("SELECT dedup_claim('other-client', 'm-$_')") for 1 .. 20;
is(ttl_of('short-lived', 'a', $before), '90', "the scope's ttl");
is(ttl_of('local', 'a', $before), '90', 'the SET LOCAL ttl');
is( $node->safe_psql(
		'postgres', q{
SELECT count(*) FROM generate_series(1, 20) i, dedup_lookup('other-client', 'm-' || i) l
 WHERE l.expires_at BETWEEN now() + interval '23 hours 59 minutes' AND now() + interval '1 day 1 minute'}
	),
	'20',
	'20 claims of other clients after them keep the default 1 day');

# the hazard: a session-level SET stays on the shared server connection
pooled(q{SET dedup.default_ttl = '90s'});
$before = clock();
pooled(q{SELECT dedup_claim('leaked', 'a')});
is(ttl_of('leaked', 'a', $before), '90', 'a session SET leaks to the next client of its server connection');
pooled('RESET dedup.default_ttl');

# records and the relay through the pooler; the relay listens directly
is( pooled(
		q{SELECT (dedup_begin('http', 'idem-1')).outcome},
		q{SELECT dedup_complete('http', 'idem-1', 201, '{"id": 7}')},
		q{SELECT (dedup_begin('http', 'idem-1')).response}),
	qq{started\n\n{"id": 7}},
	'records through the pooler');
my ($listen_out, $listen_err) = ('', '');
my $listener = IPC::Run::start(
	[
		'psql', '-X', '-q', '-At', '-d', $node->connstr('postgres'),
		'-c', 'LISTEN dedup_outbox', '-c', 'SELECT pg_sleep(3)'
	],
	'>', \$listen_out, '2>', \$listen_err);
sleep 1;
for my $i (1 .. 3)
{
	pooled('BEGIN', "SELECT dedup_outbox_put('orders', 'e-$i-a', '{}')",
		"SELECT dedup_outbox_put('orders', 'e-$i-b', '{}')", 'COMMIT');
}
$listener->finish;
is( scalar(() = $listen_out =~ /Asynchronous notification "dedup_outbox" with payload "orders"/g),
	3, 'a direct LISTEN hears one notification per committed put transaction');
is(pooled(q{SELECT dedup_outbox_ack(array_agg(id)) FROM dedup_outbox_take('orders', 10)}),
	'6', 'take and ack through the pooler');

done_testing();
