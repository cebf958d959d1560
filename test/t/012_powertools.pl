# The Powertools persistence layer (clients/node-powertools) runs
# Powertools for AWS Lambda's own makeIdempotent
# (@aws-lambda-powertools/idempotency, from the npm registry, with pg) on
# dedup, as an application role granted dedup_grant_usage: the first call
# runs the handler, a repeat returns the stored result, a concurrent call
# gets IdempotencyAlreadyInProgressError, another payload
# IdempotencyValidationError, a failure gives the key back, and a record
# past expiresAfterSeconds runs the handler again (test/t/powertools.mjs).
# The layer is shown to matter: the same program on a layer that answers
# every begin as started fails.  Skipped when Node or npm is not installed
# (Debian's nodejs and npm; scripts/test installs them).  npm install needs
# the registry.  (Was test/integration/powertools.sh.)
#
# Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.
use strict;
use warnings;
use DedupNode;
use File::Copy qw(copy);
use IPC::Run;
use Test::More;

# In the 17 and 18 chroots of scripts/test's matrix: the host's run covers
# it; the Node client does not depend on the major, and it would add minutes to each.
plan skip_all => "runs on the host's major only (matrix chroot of PostgreSQL $ENV{DEDUP_MATRIX_MAJOR})"
  if $ENV{DEDUP_MATRIX_MAJOR};

my ($node_bin) = grep { -x } map { "$_/node" } split(/:/, $ENV{PATH} || ''), '/usr/bin';
my ($npm) = grep { -x } map { "$_/npm" } split(/:/, $ENV{PATH} || ''), '/usr/bin';
plan skip_all => 'Node or npm is not installed (Debian packages nodejs, npm)' unless $node_bin && $npm;

my $node = DedupNode->create('powertools');
my $admin = getpwuid($<);    # the server's superuser

# The layer, its test and their dependencies, in a folder of this test's
# (node_modules is never in the tree; ESM resolves packages from the file's
# folder up)
my $dir = PostgreSQL::Test::Utils::tempdir();
mkdir "$dir/node";
copy(DedupNode::tree_file('clients/node-powertools/index.mjs'), "$dir/node/") or die "copy: $!";
copy(DedupNode::tree_file('test/t/powertools.mjs'), "$dir/node/") or die "copy: $!";
PostgreSQL::Test::Utils::append_to_file(
	"$dir/node/package.json", <<'JSON');
{ "private": true, "type": "module",
  "dependencies": { "@aws-lambda-powertools/idempotency": "^2.0.0", "pg": "^8.11.0" } }
JSON
my ($npm_out, $npm_err) = ('', '');
{
	# npm's cache in the test's folder: the home of the user the tests run as
	# may be another's
	local $ENV{npm_config_cache} = "$dir/npm-cache";
	ok( IPC::Run::run(
			[ $npm, 'install', '--no-audit', '--no-fund', '--loglevel=error' ],
			'>', \$npm_out, '2>', \$npm_err, init => sub { chdir "$dir/node" or die $!; }),
		"npm install of Powertools' idempotency and pg")
	  or BAIL_OUT("npm install failed: $npm_out$npm_err");
}
my $version = PostgreSQL::Test::Utils::slurp_file(
	"$dir/node/node_modules/\@aws-lambda-powertools/idempotency/package.json") =~ /"version":\s*"([^"]+)"/;
note "installed \@aws-lambda-powertools/idempotency $1" if $version;

$node->safe_psql('postgres', 'CREATE ROLE lambda_app LOGIN; CREATE DATABASE lambda OWNER lambda_app');
$node->safe_psql('lambda', q{CREATE EXTENSION dedup; SELECT dedup_grant_usage('lambda_app')});

# run(DIR, DATABASE): the test program in DIR, as the application role,
# in DATABASE (lambda by default); its exit status's success and what it
# printed
sub run
{
	my ($in, $database) = @_;
	my $out = '';
	local $ENV{PGHOST} = $node->host;
	local $ENV{PGPORT} = $node->port;
	local $ENV{PGUSER} = 'lambda_app';
	local $ENV{PGDATABASE} = $database // 'lambda';
	local $ENV{DEDUP_ADMIN_USER} = $admin;
	my $ok = IPC::Run::run([ $node_bin, 'powertools.mjs' ],
		'>', \$out, '2>&1', init => sub { chdir $in or die $!; });
	return ($ok, $out);
}
my ($ok, $out) = run("$dir/node");
ok($ok, 'powertools.mjs succeeds') or diag $out;
note join("\n", grep { /^ok: / } split /\n/, $out);
is(scalar(grep { /^ok: / } split /\n/, $out), 8, 'every check of powertools.mjs ran');

# The test must be able to fail: a layer that answers every begin as
# "started" (never finds the stored record) runs the handler twice
mkdir "$dir/mutant";
copy("$dir/node/$_", "$dir/mutant/") or die "copy: $!" for qw(package.json powertools.mjs);
symlink "$dir/node/node_modules", "$dir/mutant/node_modules" or die "symlink: $!";
my $layer = PostgreSQL::Test::Utils::slurp_file(DedupNode::tree_file('clients/node-powertools/index.mjs'));
$layer =~ s/switch \(r\.outcome\) \{/switch ('started') {/ or die 'the layer has no switch (r.outcome)';
PostgreSQL::Test::Utils::append_to_file("$dir/mutant/index.mjs", $layer);
# in a database of its own: the first run's records may be in a later time
# bucket than dedup.claims by now (the ttls are short), where no TRUNCATE of
# dedup.claims reaches them
$node->safe_psql('postgres', 'CREATE DATABASE lambda_mutant OWNER lambda_app');
$node->safe_psql('lambda_mutant', q{CREATE EXTENSION dedup; SELECT dedup_grant_usage('lambda_app')});
my ($mutant_ok, $mutant_out) = run("$dir/mutant", 'lambda_mutant');
ok(!$mutant_ok, "the test fails on a layer that ignores dedup_begin's outcome") or diag $mutant_out;
is( (grep { /^ok: / } split /\n/, $mutant_out)[-1],
	'ok: the first call runs the handler; its result is a complete record that stays expiresAfterSeconds',
	"a layer that ignores dedup_begin's outcome fails the test, at the repeat")
  or diag $mutant_out;

done_testing();
