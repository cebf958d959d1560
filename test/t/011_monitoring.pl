# The metrics, through the real exporter.  A known workload (claims, a
# batch, records, outbox puts, takes, acks and nacks, a cleanup pass), then
# Debian's prometheus-postgres-exporter with monitoring/postgres_exporter.yaml,
# connected as a role with pg_monitor and relay of one topic, is scraped:
# every dedup_* value must be what the workload did.  The alert rules
# (monitoring/dedup-alerts.yml) pass promtool check rules.  Skipped when
# the exporter or promtool is not installed (Debian's
# prometheus-postgres-exporter and prometheus; scripts/test installs them
# on the host).  (Was test/integration/monitoring.sh.)
#
# Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.
use strict;
use warnings;
use DedupNode;
use HTTP::Tiny;
use IPC::Run;
use Test::More;

sub find_program
{
	my ($name) = @_;
	my ($path) = grep { -x } map { "$_/$name" } split(/:/, $ENV{PATH} || ''), '/usr/bin';
	return $path;
}
my $exporter_bin = find_program('prometheus-postgres-exporter');
my $promtool = find_program('promtool');
plan skip_all =>
  'the exporter or promtool is not installed (Debian packages prometheus-postgres-exporter, prometheus)'
  unless $exporter_bin && $promtool;

my $node = DedupNode->create('monitoring');
$node->safe_psql(
	'postgres', q{
CREATE EXTENSION dedup;
CREATE ROLE dedup_monitor LOGIN IN ROLE pg_monitor;
SELECT dedup_grant_relay('dedup_monitor', ARRAY['orders']);});

# the workload
$node->safe_psql(
	'postgres', q{
SELECT dedup_claim('payments', 'm-' || i) FROM generate_series(1, 5) i;      -- 5 new
SELECT dedup_claim('payments', 'm-' || i) FROM generate_series(1, 3) i;      -- 3 duplicates
SELECT count(*) FROM dedup_claim_batch('payments', ARRAY['m-1', 'm-6', 'm-7', 'm-7']);  -- 2 new, 1 duplicate
SELECT dedup_begin('http', 'k-1'), dedup_begin('http', 'k-2');               -- 2 started
SELECT dedup_complete('http', 'k-1', 200, '{}');                             -- 1 completed
SELECT dedup_begin('http', 'k-1');                                           -- 1 replay
SELECT dedup_release('http', 'k-2');                                         -- 1 released
SELECT dedup_outbox_put('orders', 'e-' || i, '{}') FROM generate_series(1, 3) i;  -- 3 put
SELECT dedup_outbox_put('orders', 'e-1', '{}');                              -- a retry: not new
CREATE TEMP TABLE taken AS SELECT id FROM dedup_outbox_take('orders', 2);   -- 2 taken
SELECT dedup_outbox_ack(ARRAY(SELECT id FROM taken ORDER BY id LIMIT 1));    -- 1 acked
SELECT dedup_outbox_nack(ARRAY(SELECT id FROM taken ORDER BY id OFFSET 1), '1 hour');  -- 1 nacked
-- 4 claims expired a minute ago, deleted by one cleanup pass
SELECT dedup_claim('expiring', 'x-' || i, ttl => '1 second') FROM generate_series(1, 4) i;});
$node->safe_psql('postgres',
	q{UPDATE dedup.claims SET expires_at = now() - interval '1 minute' WHERE expires_at < now() + interval '1 minute'});
$node->safe_psql('postgres', 'VACUUM ANALYZE dedup.claims');
$node->safe_psql('postgres', 'CALL dedup_cleanup()');

# the exporter, as dedup_monitor, with dedup's query file only
my $eport = PostgreSQL::Test::Cluster::get_free_port();
my $exporter_log = PostgreSQL::Test::Utils::tempdir() . '/exporter.log';
local $ENV{DATA_SOURCE_NAME} =
  'host=' . $node->host . ' port=' . $node->port . ' user=dedup_monitor dbname=postgres sslmode=disable';
my $exporter = IPC::Run::start(
	[
		$exporter_bin, "--web.listen-address=127.0.0.1:$eport",
		'--extend.query-path=' . DedupNode::tree_file('monitoring/postgres_exporter.yaml'),
		'--disable-default-metrics', '--disable-settings-metrics'
	],
	'>', $exporter_log, '2>&1');
# (local: kill_kill sets $?, which an END block leaves as the exit status)
END { local $?; $exporter->kill_kill if $exporter; }

my $metrics = '';
for (1 .. 50)
{
	my $response = HTTP::Tiny->new(timeout => 10)->get("http://127.0.0.1:$eport/metrics");
	$metrics = $response->{content} if $response->{success};
	last if $metrics =~ /^dedup_/m;
	select(undef, undef, undef, 0.2);
}
ok($metrics =~ /^dedup_/m, 'the exporter serves dedup_ metrics')
  or diag PostgreSQL::Test::Utils::slurp_file($exporter_log);

# value(NAME, LABEL => VALUE...): the sample of NAME whose labels include them all
sub value
{
	my ($name, %labels) = @_;
	my @found;
	for my $line (split /\n/, $metrics)
	{
		next unless index($line, "$name\{") == 0;
		next if grep { index($line, qq{$_="$labels{$_}"}) < 0 } keys %labels;
		push @found, (split / /, $line)[-1];
	}
	return join(' ', @found);
}
# type_of(NAME): its # TYPE
sub type_of
{
	my ($name) = @_;
	return $metrics =~ /^# TYPE \Q$name\E (\S+)$/m ? $1 : '';
}

# every value the workload leaves: the metric, its labels, the value, what it counts
for my $want (
	[ 'dedup_scope_claims', { scope => 'payments', datname => 'postgres' }, 7, 'claims' ],
	[ 'dedup_scope_duplicates', { scope => 'payments' }, 4, 'duplicates' ],
	[ 'dedup_scope_records_started', { scope => 'http' }, 2, 'records started' ],
	[ 'dedup_scope_records_replayed', { scope => 'http' }, 1, 'records replayed' ],
	[ 'dedup_scope_records_completed', { scope => 'http' }, 1, 'records completed' ],
	[ 'dedup_scope_records_released', { scope => 'http' }, 1, 'records released' ],
	[ 'dedup_topic_events_put', { topic => 'orders' }, 3, 'events put' ],
	[ 'dedup_topic_events_taken', { topic => 'orders' }, 2, 'events taken' ],
	[ 'dedup_topic_events_acked', { topic => 'orders' }, 1, 'events acked' ],
	[ 'dedup_topic_events_nacked', { topic => 'orders' }, 1, 'events nacked' ],
	[ 'dedup_outbox_pending', { topic => 'orders' }, 2, 'outbox pending' ],
	[ 'dedup_outbox_in_flight', { topic => 'orders' }, 0, 'outbox in flight' ],
	[ 'dedup_outbox_dead', { topic => 'orders' }, 0, 'outbox dead' ],
	[ 'dedup_cleanup_rows_deleted', { kind => 'claim', datname => 'postgres' }, 4, 'claims deleted' ],
	[ 'dedup_cleanup_errors', { kind => 'claim' }, 0, 'cleanup errors' ],
	[ 'dedup_settings_default_ttl_seconds', {}, 86400, 'default ttl' ],
	[ 'dedup_table_rows_estimate', { table => 'claims' }, 13, 'claims table rows' ],
  )
{
	my ($name, $labels, $value, $what) = @$want;
	is(value($name, %$labels), $value, $what);
}
is(type_of('dedup_scope_claims'), 'counter', 'a counter is a counter');
is(type_of('dedup_outbox_pending'), 'gauge', 'a gauge is a gauge');
my $lag = value('dedup_cleanup_lag_seconds', kind => 'claim');
ok($lag =~ /^[0-9.e+-]+$/ && $lag > 0 && $lag < 60, "cleanup lag [$lag] within (0, 60) s");

my ($out, $err) = ('', '');
ok( IPC::Run::run(
		[ $promtool, 'check', 'rules', DedupNode::tree_file('monitoring/dedup-alerts.yml') ],
		'>', \$out, '2>', \$err),
	'the alert rules pass promtool check rules')
  or diag "$out$err";

note join("\n", grep { /^dedup_/ } split /\n/, $metrics);

done_testing();
