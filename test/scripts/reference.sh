#!/usr/bin/env bash
# Scripted test: the reference documentation keeps up with the code.
#   - doc/reference.md shows every function and procedure of the extension
#     with its arguments (each overload: its name, then its input arguments
#     in order, names optional), and names every type, table, sequence, view,
#     operator class and cast;
#   - doc/reference.md's settings table gives every dedup.* GUC the server
#     knows with its default and context, and the README's settings table
#     names each one;
#   - every SQLSTATE the C sources (ERRCODE_* of utils/errcodes.h) and the
#     extension scripts (ERRCODE = '…') raise is in the README's Errors
#     table and in the reference's.
# A test of the documentation must be able to fail: it is run once more on
# a copy of the reference with one overload's signature changed, one GUC's
# default changed and one SQLSTATE removed, and must find all three.
set -euo pipefail
. "$(dirname "$0")/../../scripts/lib.sh"

test_server reference 20
q -c "CREATE EXTENSION dedup"
readme=$DEDUP_ROOT/README.md

# section FILE HEADING: the lines of the Markdown section FILE calls HEADING
section() { awk -v h="$2" '$0 == h { on = 1; next } on && /^## / { exit } on' "$1"; }

# What the reference must hold, one line per item: "signature NAME|ARG|ARG…",
# "name NAME", "guc NAME|DEFAULT|CONTEXT".
q >"$dir/items" <<'SQL'
SELECT 'signature ' || p.proname || '|'
       || regexp_replace(pg_get_function_identity_arguments(p.oid), ', ', '|', 'g')
  FROM pg_depend AS d JOIN pg_proc AS p ON p.oid = d.objid
 WHERE d.classid = 'pg_proc'::regclass AND d.deptype = 'e'
   AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'dedup')
UNION ALL
SELECT 'name ' || regexp_replace(regexp_replace(regexp_replace(
           (pg_identify_object(d.classid, d.objid, 0)).identity,
           '(pg_catalog|public)\.', '', 'g'), '^\((.*)\)$', '\1'), ' USING \w+$', '')
  FROM pg_depend AS d
 WHERE d.classid IN ('pg_type'::regclass, 'pg_class'::regclass, 'pg_cast'::regclass,
                     'pg_opclass'::regclass, 'pg_opfamily'::regclass)
   AND d.deptype = 'e'
   AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'dedup')
UNION ALL
SELECT 'guc ' || name || '|' || boot_val || '|' || context
  FROM pg_settings WHERE name LIKE 'dedup.%'
ORDER BY 1;
SQL

# The SQLSTATEs raised: ERRCODE_* of the C sources through utils/errcodes.h,
# and the ERRCODE = '…' of the extension scripts.
errcodes_h=$(pg_config --includedir-server)/utils/errcodes.h
{
	grep -ohE 'ERRCODE_[A-Z0-9_]+' "$DEDUP_ROOT"/src/*.c | sort -u | while read -r name; do
		sed -n "s/^#define $name MAKE_SQLSTATE('\(.\)','\(.\)','\(.\)','\(.\)','\(.\)')$/\1\2\3\4\5/p" "$errcodes_h"
	done
	grep -ohE "ERRCODE *= *'[0-9A-Z]{5}'" "$DEDUP_ROOT"/sql/dedup--*.sql | sed -E "s/.*'(.{5})'/\1/"
} | sort -u >"$dir/sqlstates"
check "SQLSTATEs found in the sources" "$(($(wc -l <"$dir/sqlstates") >= 15))" 1

# missing REFERENCE: the items of $dir/items and $dir/sqlstates that REFERENCE lacks
missing() {
	local reference=$1
	perl -e '
		my ($items, $sqlstates, $reference, $readme) = @ARGV;
		local $/;
		open my $fh, "<", $reference or die; my $doc = <$fh>;
		open $fh, "<", $readme or die; my $readme_text = <$fh>;
		my ($doc_errors) = $doc =~ /^## Errors\n(.*?)(?=^## |\z)/ms;
		my ($readme_errors) = $readme_text =~ /^## Errors\n(.*?)(?=^## |\z)/ms;
		my ($readme_settings) = $readme_text =~ /^## Settings \(GUCs\)\n(.*?)(?=^## |\z)/ms;
		open $fh, "<", $items or die;
		for my $line (split /\n/, <$fh>) {
			my ($kind, $what) = split / /, $line, 2;
			my @f = split /\|/, $what, -1;
			if ($kind eq "signature") {
				# input arguments only: OUT ones are the result
				my ($name, @args) = map { s/^IN //r } grep { $_ ne "" && !/^OUT / } @f;
				my $re = "(?:dedup\\.)?" . quotemeta($name) . "\\(\\s*";
				my @parts;
				for my $a (@args) {
					my @w = split / /, $a;
					my $full = join "\\s+", map { quotemeta } @w;
					# the argument name may be left out: "text" for "funcname text"
					my $type = @w > 1 && $w[0] !~ /^(IN|OUT|INOUT|VARIADIC)$/
						? join("\\s+", map { quotemeta } @w[1..$#w]) : $full;
					push @parts, "(?:$full|$type)[^,()]*";
				}
				$re .= join(",\\s*", @parts) . "[,)]";
				print "function $name(" . join(", ", @args) . ")\n" unless $doc =~ /$re/s;
			} elsif ($kind eq "name") {
				print "$what\n" unless $doc =~ /\Q$what\E/;
			} elsif ($kind eq "guc") {
				my ($name, $default, $context) = @f;
				my ($row) = $doc =~ /^(\|\s*`\Q$name\E`\s*\|.*)$/m;
				print "setting $name in the reference\n" unless defined $row;
				print "default $default of $name\n"
					if defined $row && $default ne "" && $row !~ /`\Q$default\E`/;
				print "context $context of $name\n"
					if defined $row && $row !~ /\|\s*\Q$context\E\s*\|/;
				print "setting $name in the README\n" unless $readme_settings =~ /`\Q$name\E`/;
			}
		}
		open $fh, "<", $sqlstates or die;
		for my $code (split /\n/, <$fh>) {
			print "SQLSTATE $code in the reference\n" unless $doc_errors =~ /`\Q$code\E`/;
			print "SQLSTATE $code in the README\n" unless $readme_errors =~ /`\Q$code\E`/;
		}
	' "$dir/items" "$dir/sqlstates" "$reference" "$readme"
}

echo "$(grep -c '^signature' "$dir/items") functions, $(grep -c '^name' "$dir/items") other objects, $(grep -c '^guc' "$dir/items") settings, $(wc -l <"$dir/sqlstates") SQLSTATEs"
check "the reference and the README document everything" \
	"$(missing "$DEDUP_ROOT/doc/reference.md")" ""

# The check can fail.
sed -e 's/\(dedup_outbox_nack(\(ids \)\?uuid\[\], \(retry_delay \)\?\)interval/\1integer/g' \
	-e 's/^\(| `dedup.cleanup_batch_size` |.*| \)`10000`/\1`1000`/' \
	-e '/^## Errors/,$ { /^| `2202E` /d }' \
	"$DEDUP_ROOT/doc/reference.md" >"$dir/mutant.md"
found=$(missing "$dir/mutant.md")
echo "$found"
check "a changed signature is found" "$(grep -c '^function dedup_outbox_nack(' <<<"$found")" 1
check "a changed default is found" "$(grep -c '^default 10000 of dedup.cleanup_batch_size' <<<"$found")" 1
check "a missing SQLSTATE is found" "$(grep -c '^SQLSTATE 2202E in the reference' <<<"$found")" 1
echo "reference: every function, type, view, setting and SQLSTATE is documented"
