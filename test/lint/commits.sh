#!/usr/bin/env bash
# Lint: commit subjects of at most 72 characters (the why goes in the body),
# as PostgreSQL's and pgvector's histories keep them.  Checked from 6db76c9
# on, where the habit began (issue 50); older subjects stay as they were.
# Outside a git checkout (a release tarball) there is nothing to check.
#
# Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
since=6db76c9
if ! git rev-parse --verify -q "$since^{commit}" >/dev/null 2>&1; then
	echo "commits: no git history here (or a shallow one without $since): nothing to check"
	exit 0
fi
long=$(git log --no-merges --format='%h%x09%s' "$since..HEAD" | awk -F '\t' 'length($2) > 72')
if [ -n "$long" ]; then
	echo "commit subjects over 72 characters:"
	echo "$long"
	exit 1
fi
echo "commits: $(git rev-list --no-merges --count "$since..HEAD") subjects since $since, none over 72 characters"
