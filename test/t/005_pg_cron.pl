# The cleanup without preloading dedup (managed PostgreSQL), scheduled by
# pg_cron exactly as the README shows it.  pg_cron lives in database
# postgres, dedup in database app; the job runs CALL dedup_cleanup() there
# every minute (pg_cron 1.4 has no shorter schedule, so this test waits for
# the next minute).  The job must succeed and delete exactly the expired
# rows; the shared-memory figures and scope counters are absent without
# preload (55000).
#
# Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.
use strict;
use warnings;
use DedupNode;
use Test::More;

my $node = DedupNode->create('pgcron', preload => 'pg_cron', start => 0);
# pg_cron's jobs connect through the node's socket directory
$node->append_conf('postgresql.conf', "cron.host = '" . $node->host . "'");
$node->start;

$node->safe_psql('postgres', 'CREATE EXTENSION pg_cron; CREATE DATABASE app;');
$node->safe_psql('app', q{
CREATE EXTENSION dedup;
SELECT count(*) FROM dedup_claim_batch('s', ARRAY(SELECT 'live-' || i FROM generate_series(1, 500) i), ttl => '1 hour');
CREATE TABLE live AS SELECT key FROM dedup.claims;
SELECT count(*) FROM dedup_claim_batch('s', ARRAY(SELECT 'gone-' || i FROM generate_series(1, 1000) i), ttl => '1 second');
SELECT (dedup_begin('s', 'rec')).outcome;
SELECT dedup_complete('s', 'rec', 200, '{}');
UPDATE dedup.claims SET expires_at = now() - interval '1 second' WHERE (record).status IS NOT NULL;});

# the README's line, run in the cron database
my $job = $node->safe_psql('postgres',
	q{SELECT cron.schedule_in_database('dedup-cleanup', '* * * * *', 'CALL dedup_cleanup()', 'app')});
note "scheduled job $job; waiting for the next minute";
ok( $node->poll_within(
		90, 'postgres',
		"SELECT status || ' ' || return_message FROM cron.job_run_details WHERE jobid = $job AND status <> 'running' ORDER BY runid LIMIT 1",
		'succeeded 1 row'),
	'the job ran and succeeded');
is( $node->safe_psql('app',
		'SELECT count(*) FROM dedup.claims c FULL JOIN live l USING (key) WHERE c.key IS NULL OR l.key IS NULL'),
	'0', 'exactly the live rows are left');
is($node->safe_psql('app', 'SELECT count(*) FROM dedup.claims'), '500', 'live count');
$node->safe_psql('postgres', q{SELECT cron.unschedule('dedup-cleanup')});

# without preload there are no shared-memory figures: a clear error
is($node->sqlstate('app', 'SELECT * FROM dedup_cleanup_stats()'), 'ERROR:  55000', 'figures need preload');
is($node->sqlstate('app', 'SELECT * FROM dedup_scope_stats()'), 'ERROR:  55000', 'scope counters need preload');
is($node->safe_psql('app', q{SELECT dedup_claim('no-counters', 'k')}), 't',
	'claims count nothing without preload, and work');
is($node->safe_psql('app', q{SELECT count(*) FROM pg_stat_activity WHERE backend_type LIKE 'dedup%'}), '0',
	'no cleanup worker without preload');

done_testing();
