# The history tier (history.c) through crashes, a standby and its
# promotion, and pg_dump / pg_restore.  A scope with a history (rate 0.01)
# claims 100,000 keys into a bucket, which is switched, sealed and expired
# by hand; then:
#   1. the server is killed (SIGKILL) while the fold's transaction has
#      folded and not committed: nothing is folded, the bucket is still
#      read, every key is still a duplicate; the fold runs again and folds
#      each key once; then killed 0.1 s into the fold of a second bucket:
#      the fold is whole or absent, never partial, and done once;
#   2. killed again just after a fold commits: the fold is there after
#      crash recovery, every folded key answered "history" (no false
#      negative), the bucket gone;
#   3. a streaming standby made from a base backup replays a fourth fold of
#      100,000 more keys: it answers dedup_seen() as the primary does, for
#      the folded keys and for 20,000 never claimed; promoted, its claims of
#      the folded keys are duplicates;
#   4. pg_dump / pg_restore of the database: the restored history answers as
#      the original did.
# The fold runs with maintenance_work_mem at 1MB, in several passes.
#
# Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.
use strict;
use warnings;
use DedupNode;
use IPC::Run;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep);

my $primary = DedupNode->create(
	'primary',
	streaming => 1,
	conf => [
		"wal_keep_size = '64MB'", 'hot_standby = on',
		'restart_after_crash = off', "maintenance_work_mem = '1MB'",
		'dedup.cleanup_enabled = off'
	]);
$primary->safe_psql('postgres', 'CREATE DATABASE app');
$primary->safe_psql('app', q{
CREATE EXTENSION dedup;
SELECT dedup_set_scope('h', ttl => '1 hour', history => '1 day', false_positive_rate => 0.01);
SELECT deleted FROM dedup_cleanup_batch(3::bigint << 32);});

sub sql { my ($sql, $node, $db) = @_; return ($node || $primary)->safe_psql($db || 'app', $sql); }

# claim N keys PREFIX-1..N into the current bucket, switch it, seal it and
# expire its rows (as the clock would): the next retire step folds it
sub fill_bucket
{
	my ($prefix, $n) = @_;
	my $batches = $n / 10000 - 1;
	sql(qq{
SELECT count(*) FROM generate_series(0, $batches) b,
  LATERAL dedup_claim_batch('h', ARRAY(SELECT '$prefix-' || (b * 10000 + g) FROM generate_series(1, 10000) g));
UPDATE dedup.buckets SET opened_at = opened_at - interval '7 hours' WHERE state = 'c';});
	sql('SELECT deleted FROM dedup_cleanup_batch((3::bigint << 32) + 0)');
	sql('SELECT deleted FROM dedup_cleanup_batch((3::bigint << 32) + 1)');
	sql('SELECT deleted FROM dedup_cleanup_batch((3::bigint << 32) + 2)');
	sql(q{
DO $$ DECLARE b record; BEGIN
  FOR b IN SELECT relid FROM dedup.buckets WHERE state = 's' LOOP
    EXECUTE format('UPDATE %s SET expires_at = now() - interval ''1 minute''', b.relid);
  END LOOP;
  UPDATE dedup.buckets SET max_expires_at = now() - interval '1 minute' WHERE state = 's';
END $$;});
	return;
}
sub fold { sql('SELECT deleted FROM dedup_cleanup_batch((3::bigint << 32) + 3)'); return; }
sub seen    # PREFIX N [NODE DB]: how many of PREFIX-1..N dedup_seen() answers "history"
{
	my ($prefix, $n, $node, $db) = @_;
	return sql(qq{SELECT count(*) FILTER (WHERE dedup_seen('h', '$prefix-' || g) = 'history') FROM generate_series(1, $n) g},
		$node, $db);
}
sub folded { my ($node) = @_; return sql('SELECT coalesce(sum(keys), 0) FROM dedup.history_generations', $node); }
# same_answers WHAT NODE DB: dedup_seen answers there as on the primary, for
# every bucket's keys and for keys never claimed
sub same_answers
{
	my ($what, $node, $db) = @_;
	for my $prefix (qw(a b c d never))
	{
		my $n = $prefix eq 'never' ? 20000 : 100000;
		is(seen($prefix, $n, $node, $db), seen($prefix, $n), "$what answers as the primary for $prefix");
	}
	return;
}
my $sealed_claims = q{SELECT claims FROM dedup.buckets WHERE state = 's'};

fill_bucket('a', 100000);
my $claimed_a = sql($sealed_claims);
note "bucket a: $claimed_a of 100000 keys new";
is($claimed_a, '100000', 'the sealed bucket holds the claims');

# 1. killed after the fold's transaction folded and before it committed,
# then at a moment of the next fold's run: nothing is folded but by a
# commit, and a fold that committed is whole
my $connstr = $primary->connstr('app');
my $folding = IPC::Run::start(
	[
		'psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-d', $connstr, '-c', 'BEGIN',
		'-c', 'SELECT deleted FROM dedup_cleanup_batch((3::bigint << 32) + 3)',
		'-c', 'SELECT pg_sleep(60)'
	],
	'>', \my $out1, '2>', \my $err1);
ok( $primary->poll_within(
		60, 'app',
		q{SELECT count(*) FROM pg_stat_activity WHERE query LIKE '%pg_sleep(60)%' AND state = 'active' AND pid <> pg_backend_pid()},
		'1'),
	'a fold folded and waits to commit');
ok($primary->crash_restart, 'killed before the fold committed, the server started again');
$folding->finish;
is(folded(), '0', 'a fold that did not commit folded nothing');
is(sql('SELECT state FROM dedup.buckets WHERE bucket = 0'), 's', 'its bucket is still sealed and read');
is(seen('a', 100000), '100000', 'every key still a duplicate, from the bucket');
fold();
is(folded(), $claimed_a, 'the fold folded each key once');
is(seen('a', 100000), '100000', 'no false negative');
sql('SELECT deleted FROM dedup_cleanup_batch((3::bigint << 32) + 4)');

fill_bucket('b', 100000);
my $claimed_b = sql($sealed_claims);
note "bucket b: $claimed_b of 100000 keys new (the others answered by the history: false positives)";
$folding = IPC::Run::start(
	[ 'psql', '-X', '-q', '-d', $connstr, '-c', 'SELECT deleted FROM dedup_cleanup_batch((3::bigint << 32) + 3)' ],
	'>', \my $out2, '2>', \my $err2);
sleep 0.1;
ok($primary->crash_restart, 'killed 0.1 s into the fold of bucket b, the server started again');
$folding->finish;
my $after_kill = folded();
note "killed 0.1 s into the fold of bucket b: $after_kill keys folded, buckets "
  . sql(q{SELECT string_agg(state::text, ' ' ORDER BY bucket) FROM dedup.buckets});
ok($after_kill == $claimed_a || $after_kill == $claimed_a + $claimed_b,
	"the fold is whole or absent, never partial ($after_kill keys folded)");
fold() if $after_kill == $claimed_a;
is(folded(), $claimed_a + $claimed_b, 'bucket b folded once');

# 2. killed just after a fold committed: crash recovery keeps it
fill_bucket('c', 100000);
my $claimed_c = sql($sealed_claims);
fold();
ok($primary->crash_restart, 'killed just after a fold committed, the server started again');
is(folded(), $claimed_a + $claimed_b + $claimed_c, 'after the crash: all three folds');
for my $prefix (qw(a b c))
{
	is(seen($prefix, 100000), '100000', "after the crash: no false negative in $prefix");
}
sql('SELECT deleted FROM dedup_cleanup_batch((3::bigint << 32) + 4)');
is(sql(q{SELECT count(*) FROM dedup.buckets WHERE state <> 'c'}), '0', 'the folded buckets are gone');
is( sql(q{SELECT count(*) FROM generate_series(0, 9) b, LATERAL dedup_claim_batch('h', ARRAY(SELECT 'a-' || (b * 10000 + g) FROM generate_series(1, 10000) g))}),
	'0', 'claims of folded keys are duplicates');
my $absent_primary = seen('never', 20000);
note qq{never-claimed keys answered "history" on the primary: $absent_primary of 20000};
cmp_ok($absent_primary, '<', 400, 'no more false positives than the rate (0.01) allows');

# 3. a standby replays a fold and answers as the primary
$primary->backup('base');
my $standby = DedupNode->new('standby');
$standby->init_from_backup($primary, 'base', has_streaming => 1);
$standby->start;
fill_bucket('d', 100000);
fold();
my $want = folded();
ok($standby->poll_within(60, 'app', 'SELECT coalesce(sum(keys), 0) FROM dedup.history_generations', $want),
	'the standby replayed the fourth fold');
same_answers('the standby', $standby, 'app');
$primary->stop;
$standby->promote;
ok($standby->poll_within(30, 'app', 'SELECT pg_is_in_recovery()', 'f'), 'the standby is promoted');
is( sql(q{SELECT count(*) FROM generate_series(0, 9) b, LATERAL dedup_claim_batch('h', ARRAY(SELECT 'd-' || (b * 10000 + g) FROM generate_series(1, 10000) g))},
		$standby),
	'0', 'promoted: claims of folded keys are duplicates');
$primary->start;

# 4. pg_dump / pg_restore: the restored history answers as the original
$primary->safe_psql('postgres', 'CREATE DATABASE restored');
my $dump = PostgreSQL::Test::Utils::tempdir() . '/app.dump';
$primary->command_ok([ 'pg_dump', '-Fc', '-f', $dump, 'app' ], 'pg_dump of the database');
$primary->command_ok([ 'pg_restore', '--exit-on-error', '-d', 'restored', $dump ], 'pg_restore into another');
same_answers('the restored database', $primary, 'restored');
my $generations =
  q{SELECT string_agg(generation || ':' || keys || ':' || nblocks, ' ' ORDER BY generation) FROM dedup.history_generations};
is(sql($generations, $primary, 'restored'), sql($generations), 'restored: the same generations');

done_testing();
