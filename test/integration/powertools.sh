#!/usr/bin/env bash
# Scripted test: the Powertools persistence layer (clients/node-powertools)
# runs Powertools for AWS Lambda's own makeIdempotent
# (@aws-lambda-powertools/idempotency, from the npm registry, with pg) on
# dedup, as an application role granted dedup_grant_usage, against a
# throwaway server: the first call runs the handler, a repeat returns the
# stored result, a concurrent call gets IdempotencyAlreadyInProgressError,
# another payload IdempotencyValidationError, a failure gives the key back,
# and a record past expiresAfterSeconds runs the handler again
# (test/integration/powertools.mjs).  The layer is shown to matter: the same
# program on a layer that answers every begin as started fails.
#
# Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.
set -euo pipefail
. "$(dirname "$0")/../../scripts/lib.sh"

command -v node >/dev/null || ensure_packages nodejs
command -v npm >/dev/null || ensure_packages npm

test_server powertools 36
cd "$DEDUP_ROOT"

# The layer, its test and their dependencies, in a folder of this test's
# (node_modules is never in the tree; ESM resolves packages from the file's
# folder up)
mkdir -p "$dir/node"
cp clients/node-powertools/index.mjs test/integration/powertools.mjs "$dir/node/"
cat >"$dir/node/package.json" <<'JSON'
{ "private": true, "type": "module",
  "dependencies": { "@aws-lambda-powertools/idempotency": "^2.0.0", "pg": "^8.11.0" } }
JSON
(cd "$dir/node" && npm install --no-audit --no-fund --loglevel=error >"$dir/npm.log" 2>&1) ||
	{ cat "$dir/npm.log"; echo "FAIL: npm install of Powertools' idempotency and pg"; exit 1; }
echo "ok: installed @aws-lambda-powertools/idempotency $(node -p "require('$dir/node/node_modules/@aws-lambda-powertools/idempotency/package.json').version")"

q -c "CREATE ROLE lambda_app LOGIN" -c "CREATE DATABASE lambda OWNER lambda_app"
q -d lambda -c "CREATE EXTENSION dedup" -c "SELECT dedup_grant_usage('lambda_app')" >/dev/null

run() {	# run DIR: the test program in DIR, as the application role
	(cd "$1" && PGUSER=lambda_app PGDATABASE=lambda DEDUP_ADMIN_USER=postgres node powertools.mjs)
}
out=$(run "$dir/node" 2>&1) || { echo "$out"; echo "FAIL: powertools.mjs"; exit 1; }
echo "$out" | grep '^ok: '
check "every check of powertools.mjs ran" "$(grep -c '^ok: ' <<<"$out")" 8

# The test must be able to fail: a layer that answers every begin as
# "started" (never finds the stored record) runs the handler twice
mkdir -p "$dir/mutant"
cp "$dir/node/package.json" "$dir/node/powertools.mjs" "$dir/mutant/"
ln -s "$dir/node/node_modules" "$dir/mutant/node_modules"
sed "s/switch (r.outcome) {/switch ('started') {/" clients/node-powertools/index.mjs >"$dir/mutant/index.mjs"
q -d lambda -c "TRUNCATE dedup.claims"
if mutant_out=$(run "$dir/mutant" 2>&1); then
	echo "$mutant_out"
	echo "FAIL: the test passed on a layer that ignores dedup_begin's outcome"
	exit 1
fi
check "a layer that ignores dedup_begin's outcome fails the test, at the repeat" \
	"$(grep '^ok: ' <<<"$mutant_out" | tail -n 1)" "ok: the first call runs the handler; its result is a complete record that stays expiresAfterSeconds"
