#!/usr/bin/env bash
# Scripted test: META.json (PGXN's meta spec 1.0.0) parses, carries the
# fields PGXN requires, and names the version dedup.control installs
# (default_version, as PGXN's semantic version: 1.1 is 1.1.0), whose install
# script the Makefile builds, the licence of LICENSE, and the PostgreSQL
# majors of debian/pgversions (">= 15.0.0, < 19.0.0" for 15 to 18).
#
# Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.
set -euo pipefail
cd "$(dirname "$0")/../.."

control=$(sed -n "s/^default_version = '\(.*\)'$/\1/p" dedup.control)
perl -MJSON::PP -e '
	use strict;
	my ($control) = @ARGV;
	local $/;
	open(my $fh, "<", "META.json") or die "META.json: $!\n";
	my $m = JSON::PP->new->decode(<$fh>);
	my @fail;
	for my $k (qw(name abstract version maintainer license provides meta-spec)) {
		push @fail, "missing $k" unless defined $m->{$k};
	}
	my $semver = $control =~ /^\d+\.\d+$/ ? "$control.0" : $control;
	push @fail, "meta-spec is not 1.0.0" unless ($m->{"meta-spec"}{version} // "") eq "1.0.0";
	push @fail, "name is not dedup" unless $m->{name} eq "dedup";
	push @fail, "version $m->{version} is not $semver (dedup.control: $control)"
		unless $m->{version} eq $semver;
	my $p = $m->{provides}{dedup} or push @fail, "provides has no dedup";
	if ($p) {
		push @fail, "provides.dedup.version $p->{version} is not $semver" unless $p->{version} eq $semver;
		push @fail, "provides.dedup.file $p->{file} is not dedup--$control.sql"
			unless $p->{file} eq "dedup--$control.sql";
		push @fail, "provides.dedup.docfile $p->{docfile} does not exist" unless -f $p->{docfile};
	}
	push @fail, "license is not postgresql" unless $m->{license} eq "postgresql";
	# the majors of debian/pgversions, the first to the last
	my ($first, $last) = @ARGV[1, 2];
	my $range = ">= $first.0.0, < " . ($last + 1) . ".0.0";
	push @fail, "prereqs do not require PostgreSQL $range (debian/pgversions)"
		unless ($m->{prereqs}{runtime}{requires}{PostgreSQL} // "") eq $range;
	if (@fail) { print "META.json: $_\n" for @fail; exit 1 }
' "$control" "$(head -n 1 debian/pgversions)" "$(tail -n 1 debian/pgversions)"

# the version is one everywhere: the package's changelog (upstream part of
# its top entry), the README ("dedup X.Y.Z") and the reference's title
semver=$(perl -MJSON::PP -0ne 'print JSON::PP->new->decode($_)->{version}' META.json)
versions_found() {	# versions_found CHANGELOG README REFERENCE: what each says, one line each
	sed -n '1s/^dedup (\([0-9.]*\)-[^)]*).*/changelog \1/p' "$1"
	grep -oE 'dedup [0-9]+\.[0-9]+\.[0-9]+' "$2" | sort -u | sed 's/^dedup /README /'
	sed -n '1s/^# dedup \([0-9.]*\) — reference$/reference \1/p' "$3"
}
want=$(printf 'changelog %s\nREADME %s\nreference %s\n' "$semver" "$semver" "${semver%.0}")
got=$(versions_found debian/changelog README.md doc/reference.md)
[ "$got" = "$want" ] || { printf 'versions differ:\n%s\nwanted:\n%s\n' "$got" "$want"; exit 1; }
# ... and that check can fail
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
sed '1s/1\.1\.0-1/1.2.0-1/' debian/changelog >"$tmp/changelog"
[ "$(versions_found "$tmp/changelog" README.md doc/reference.md)" != "$want" ] ||
	{ echo "a changelog of another version was not found"; exit 1; }

# the install script META.json names is the one the Makefile builds
make -s -n "dedup--$control.sql" >/dev/null 2>&1 || make -s -q "dedup--$control.sql" 2>/dev/null ||
	{ echo "the Makefile does not build dedup--$control.sql"; exit 1; }
grep -q '^PostgreSQL License$' LICENSE || { echo "LICENSE is not the PostgreSQL License"; exit 1; }
echo "meta: changelog, README and reference say $semver too"
echo "meta: META.json names dedup $control (PGXN version $(perl -MJSON::PP -0ne 'print JSON::PP->new->decode($_)->{version}' META.json)), licence postgresql"
