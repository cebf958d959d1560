# Without shared_preload_libraries, CREATE EXTENSION dedup and every claim,
# record, put and cleanup function work (managed PostgreSQL cannot preload), and
# the GUCs exist once the library is loaded by the first call; a put's
# aggregates are then heavyweight locks, at most 1,024 of a topic.  All in one
# session, as an application that cannot preload would see it: the first
# call loads the library, and its GUCs exist from then on.
#
# Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.
use strict;
use warnings;
use DedupNode;
use Test::More;

my $node = DedupNode->create('nopreload', preload => '');

# each statement, what it prints (undef: nothing), and what that shows
my @steps = (
	[ 'SHOW shared_preload_libraries', '', 'nothing is preloaded' ],
	[ 'CREATE EXTENSION dedup', undef ],
	[ "SELECT dedup_claim('s', 'k')", 't', 'a new key is claimed' ],
	[ "SELECT dedup_claim('s', 'k')", 'f', 'the same key again is a duplicate' ],
	[ "SELECT count(*) FROM dedup_claim_batch('s', ARRAY['k', 'k2', 'k3'])", '2',
		'a batch claims its new keys only' ],
	[ "SELECT (dedup_begin('r', 'k')).outcome", 'started', 'a record starts' ],
	[ q{SELECT dedup_complete('r', 'k', 200, '{"ok": true}')}, '', 'the record completes' ],
	[ "SELECT (dedup_begin('r', 'k')).response", '{"ok": true}', 'a completed record replays its response' ],
	[ 'SHOW dedup.default_ttl', '1d', 'the GUCs exist once the library is loaded' ],
	[ "UPDATE dedup.claims SET expires_at = now() - interval '1 second'", undef ],
	[ 'CALL dedup_cleanup()', '4', 'the cleanup runs, and says how many rows it deleted' ],
	[ 'SELECT count(*) FROM dedup.claims', '0', 'the cleanup deleted every expired claim' ],
	[ 'BEGIN', undef ],
	[ "SELECT count(dedup_outbox_put('t', 'k' || g, '{}', aggregate_id => 'a' || g)) FROM generate_series(1, 3000) AS g",
		'3000', 'one transaction puts events of 3,000 aggregates' ],
	[ "SELECT count(*) <= 1024 FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 25701 AND pid = pg_backend_pid()",
		't', 'holding at most 1,024 locks of the topic\'s aggregates' ],
	[ 'COMMIT', undef ],
	# no shared memory to wait in: a take that waits polls
	[ "SELECT count(*) FROM dedup_outbox_take_batch('t', 10, wait => '1 second')", '10',
		'a take that waits hands out what is there' ],
	[ "SELECT count(*) FROM dedup_outbox_take_batch('t-none', 10, wait => '200 milliseconds')", '0',
		'a take that waits on an empty topic polls until its wait passed' ]);

my @out = split /\n/, $node->safe_psql('postgres', join(";\n", map { $_->[0] } @steps) . ";\n"), -1;
for my $step (grep { defined $_->[1] } @steps)
{
	is(shift @out, $step->[1], $step->[2]);
}
is(scalar(@out), 0, 'nothing else printed');

done_testing();
