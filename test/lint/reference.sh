#!/usr/bin/env bash
# Scripted test: the reference documentation keeps up with the code.
#   - doc/reference.md shows every function and procedure of the extension
#     with its signature: its name, then each input argument in order with
#     its name (where it has one) and type, "DEFAULT" exactly where it has a
#     default, then ")" or its OUT arguments, then its result type ("→ t",
#     or a table's "| `t` |" column);
#   - it names every type ("type `t`"), table ("`t (` columns"), sequence,
#     view ("VIEW v"), cast, operator class and family, and operator (in
#     its Operators section);
#   - its settings table gives every dedup.* GUC the server knows with its
#     default, range and context, and doc/operations.md's settings table
#     names each;
#   - every SQLSTATE the sources raise is in the reference's Errors table and
#     doc/errors.md's: ERRCODE_* of the C sources (through utils/errcodes.h),
#     the codes of the PostgreSQL routines they call (PreventCommandIf*,
#     check_stack_depth, pq_getmsgbytes, elog), and the ERRCODE / SQLSTATE
#     of the RAISE statements of every SQL file under sql/ (the released
#     scripts, the parts of the current one, the update scripts).
# A test of the documentation must be able to fail: it is run once more on
# a copy of the reference with a signature, a default and a SQLSTATE changed,
# and must find each.
#
# Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.
set -euo pipefail
. "$(dirname "$0")/../../scripts/lib.sh"

test_server reference 20
q -c "CREATE EXTENSION dedup"
errors_page=$DEDUP_ROOT/doc/errors.md
operations_page=$DEDUP_ROOT/doc/operations.md

# What the reference must hold, one line per item:
#   "function NAME|RESULT|ARG|ARG…" (ARG as pg_get_function_arguments says it),
#   "object KIND|NAME", "setting NAME|DEFAULT|MIN|MAX|CONTEXT".
q >"$dir/items" <<'SQL'
SELECT 'function ' || p.proname || '|' || coalesce(pg_get_function_result(p.oid), '') || '|'
       || regexp_replace(pg_get_function_arguments(p.oid), ', ', '|', 'g')
  FROM pg_depend AS d JOIN pg_proc AS p ON p.oid = d.objid
 WHERE d.classid = 'pg_proc'::regclass AND d.deptype = 'e'
   AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'dedup')
UNION ALL
SELECT 'object ' || o.type || '|'
       || regexp_replace(regexp_replace(regexp_replace(o.identity,
              '(pg_catalog|public)\.', '', 'g'), '^\((.*)\)$', '\1'), ' USING \w+$|\(.*\)$', '')
  FROM pg_depend AS d CROSS JOIN LATERAL pg_identify_object(d.classid, d.objid, 0) AS o
 WHERE d.classid <> 'pg_proc'::regclass AND d.deptype = 'e'
   AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'dedup')
   -- a table's row type and a type's array go with them (17 lists them as members)
   AND NOT (d.classid = 'pg_type'::regclass AND d.objid IN (
       SELECT typarray FROM pg_type
       UNION ALL
       SELECT t.oid FROM pg_type AS t JOIN pg_class AS c ON c.oid = t.typrelid WHERE c.relkind <> 'c'))
UNION ALL
SELECT 'setting ' || concat_ws('|', name, boot_val, coalesce(min_val, ''), coalesce(max_val, ''), context)
  FROM pg_settings WHERE name LIKE 'dedup.%'
ORDER BY 1;
SQL

# The SQLSTATEs the sources raise.
errcodes_h=$(pg_config --includedir-server)/utils/errcodes.h
sqlstate_of() {	# sqlstate_of ERRCODE_NAME: its five characters, or a failure
	sed -n "s/^#define $1 MAKE_SQLSTATE('\(.\)','\(.\)','\(.\)','\(.\)','\(.\)')$/\1\2\3\4\5/p" "$errcodes_h" |
		grep . || { echo "no SQLSTATE for $1 in $errcodes_h" >&2; return 1; }
}
{
	for name in $(grep -ohE 'ERRCODE_[A-Z0-9_]+' "$DEDUP_ROOT"/src/*.c | sort -u); do
		sqlstate_of "$name"
	done
	# routines of PostgreSQL that raise on dedup's behalf
	while read -r routine code; do
		if grep -qE "\\b$routine\\b" "$DEDUP_ROOT"/src/*.c; then echo "$code"; fi
	done <<-'EOF'
		PreventCommandIfReadOnly 25006
		PreventCommandDuringRecovery 25006
		PreventCommandIfParallelMode 25000
		check_stack_depth 54001
		pq_getmsgbytes 08P01
		elog\(ERROR XX000
	EOF
	# RAISE … USING ERRCODE = 'code' or 'condition_name'; RAISE SQLSTATE 'code'
	for raised in $(grep -rohiE --include='*.sql' "(ERRCODE *= *|SQLSTATE +)'[0-9a-z_]+'" "$DEDUP_ROOT"/sql |
		sed -E "s/.*'(.*)'/\1/"); do
		if [[ $raised =~ ^[0-9A-Z]{5}$ ]]; then
			echo "$raised"
		else
			sqlstate_of "ERRCODE_${raised^^}"
		fi
	done
} | sort -u >"$dir/sqlstates"
check "SQLSTATEs found in the sources" "$(($(wc -l <"$dir/sqlstates") >= 15))" 1

# missing REFERENCE: what REFERENCE (and doc/errors.md, doc/operations.md) lack of $dir/items and
# $dir/sqlstates, one line each
missing() {
	perl -e '
		use strict; use warnings;
		my ($items, $sqlstates, $reference, $errors_page, $operations_page) = @ARGV;
		local $/;
		open my $fh, "<", $reference or die "$reference: $!"; my $doc = <$fh>;
		open $fh, "<", $errors_page or die "$errors_page: $!"; my $errors_text = <$fh>;
		open $fh, "<", $operations_page or die "$operations_page: $!"; my $operations_text = <$fh>;
		my ($doc_errors) = $doc =~ /^## Errors\n(.*?)(?=^## |\z)/ms;
		my ($doc_operators) = $doc =~ /^### Operators\n(.*?)(?=^##|\z)/ms;
		my ($readme_errors) = $errors_text =~ /^## Errors\n(.*?)(?=^## |\z)/ms;
		my ($readme_settings) = $operations_text =~ /^## Settings\n(.*?)(?=^## |\z)/ms;
		defined $_ or die "a section is missing" for $doc_errors, $doc_operators, $readme_errors, $readme_settings;
		sub words { join "\\s+", map { quotemeta } split / /, $_[0] }
		open $fh, "<", $items or die;
		for my $line (split /\n/, <$fh>) {
			my ($kind, $what) = split / /, $line, 2;
			my @f = split /\|/, $what, -1;
			if ($kind eq "function") {
				my ($name, $result, @args) = @f;
				my (@in, $has_out);
				for my $a (grep { $_ ne "" } @args) {
					if ($a =~ /^OUT /) { $has_out = 1; next; }
					my ($arg, $default) = split / DEFAULT /, $a, 2;
					$arg =~ s/^IN //;
					push @in, words($arg) . (defined $default ? "\\s+DEFAULT\\s+[^,()]+?" : "");
				}
				my $re = "(?<![\\w.])(?:dedup\\.)?" . quotemeta($name) . "\\(\\s*"
					. join("\\s*,\\s*", @in) . "\\s*" . ($has_out ? ",\\s*OUT\\s" : "\\)");
				if ($result ne "") {
					my $r = $result =~ /^TABLE\(/ ? "TABLE\\s*\\(" : words($result) . "(?![\\w\\[])";
					$re .= "[^→|]*?(?:→\\s*$r|`\\s*\\|\\s*`$r)";
				}
				print "function $name(" . join(", ", @args) . ")" . ($result ne "" ? " → $result" : "") . "\n"
					unless $doc =~ /$re/s;
			} elsif ($kind eq "object") {
				my ($type, $name) = @f;
				my $q = quotemeta $name;
				my %form = ("type" => "[Tt]ype `$q`", "table" => "`$q \\(", "view" => "VIEW $q\\b");
				my $re = $form{$type} // "`$q`";	# casts, sequences, operator classes and families, operators
				my $text = $type eq "operator" ? $doc_operators : $doc;
				print "$type $name\n" unless $text =~ /$re/;
			} elsif ($kind eq "setting") {
				my ($name, $default, $min, $max, $context) = @f;
				my ($row) = $doc =~ /^(\|\s*`\Q$name\E`\s*\|.*)$/m;
				if (!defined $row) {
					print "setting $name in the reference\n";
				} else {
					print "default $default of $name\n" if $default ne "" && $row !~ /`\Q$default\E`/;
					print "range $min .. $max of $name\n" if $min ne "" && $row !~ /\|\s*\Q$min .. $max\E\s*\|/;
					print "context $context of $name\n" if $row !~ /\|\s*\Q$context\E\s*\|/;
				}
				print "setting $name in doc/operations.md\n" unless $readme_settings =~ /`\Q$name\E`/;
			} else {
				die "unknown item $line";
			}
		}
		open $fh, "<", $sqlstates or die;
		for my $code (split /\n/, <$fh>) {
			print "SQLSTATE $code in the reference\n" unless $doc_errors =~ /`\Q$code\E`/;
			print "SQLSTATE $code in doc/errors.md\n" unless $readme_errors =~ /`\Q$code\E`/;
		}
	' "$dir/items" "$dir/sqlstates" "$1" "$errors_page" "$operations_page"
}

echo "$(grep -c '^function' "$dir/items") functions, $(grep -c '^object' "$dir/items") other objects," \
	"$(grep -c '^setting' "$dir/items") settings, $(wc -l <"$dir/sqlstates") SQLSTATEs:" $(cat "$dir/sqlstates")
gaps=$(missing "$DEDUP_ROOT/doc/reference.md")
check "the reference, doc/errors.md and doc/operations.md document everything" "$gaps" ""

# The check can fail.
sed -e 's/^\(dedup_outbox_take(topic text, batch_size integer\) DEFAULT 100)/\1)/' \
	-e 's/^\(| `dedup.cleanup_batch_size` |.*| \)`10000`/\1`1000`/' \
	-e '/^## Errors/,$ { /^| `2202E` /d }' \
	"$DEDUP_ROOT/doc/reference.md" >"$dir/mutant.md"
found=$(missing "$dir/mutant.md")
echo "$found"
check "a missing DEFAULT is found" "$(grep -c '^function dedup_outbox_take(' <<<"$found")" 1
check "a changed default is found" "$(grep -c '^default 10000 of dedup.cleanup_batch_size' <<<"$found")" 1
check "a missing SQLSTATE is found" "$(grep -c '^SQLSTATE 2202E in the reference' <<<"$found")" 1
echo "reference: every function, type, view, setting and SQLSTATE is documented"
