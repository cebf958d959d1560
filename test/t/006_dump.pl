# pg_dump / pg_restore keep every claim, record, scope setting, outbox
# event, per-scope grant and sequence mark.  A database with all of them
# (claims of three key types, processing and complete records with
# responses, a released record's tombstone, scope settings, outbox events
# pending, in flight and dead, outbox keys, the outbox's sequence advanced:
# test/fixture) is dumped in custom format and restored into a new
# database, and dumped as plain SQL and replayed into another; CREATE
# EXTENSION comes from the dump.  Every dedup table must compare equal row
# for row, and the restored copies must behave as the original
# (fixture_check).
#
# Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.
use strict;
use warnings;
use DedupNode;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = DedupNode->create('dump');
$node->safe_psql('postgres', 'CREATE DATABASE src; CREATE DATABASE restored; CREATE DATABASE replayed;');
$node->safe_psql('src', 'CREATE EXTENSION dedup');
$node->fixture_fill('src');

# what psql prints of SQL in DB, its errors included
sub printed
{
	my ($db, $sql) = @_;
	my ($ret, $out, $err) = $node->psql($db, $sql);
	$err =~ s/^psql:[^:]*:\d+: //mg;
	return join("\n", grep { $_ ne '' } ($out, $err));
}
# the first match of RE in TEXT, or nothing
sub found { my ($text, $re) = @_; return $text =~ /($re)/ ? $1 : ''; }

# per-scope privileges: the grants (dedup.grants) and the EXECUTE they come with
$node->safe_psql('postgres', 'CREATE ROLE dump_app; CREATE ROLE dump_relay;');
$node->safe_psql('src', q{SELECT dedup_grant_usage('dump_app', ARRAY['orders', 'charges.*']),
                                 dedup_grant_relay('dump_relay', ARRAY['events'])});
sub grants_of    # the grants, and what each role may do, in database DB
{
	my ($db) = @_;
	return join("\n",
		$node->safe_psql($db, q{SELECT role || ' ' || privilege || ' ' || coalesce(scope, '(every)')
		                          FROM dedup_scope_privileges ORDER BY 1}),
		printed($db, q{SET ROLE dump_app; SELECT dedup_claim('orders', 'o-1');}),
		found(printed($db, q{SET ROLE dump_app; SELECT dedup_claim('other', 'x-1');}),
			qr/permission denied for scope "other"/),
		printed($db, q{SET ROLE dump_relay; SELECT count(*) FROM dedup_outbox_stats('events');}),
		found(printed($db, q{SET ROLE dump_relay; SELECT count(*) FROM dedup_outbox_stats('orders');}),
			qr/permission denied for scope "orders"/));
}
# sequence marks: a strict scope, streams with and without an epoch
$node->safe_psql('src', q{
SELECT dedup_set_scope('log', sequence_mode => 'strict');
SELECT dedup_advance('log', 'p-0', 41), dedup_advance('log', 'p-0', 42);
SELECT dedup_new_epoch('log', 'producer'), dedup_advance('log', 'producer', 7, epoch => 1);});
sub marks_of    # the marks, and how they decide, in database DB
{
	my ($db) = @_;
	return join("\n",
		$node->safe_psql($db, q{SELECT stream || ' ' || coalesce(mark::text, '-') || ' ' || coalesce(epoch::text, '-')
		                          FROM dedup_streams('log') ORDER BY 1}),
		$node->safe_psql($db, q{BEGIN; SELECT dedup_advance('log', 'p-0', 42), dedup_advance('log', 'p-0', 43); ROLLBACK;}),
		found(printed($db, q{SELECT dedup_advance('log', 'producer', 8, epoch => 0)}), qr/is fenced/),
		found(printed($db, q{SELECT dedup_advance('log', 'p-0', 45)}), qr/leaves a gap/));
}
# the claims in two time buckets: the fixture's in bucket 0, sealed, and one
# in bucket 1, a table of its own that inherits from dedup.claims
$node->safe_psql('src', q{
CALL dedup_cleanup();
UPDATE dedup.buckets SET opened_at = opened_at - interval '7 hours';
CALL dedup_cleanup();
SELECT dedup_claim('dump', 'in-bucket-1');});
sub buckets_of    # the buckets of database DB, and a claim of bucket 1's key
{
	my ($db) = @_;
	return $node->safe_psql($db, q{
SELECT string_agg(bucket || ':' || state::text || ':' || relid::text, ',' ORDER BY bucket) FROM dedup.buckets;
SELECT dedup_claim('dump', 'in-bucket-1');});
}
my $marks_before = marks_of('src');
note $marks_before;
my $grants_before = grants_of('src');
note $grants_before;
my $before = $node->fixture_snapshot('src');
note $before;

my $backup = PostgreSQL::Test::Utils::tempdir();
$node->command_ok([ 'pg_dump', '-Fc', '-f', "$backup/src.dump", 'src' ], 'pg_dump, custom format');
$node->command_ok([ 'pg_restore', '--exit-on-error', '-d', 'restored', "$backup/src.dump" ], 'pg_restore');
$node->command_ok([ 'pg_dump', '-f', "$backup/src.sql", 'src' ], 'pg_dump, plain SQL');
$node->command_ok([ 'psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-d', 'replayed', '-f', "$backup/src.sql" ],
	'the plain SQL replayed');

my $version = $node->safe_psql('src', q{SELECT extversion FROM pg_extension WHERE extname = 'dedup'});
for my $db ('restored', 'replayed')
{
	is($node->fixture_snapshot($db), $before, "$db: every dedup table equal to the source");
	is($node->safe_psql($db, q{SELECT extversion FROM pg_extension WHERE extname = 'dedup'}),
		$version, "$db: the extension is installed");
	is(grants_of($db), $grants_before, "$db: the scope grants, and what they allow and refuse");
	is(marks_of($db), $marks_before, "$db: the sequence marks, epochs and strict mode, and how they decide");
	$node->fixture_check($db);
	is(buckets_of($db), "0:s:dedup.claims,1:c:dedup.claims_1\nf",
		"$db: the buckets, and the claim in bucket 1 a duplicate");
	# pg_dump does not restore a bucket's dependency on the extension; the
	# cleanup records it again, so that DROP EXTENSION takes the bucket along
	$node->safe_psql($db, 'CALL dedup_cleanup(); DROP EXTENSION dedup;');
	is($node->safe_psql($db, q{SELECT count(*) FROM pg_class WHERE relname LIKE 'claims%'}),
		'0', "$db: DROP EXTENSION after the cleanup leaves nothing behind");
}

done_testing();
