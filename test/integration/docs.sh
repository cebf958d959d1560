#!/usr/bin/env bash
# Scripted test: the documentation's examples run, and say what they print.
#   - the example programs under examples/ run against a throwaway server as
#     an application role granted dedup_grant_usage and dedup_grant_relay in
#     a database it owns, as the README's set-up makes one: Python with
#     psycopg 3 (Debian's python3-psycopg), Node with `pg` (npm install into
#     a folder of this test's); each must exit 0;
#   - every ```sql block of README.md and doc/*.md runs against the server,
#     in order, and its shown output (a ```text block after it) is what psql
#     prints; the example programs' shown outputs are what they printed; a
#     ```python or ```js block is a part of a file under examples/
#     (test/integration/docs.py; its header gives the conventions);
#   - drift: the functions doc/privileges.md lists for dedup_grant_usage and
#     dedup_grant_relay are dedup.functions_of('usage') and ('relay') on
#     the server; a pgTAP file's count of tests stated in the docs is its
#     plan(); no page says 1.1 is still being made.
# The checks must be able to fail: each is run once more on a changed copy.
#
# Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.
set -euo pipefail
. "$(dirname "$0")/../../scripts/lib.sh"

ensure_packages python3-psycopg
command -v node >/dev/null || ensure_packages nodejs
command -v npm >/dev/null || ensure_packages npm

test_server docs 30
cd "$DEDUP_ROOT"
py=/usr/bin/python3		# Debian's, which has python3-psycopg

# Node's dependency, in a folder of this test's (node_modules is never in the tree)
mkdir -p "$dir/node"
cp examples/node/package.json "$dir/node/"
(cd "$dir/node" && npm install --no-audit --no-fund --loglevel=error >"$dir/npm.log" 2>&1) ||
	{ cat "$dir/npm.log"; echo "FAIL: npm install of examples/node's dependencies"; exit 1; }

# The example programs, each in a database of its own owned by the role
q -c "CREATE ROLE docs_app LOGIN"
mkdir -p "$dir/out/examples/python" "$dir/out/examples/node"
run_example() {	# run_example PATH COMMAND...
	local path=$1 db
	shift
	db=docs_$(basename "$path" | tr -c 'a-z0-9\n' _)
	q -c "CREATE DATABASE $db OWNER docs_app"
	q -d "$db" -c "CREATE EXTENSION dedup" \
		-c "SELECT dedup_grant_usage('docs_app'), dedup_grant_relay('docs_app')" >/dev/null
	case "$path" in
	*relay.py)	# events to relay, put by the application
		PGUSER=docs_app q -d "$db" >/dev/null <<-'SQL'
			SELECT dedup_outbox_put('orders', 'order-42-created', '{"order_id": 42}', aggregate_id => '42', type => 'OrderCreated');
			SELECT dedup_outbox_put('orders', 'order-43-created', '{"order_id": 43}', aggregate_id => '43', type => 'OrderCreated');
		SQL
		;;
	esac
	if ! PGUSER=docs_app PGDATABASE=$db "$@" >"$dir/out/$path.out" 2>&1; then
		cat "$dir/out/$path.out"
		echo "FAIL: $path exited non-zero"
		exit 1
	fi
	echo "ok: $path ran"
	cat "$dir/out/$path.out"
}
for f in examples/python/*.py; do run_example "$f" "$py" "$f"; done
for f in examples/node/*.js; do run_example "$f" env NODE_PATH="$dir/node/node_modules" node "$f"; done

# What the programs did, in their databases (not only what they printed)
check "the Python handler: one charge a key" \
	"$(q -d docs_handler_py -c "SELECT count(*) FROM charges")" 2
check "the Python handler: k-1 completed with its response" \
	"$(q -d docs_handler_py -c "SELECT kind, status, response_code FROM dedup_lookup('charges', 'k-1')")" \
	"record|complete|201"
check "the Node handler: one charge a key" "$(q -d docs_handler_js -c "SELECT count(*) FROM charges")" 2
check "the consumer: each message applied once" \
	"$(q -d docs_consumer_py -c "SELECT string_agg(balance::text, ',' ORDER BY id) FROM accounts")" "107,50"
check "the relay: every event acked" \
	"$(q -d docs_relay_py -c "SELECT count(*) FROM dedup_outbox_stats('orders') WHERE pending + in_flight + dead > 0")" 0

# Every SQL block of the docs, and the programs' shown outputs
docs=(README.md doc/*.md)
DOCS_PROGRAM_OUTPUT=$dir/out "$py" test/integration/docs.py "${docs[@]}" | tee "$dir/docs.log"
check "the docs' SQL examples run and print what they show" "${PIPESTATUS[0]}" 0

# ... and the check can fail: a changed output, a failing block, a quote
# that is not in examples/
mkdir -p "$dir/mutant"
sed -e '0,/^ t$/s//XX/' README.md >"$dir/mutant/changed_output.md"
printf '```sql\nSELECT no_such_function();\n```\n' >"$dir/mutant/failing.md"
printf '```python\nprint("not in examples/")\n```\n' >"$dir/mutant/quote.md"
for m in changed_output failing quote; do
	if DOCS_PROGRAM_OUTPUT=$dir/out "$py" test/integration/docs.py "$dir/mutant/$m.md" >"$dir/mutant/$m.log" 2>&1; then
		cat "$dir/mutant/$m.log"
		check "a mutant ($m) fails the check" passed failed
	fi
	echo "ok: a mutant ($m) fails the check"
done

# Drift: the grant lists documented are the helpers' own
grant_list() {	# grant_list FILE PRIVILEGE: the names the page's table row lists
	perl -ne 'chomp; if (/^\|\s*`'"$2"'`\s*\|/) { my @f = split /\|/; print "$1\n" while $f[-1] =~ /`(dedup[._]\w+)`/g }' "$1" |
		LC_ALL=C sort -u | tr '\n' ' '
}
for privilege in usage relay; do
	want=$(q -c "CREATE EXTENSION IF NOT EXISTS dedup" -c "SELECT DISTINCT coalesce(CASE WHEN p.pronamespace = 'dedup'::regnamespace THEN 'dedup.' END, '') || p.proname FROM unnest(dedup.functions_of('$privilege')) AS f JOIN pg_proc AS p ON p.oid = f" |
		LC_ALL=C sort | tr '\n' ' ')
	check "doc/privileges.md lists what dedup_grant_$privilege grants" \
		"$(grant_list doc/privileges.md "$privilege")" "$want"
done
sed -e '/^| `relay` |/s/`dedup_outbox_take_batch`, //' doc/privileges.md >"$dir/mutant/privileges.md"
check "a grant list missing a function is found" \
	"$([ "$(grant_list "$dir/mutant/privileges.md" relay)" != "$(grant_list doc/privileges.md relay)" ] && echo found)" found

# Drift: pgTAP counts stated in the docs are the files' plan()
pgtap_counts() {	# pgtap_counts FILES...: "name stated planned" per statement that differs
	perl -0ne '
		while (/`test\/pgtap\/(\w+)\.sql`[^.;]*?\((\d+) tests\)/g) {
			my ($name, $n) = ($1, $2);
			open my $fh, "<", "test/pgtap/$name.sql" or do { print "$name $n missing\n"; next };
			my ($plan) = do { local $/; <$fh> } =~ /plan\((\d+)\)/;
			print "$name $n $plan\n" unless $plan == $n;
		}' "$@"
}
pgtap_stated() {	# pgtap_stated FILE: how many counts it states
	perl -0ne '$n++ while /`test\/pgtap\/(\w+)\.sql`[^.;]*?\((\d+) tests\)/g; print $n // 0' "$1"
}
check "the pgTAP counts in the docs are the plans" "$(pgtap_counts README.md doc/*.md)" ""
check "some pgTAP count is stated (else the check checks nothing)" \
	"$(pgtap_stated doc/tests.md)" 3
sed -e 's/(\([0-9]*\) tests)/(1\1 tests)/' doc/tests.md >"$dir/mutant/tests.md"
check "a wrong pgTAP count is found" "$(pgtap_counts "$dir/mutant/tests.md" | wc -l)" 2

# Drift: nothing says the released version is still being made
check "no page calls 1.1 unreleased" "$(grep -lE 'is being made|1\.1 \(in the making' README.md doc/*.md || true)" ""
echo "docs: every example runs and prints what the docs show"
