# dedup_fingerprint(jsonb, text[]) is executable by PUBLIC, so its cost must
# stay linear in its input and a statement_timeout must stop it.  1.0
# deconstructed the ignore list once per top-level field and never checked
# for interrupts: 15,000 fields with a 15,000-name list ran 5-7 s past a
# 1 s statement_timeout with ~1.9 GB of backend memory.  Here:
#   - 15,000 x 15,000 under a 1 s statement_timeout answers, in under 1.5 s;
#   - 100,000 x 100,000 answers in under a second, with the backend's peak
#     memory (VmHWM, reset before the call) growing by less than 64 MB, and
#     the answer is right (every field ignored: the empty object's);
#   - a payload that takes longer than the statement_timeout to hash (2
#     million strings) is cancelled (57014) within the timeout + 0.5 s.
# (Was test/integration/fingerprint-cost.sh.)
#
# Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.
use strict;
use warnings;
use DedupNode;
use Test::More;
use Time::HiRes qw(time);

my $node = DedupNode->create('fpcost');
$node->safe_psql('postgres', 'CREATE EXTENSION dedup');

# seconds a statement took, as the server saw it
my $elapsed_sql = 'extract(epoch FROM clock_timestamp() - statement_timestamp())';

is( $node->safe_psql(
		'postgres', qq{
CREATE TABLE wide15k AS
SELECT (SELECT jsonb_object_agg('field-' || i, i) FROM generate_series(1, 15000) AS i) AS payload,
       (SELECT array_agg('field-' || i) FROM generate_series(1, 15000) AS i) AS ignore;
SET statement_timeout = '1s';
SELECT dedup_fingerprint(payload, ignore) = dedup_fingerprint('{}'::jsonb), $elapsed_sql < 1.5 FROM wide15k;}
	),
	't|t',
	'15,000 fields x 15,000 ignored names answer right, within 1.5 s, under a 1 s statement_timeout');

$node->safe_psql(
	'postgres', q{
CREATE TABLE wide100k AS
SELECT (SELECT jsonb_object_agg('field-' || i, i) FROM generate_series(1, 100000) AS i) AS payload,
       (SELECT array_agg('field-' || i) FROM generate_series(1, 100000) AS i) AS ignore});

# one session: read the input once, reset the backend's peak memory
# (/proc/PID/clear_refs, written by a program the backend starts), call,
# and read the peak again
my $out = $node->safe_psql(
	'postgres', q{
SELECT length(payload::text) + cardinality(ignore) > 0 AS warm FROM wide100k \gset
DO $$ BEGIN EXECUTE format('COPY (SELECT 5) TO PROGRAM %L', 'cat > /proc/' || pg_backend_pid() || '/clear_refs'); END $$;
SELECT substring(pg_read_file('/proc/self/status') FROM 'VmHWM:\s+(\d+) kB')::bigint AS before \gset
SELECT dedup_fingerprint(payload, ignore) = dedup_fingerprint('{}'::jsonb) AS right,
       extract(epoch FROM clock_timestamp() - statement_timestamp()) AS seconds
  FROM wide100k \gset
SELECT :'right', :seconds < 1.0, :seconds,
       substring(pg_read_file('/proc/self/status') FROM 'VmHWM:\s+(\d+) kB')::bigint - :before AS grown_kb;});
note "100,000 x 100,000: $out (right|fast|seconds|peak memory grown, kB)";
my ($right, $fast, $seconds, $grown) = split /\|/, $out;
is($right, 't', '100,000 fields x 100,000 ignored names answer right');
is($fast, 't', "100,000 fields x 100,000 ignored names answer in under a second (${seconds}s)");
ok(defined $grown && $grown =~ /^-?\d+$/ && $grown < 65536,
	"100,000 fields x 100,000 ignored names grow the backend's peak memory by under 64 MB ("
	  . ($grown // '?') . ' kB)');

$node->safe_psql('postgres',
	q{CREATE TABLE long2m AS SELECT (SELECT jsonb_agg(repeat('x', 40) || i) FROM generate_series(1, 2000000) AS i) AS payload}
);
my (undef, $uncancelled) = split /\|/,
  $node->safe_psql('postgres', "SELECT dedup_fingerprint(payload) IS NOT NULL, $elapsed_sql FROM long2m");
my $start = time;
my ($ret, $stdout, $err) =
  $node->psql('postgres', "SET statement_timeout = '20ms'; SELECT dedup_fingerprint(payload) FROM long2m");
my $took = sprintf '%.3f', time - $start;
note "2,000,000 strings: ${uncancelled}s to hash; with statement_timeout 20ms: ${took}s, $err";
like($err, qr/canceling statement due to statement timeout/,
	'hashing 2,000,000 strings is cancelled by statement_timeout');
cmp_ok($took, '<', 0.52, "the cancellation comes within the timeout + 0.5 s (${took}s)");

done_testing();
