# Upgrades.  1.0 is the first released version: its install script is
# frozen (sql/released.sha256; a change after a release goes into an update
# script and a new default_version, whose install script the Makefile builds
# from the parts in sql/, and whose update script it builds from the
# hand-written schema and data steps sql/updates/OLD--NEW.pre.sql and
# .post.sql around the same function parts; a released update script is
# kept as sql/updates/dedup--OLD--NEW.sql and frozen).  The test checks that
# every script shipped is the one installed (Makefile DATA), that every
# script of a version older than the default one is listed as released, that
# the default version has its own install script (so that the fresh install
# is not the update under test), that every installable version has an
# update path to the default version, and then, for every installable
# version V (the default one included): CREATE EXTENSION dedup VERSION 'V',
# fill it with every kind of row (test/fixture), grant an application role
# and a relay role their functions, ALTER EXTENSION dedup UPDATE, and compare
#   - every dedup table, row for row, with what it held before the update;
#   - the roles' privileges: every function privilege they had before (an
#     update that recreates a function must grant it again; but for
#     dedup_scope and dedup_lookup(text, text), whose results 1.1 changed: a
#     grant by the update would become an initial privilege), then, once the
#     grant helpers are run again as the README says (an update cannot grant
#     functions it adds without making the grant an initial privilege that
#     pg_dump would leave out), equal to a fresh install's; and their scope
#     grants: 1.0's grants become every-scope grants of dedup.grants, and
#     the roles go on working on every scope, before the grant helpers run
#     again and after;
#   - the extension's schema with a fresh install of the default version:
#     its version, configuration tables and their conditions, member objects
#     with their privileges and initial privileges, and pg_dump's schema of
#     every member (definitions, defaults, indexes, triggers, comments);
#   - behaviour: the old rows still deduplicate, replay and relay;
#   - DROP EXTENSION leaves no dedup object behind.
# An update over a 1.0 setting that 1.1 cannot apply is refused (22023),
# naming it.  The comparison is shown to fail: four copies of the fresh
# install, each with one difference an update script could leave (a
# privilege, a comment, a missing index, an object not made a member), must
# each compare unequal.  Runs on every major of the test matrix (scripts/test
# runs the TAP tests in each chroot).  (Was test/integration/upgrade.sh.)
#
# Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.
use strict;
use warnings;
use DedupNode;
use Digest::SHA;
use File::Basename qw(basename);
use File::Compare ();
use IPC::Run;
use PostgreSQL::Test::Utils;
use Test::More;

my $root = DedupNode::tree_file('');
$root =~ s{/$}{};
my ($default) = slurp_file("$root/dedup.control") =~ /^default_version = '(.*)'$/m;
ok(defined $default, "dedup.control names its default version");
ok(-f "$root/dedup--$default.sql",
	"the default version $default has its own install script, built from sql/'s parts");

my $node = DedupNode->create('upgrade');
my $tmp = PostgreSQL::Test::Utils::tempdir();

# the scripts shipped: released install scripts, update scripts, the built one
# (the update scripts of a version not yet released are built as well)
my $sharedir = $node->safe_psql('postgres', q{SELECT setting FROM pg_config WHERE name = 'SHAREDIR'})
  . '/extension';
my @scripts = (glob("$root/sql/dedup--*.sql"), glob("$root/sql/updates/dedup--*.sql"), glob("$root/dedup--*.sql"));
for my $f (@scripts)
{
	is(File::Compare::compare($f, "$sharedir/" . basename($f)) == 0 ? 'same' : 'differs',
		'same', basename($f) . ' is installed as it is in the repository (Makefile DATA)');
}
# sql/released.sha256, as sha256sum --check reads it: every line a digest
# and a file, each file there with that digest
my (%released, @changed);
for my $line (split /\n/, slurp_file("$root/sql/released.sha256"))
{
	if ($line !~ /^([0-9a-f]{64})  (.+)$/)
	{
		push @changed, "malformed line [$line]";
		next;
	}
	my ($digest, $name) = ($1, $2);
	$released{$name} = 1;
	push @changed, $name
	  unless -f "$root/sql/$name" && Digest::SHA->new(256)->addfile("$root/sql/$name")->hexdigest eq $digest;
}
push @changed, 'no script listed' unless %released;
is(join(' ', @changed) || 'unchanged', 'unchanged',
	'released install and update scripts are unchanged (sql/released.sha256)');

# version_before(A, B): whether version A sorts before B (sort -V's order)
sub version_before
{
	my @a = split /\./, $_[0];
	my @b = split /\./, $_[1];
	while (@a || @b)
	{
		my ($x, $y) = (shift(@a) // -1, shift(@b) // -1);
		return $x < $y if $x != $y;
	}
	return 0;
}
my @unlisted;
for my $f (@scripts)    # a script's version is the last one in its name
{
	(my $v = basename($f, '.sql')) =~ s/.*--//;
	push @unlisted, basename($f)
	  if $v ne $default && version_before($v, $default) && !$released{ basename($f) };
}
is(join(' ', @unlisted) || 'none', 'none', "every script of a version before $default is listed in sql/released.sha256");

is($node->safe_psql('postgres', q{SELECT default_version FROM pg_available_extensions WHERE name = 'dedup'}),
	$default, "the server's default version is the control file's");
$node->safe_psql('postgres', 'CREATE ROLE upgrade_app; CREATE ROLE upgrade_relay;');

sub grant_roles
{
	my ($db) = @_;
	$node->safe_psql($db, q{SELECT dedup_grant_usage('upgrade_app'), dedup_grant_relay('upgrade_relay')});
	return;
}

# the functions each role may execute, one line a role; then its scope grants
sub privileges_of
{
	my ($db) = @_;
	my @out = $node->safe_psql(
		$db, q{
SELECT r || ': ' || string_agg(p.oid::regprocedure::text, ' ' ORDER BY p.oid::regprocedure::text)
  FROM unnest(ARRAY['upgrade_app', 'upgrade_relay']) AS r, pg_proc AS p
 WHERE p.proname LIKE 'dedup%' AND has_function_privilege(r, p.oid, 'EXECUTE')
   AND NOT has_function_privilege('public', p.oid, 'EXECUTE')
 GROUP BY r ORDER BY r});
	push @out,
	  $node->safe_psql($db,
		q{SELECT 'scope grant: ' || role || ' ' || privilege || ' ' || coalesce(scope, 'every scope')
		    FROM dedup.grants ORDER BY 1})
	  if $node->safe_psql($db, q{SELECT to_regclass('dedup.grants') IS NOT NULL}) eq 't';
	return join "\n", grep { $_ ne '' } @out;
}

my @versions = split /\n/,
  $node->safe_psql('postgres',
	q{SELECT version FROM pg_available_extension_versions WHERE name = 'dedup'
	   ORDER BY string_to_array(version, '.')::int[]});
note "installable versions: @versions; default $default";
is( $node->safe_psql(
		'postgres', qq{SELECT coalesce(string_agg(source, ' '), 'all') FROM pg_extension_update_paths('dedup')
		                WHERE target = '$default' AND source <> target AND path IS NULL}),
	'all',
	"every installable version has an update path to $default");

# The extension's schema in database DB, as a fresh install would show it.
# Member objects are dumped by pg_dump only as CREATE EXTENSION, so a copy of
# the database gives every member back to the schema (ALTER EXTENSION DROP,
# after listing the members and their privileges) and pg_dump -s describes
# them one by one.
sub schema_of
{
	my ($db) = @_;
	my $copy = "${db}_schema";
	$node->safe_psql('postgres', "CREATE DATABASE $copy TEMPLATE $db");
	my $members = $node->safe_psql(
		$copy, q{
SELECT 'extension ' || extversion || ' in ' || extnamespace::regnamespace
       || CASE WHEN extrelocatable THEN ' relocatable' ELSE '' END
  FROM pg_extension WHERE extname = 'dedup';
SELECT 'config ' || c::regclass || ' ' || quote_literal(cond)
  FROM pg_extension, unnest(extconfig, extcondition) AS u(c, cond)
 WHERE extname = 'dedup' ORDER BY 1;
-- a table's row type and a type's array type go with the table and the type:
-- 17 records them as members too (15 does not), and drops them with them
CREATE TEMP VIEW members AS
SELECT d.classid, d.objid, o.type, o.identity
  FROM pg_depend AS d CROSS JOIN LATERAL pg_identify_object(d.classid, d.objid, d.objsubid) AS o
 WHERE d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e'
   AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'dedup')
   AND NOT (d.classid = 'pg_type'::regclass AND d.objid IN (
       SELECT typarray FROM pg_type
       UNION ALL
       SELECT t.oid FROM pg_type AS t JOIN pg_class AS c ON c.oid = t.typrelid WHERE c.relkind <> 'c'));
SELECT 'member ' || m.type || ' ' || m.identity
       || coalesce(' acl ' || (SELECT string_agg(a::text, ',' ORDER BY a::text) FROM unnest(CASE m.classid
              WHEN 'pg_proc'::regclass THEN (SELECT proacl FROM pg_proc WHERE oid = m.objid)
              WHEN 'pg_class'::regclass THEN (SELECT relacl FROM pg_class WHERE oid = m.objid)
              WHEN 'pg_type'::regclass THEN (SELECT typacl FROM pg_type WHERE oid = m.objid)
              WHEN 'pg_namespace'::regclass THEN (SELECT nspacl FROM pg_namespace WHERE oid = m.objid)
          END) AS a), '')
       || coalesce(' init ' || (SELECT string_agg(p.objsubid || ' ' || p.initprivs::text, ' ')
                                  FROM pg_init_privs AS p
                                 WHERE p.classoid = m.classid AND p.objoid = m.objid), '')
  FROM members AS m ORDER BY 1;
SELECT format('ALTER EXTENSION dedup DROP %s %s', type, identity) FROM members \gexec
});
	my ($dump, $err) = ('', '');
	IPC::Run::run([ 'pg_dump', '--schema-only', '-d', $node->connstr($copy) ], '>', \$dump, '2>', \$err)
	  or die "pg_dump of $copy failed: $err";
	# pg_dump's \restrict KEY and \unrestrict KEY lines hold a random key
	$dump = join '', grep { !/^\\(un)?restrict / } split /^/, $dump;
	$node->safe_psql('postgres', "DROP DATABASE $copy");
	return "$members\n$dump";
}

# same_text(GOT, WANT, NAME): GOT is WANT, and their diff when not
sub same_text
{
	my ($got, $want, $name) = @_;
	my $same = $got eq $want;
	ok($same, $name);
	if (!$same)
	{
		append_to_file("$tmp/want", $want);
		append_to_file("$tmp/got", $got);
		my ($diff, $err) = ('', '');
		IPC::Run::run([ 'diff', '-u', "$tmp/want", "$tmp/got" ], '>', \$diff, '2>', \$err);
		diag $diff;
		unlink "$tmp/want", "$tmp/got";
	}
	return $same;
}

$node->safe_psql('postgres', 'CREATE DATABASE fresh');
$node->safe_psql('fresh', 'CREATE EXTENSION dedup');
grant_roles('fresh');
my $fresh_privileges = privileges_of('fresh');
note $fresh_privileges;
is(scalar(() = $fresh_privileges =~ /^upgrade_app: .*dedup_claim\(text,text,interval,boolean\)/mg),
	1, 'the application role may claim');
is(scalar(() = $fresh_privileges =~ /^upgrade_relay: .*dedup_outbox_take\(text,integer\)/mg),
	1, 'the relay role may take');
my $fresh_schema = schema_of('fresh');
is(scalar(() = $fresh_schema =~ /^member function public\.dedup_claim\(/mg),
	5, "the fresh install's schema lists its members");

sub extversion
{
	my ($db) = @_;
	return $node->safe_psql($db, q{SELECT extversion FROM pg_extension WHERE extname = 'dedup'});
}

# the application role claims a key of the fixture (a duplicate), the
# relay role reads every topic's figures
my $roles_at_work = q{SET ROLE upgrade_app; SELECT dedup_claim('orders', 'o-1');
SET ROLE upgrade_relay; SELECT count(*) FROM dedup_outbox_stats();};

for my $v (@versions)
{
	(my $db = "from_$v") =~ s/[^0-9a-z_]/_/g;
	$node->safe_psql('postgres', "CREATE DATABASE $db");
	$node->safe_psql($db, "CREATE EXTENSION dedup VERSION '$v'");
	is(extversion($db), $v, "$db: installed at version $v");
	$node->fixture_fill($db);
	grant_roles($db);
	my $before = $node->fixture_snapshot($db);
	# dedup_scope and dedup_lookup(text, text), whose results 1.1 changed,
	# are made again by the update: their grants come back with the grant
	# helpers, as a new function's do
	my @lines = grep { !/^scope grant: / } split /\n/, privileges_of($db);
	s/ dedup_scope\(text\)//, s/ dedup_lookup\(text,text\)// for @lines;
	my $privileges_before = join "\n", @lines;
	$node->safe_psql($db, 'ALTER EXTENSION dedup UPDATE');
	is(extversion($db), $default, "$db: updated to $default");
	same_text($node->fixture_snapshot($db), $before, "$db: every dedup table as before the update");
	# of each role's functions now, those it had before: all of them
	my %had;
	for my $line (split /\n/, $privileges_before)
	{
		my ($role, @functions) = split / /, $line;
		$had{"$role $_"} = 1 for @functions;
	}
	my $kept = join "\n", map {
		my ($role, @functions) = split / /;
		join ' ', $role, grep { $had{"$role $_"} } @functions
	} grep { !/^scope grant: / } split /\n/, privileges_of($db);
	same_text($kept, $privileges_before, "$db: the roles keep every function privilege they had");
	# and their grants keep their meaning before the grant helpers run again:
	# 1.0's EXECUTE grants are every-scope grants of dedup.grants
	# (sql/updates/1.0--1.1.post.sql), and the roles work on every scope
	same_text(join("\n", grep { /^scope grant: / } split /\n/, privileges_of($db)),
		join("\n", grep { /^scope grant: / } split /\n/, $fresh_privileges),
		"$db: the roles' scope grants as a fresh install's, before the grant helpers run again");
	is($node->psql_error($db, $roles_at_work, 'terse'),
		"f\n1", "$db: the roles work on every scope before the grant helpers run again");
	# functions a version adds are not granted by its update (a GRANT in an
	# extension script becomes an initial privilege, which pg_dump leaves
	# out): the README says to run the grant helpers again, as here
	grant_roles($db);
	same_text(privileges_of($db), $fresh_privileges,
		"$db: the roles' privileges as a fresh install's, once granted again");
	same_text(schema_of($db), $fresh_schema, "$db: schema equal to a fresh install of $default");
	is( $node->psql_error($db, $roles_at_work, 'terse'),
		"f\n1",
		"$db: the application role claims and the relay role reads its figures, on every scope as in 1.0");
	$node->fixture_check($db);
	# 1.0's table is bucket 0: after a switch to bucket 1 its claims still
	# count, and DROP EXTENSION takes the new bucket with it
	$node->safe_psql($db, 'CALL dedup_cleanup()');
	$node->safe_psql($db, q{UPDATE dedup.buckets SET opened_at = opened_at - interval '7 hours'});
	$node->safe_psql($db, 'CALL dedup_cleanup()');
	is( $node->safe_psql(
			$db, q{SELECT string_agg(bucket || ':' || state::text || ':' || coalesce(claims + records, 0), ','
			                         ORDER BY bucket) FROM dedup.buckets}),
		'0:s:' . $node->safe_psql($db, 'SELECT count(*) FROM ONLY dedup.claims') . ',1:c:0',
		"$db: a switch to bucket 1 keeps the rows of bucket 0");
	is( $node->safe_psql(
			$db, q{SELECT dedup_claim('orders', 'o-1'), dedup_claim('orders', 'o-new');
			       SELECT count(*) FROM dedup.claims_1;}),
		"f|t\n1",
		"$db: a claim of 1.0 is a duplicate across buckets, a new one goes into bucket 1");
	# a scope of 1.0 given a history: its claims carry it, an expired one
	# stays a duplicate, and the fold of its bucket keeps it
	is( $node->safe_psql(
			$db, q{SELECT history FROM dedup_set_scope('orders', history => '1 day');
			       SELECT dedup_claim('orders', 'o-hist', ttl => '1 second');
			       SELECT pg_sleep(1.1);
			       SELECT dedup_claim('orders', 'o-hist'), dedup_seen('orders', 'o-hist');}),
		"1 day\nt\n\nf|history",
		"$db: a 1.0 scope given a history: an expired claim is still a duplicate");
	$node->safe_psql($db, q{UPDATE dedup.buckets SET opened_at = opened_at - interval '7 hours' WHERE state = 'c'});
	$node->safe_psql($db, 'CALL dedup_cleanup()');
	$node->safe_psql($db, q{UPDATE dedup.buckets SET max_expires_at = now() - interval '1 minute'});
	$node->safe_psql($db, 'CALL dedup_cleanup()');
	is( $node->safe_psql(
			$db, q{SELECT count(*) FROM dedup.buckets WHERE bucket = 1;
			       SELECT dedup_seen('orders', 'o-hist'), keys FROM dedup_history('orders');}),
		"0\nhistory|1",
		"$db: once its bucket is folded and gone, the history answers");
	$node->safe_psql($db, 'DROP EXTENSION dedup');
	is( $node->safe_psql(
			$db, q{SELECT (SELECT count(*) FROM pg_proc WHERE proname LIKE '%dedup%')
			            + (SELECT count(*) FROM pg_type WHERE typname LIKE '%dedup%')
			            + (SELECT count(*) FROM pg_class WHERE relname LIKE '%dedup%')
			            + (SELECT count(*) FROM pg_namespace WHERE nspname = 'dedup')}),
		'0',
		"$db: DROP EXTENSION leaves nothing behind");
}

# 1.0 stored intervals with negative parts, which 1.1 cannot apply (the 1.0
# library stored them; the rows are written directly here, since this
# library refuses them whatever the SQL version): the update refuses
# (22023, naming the scope), changes nothing, and goes through once the
# setting is set again.
if (grep({ $_ eq '1.0' } @versions) && $default ne '1.0')
{
	$node->safe_psql('postgres', 'CREATE DATABASE bad_setting');
	$node->safe_psql('bad_setting',
		q{CREATE EXTENSION dedup VERSION '1.0';
		  INSERT INTO dedup.scopes (scope, ttl) VALUES ('bent', '-1200 mon 36500 days');});
	my ($ret, $out, $err) = $node->psql('bad_setting', 'ALTER EXTENSION dedup UPDATE');
	is( join('|',
			$err =~ /(ERROR:  dedup\.scopes holds settings dedup 1\.1 cannot apply|'bent' \(ttl -100 years \+36500 days)/g),
		"ERROR:  dedup.scopes holds settings dedup 1.1 cannot apply|'bent' (ttl -100 years +36500 days",
		'an update over a setting 1.1 cannot apply is refused, naming it');
	is($node->sqlstate('bad_setting', 'ALTER EXTENSION dedup UPDATE'),
		'ERROR:  22023', 'the refused update says 22023');
	is( $node->safe_psql('bad_setting',
			q{SELECT extversion || ' ' || (SELECT ttl FROM dedup.scopes) FROM pg_extension WHERE extname = 'dedup'}),
		'1.0 -100 years +36500 days',
		'the refused update left version 1.0 and the setting');
	$node->safe_psql('bad_setting',
		q{SELECT FROM dedup_set_scope('bent', ttl => '25 days'); ALTER EXTENSION dedup UPDATE;});
	is(extversion('bad_setting'), $default, 'once set again, the update goes through');
}

# The comparison can fail: each of these differences must be seen.
my @mutants = (
	[ 'a privilege granted to PUBLIC', 'GRANT EXECUTE ON FUNCTION dedup_lookup(text, text) TO PUBLIC' ],
	[ 'a changed comment', q{COMMENT ON TABLE dedup.claims IS 'changed'} ],
	[ 'a missing index', 'DROP INDEX dedup.outbox_retry_aggregate_seq' ],
	[ 'a function that is not a member', q{CREATE FUNCTION dedup.left_out() RETURNS int LANGUAGE sql AS 'SELECT 1'} ]);
my $n = 0;
for my $mutant (@mutants)
{
	my ($what, $sql) = @$mutant;
	$n++;
	$node->safe_psql('postgres', "CREATE DATABASE mutant$n TEMPLATE fresh");
	$node->safe_psql("mutant$n", $sql);
	isnt(schema_of("mutant$n"), $fresh_schema, "the comparison sees $what");
}

$node->stop;
done_testing();
