# The cleanup background worker.  A server with dedup preloaded cleans
# database "app"; "missingdb" does not exist, "noext" has no extension and
# "closed" allows no connections.  Checks, polling (never sleeping blindly
# for a result):
#   - the worker deletes exactly the expired claims, completed records and
#     abandoned processing records, and nothing live; the figures say so;
#   - a missing database, one without the extension, one that allows no
#     connections, one whose transactions are read-only, a missing role and
#     one that may not delete are each logged once, then skipped;
#   - dedup.cleanup_interval and dedup.cleanup_enabled take effect on reload;
#   - a stage that cannot get its lock in time does not end the pass;
#   - SIGTERM stops a worker in the middle of a pass within a second, and
#     the launcher within a second; the postmaster restarts the launcher,
#     and after a crash (kill -9) too;
#   - the worker switches buckets by size (dedup.bucket_max_size), and by
#     default at an interval that follows the ttls written;
#   - a 65th database gets no slot for its ttls until one of the 64 that
#     hold them is dropped.
#
# Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.
use strict;
use warnings;
use DedupNode;
use Test::More;
use Time::HiRes qw(sleep);

my $node = DedupNode->create(
	'worker',
	conf => [
		"dedup.cleanup_databases = 'app, missingdb, noext, closed'",
		'dedup.cleanup_interval = 1',
		'dedup.cleanup_pause = 0',
		# one bucket until a test switches: not the interval that follows the
		# ttls (2 seconds and 1 hour here: 112 seconds), checked last
		'dedup.bucket_interval = 6h'
	]);
$node->safe_psql('postgres',
	'CREATE DATABASE app; CREATE DATABASE noext; CREATE DATABASE closed ALLOW_CONNECTIONS false;');

sub sql { return $node->safe_psql('app', $_[0]); }
sub reload { sql("ALTER SYSTEM SET $_[0]"); sql('SELECT pg_reload_conf()'); }
sub wait_for { my ($sql, $want, $secs) = @_; return $node->poll_within($secs || 30, 'app', $sql, $want); }
my $launcher_pid = q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'dedup cleanup launcher'};
my $workers = q{SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'dedup cleanup worker'};
my $last_pass = 'SELECT max(last_pass_started_at) FROM dedup_cleanup_stats()';
my $exactly_live =
  'SELECT count(*) FROM dedup.claims c FULL JOIN live l USING (key) WHERE c.key IS NULL OR l.key IS NULL';

sql(q{
CREATE EXTENSION dedup;
SELECT dedup_set_scope('short', ttl => '2 seconds', lease => '1 second');
-- live: 3000 claims and 20 completed records that keep for an hour
SELECT count(*) FROM dedup_claim_batch('long', ARRAY(SELECT 'live-' || i FROM generate_series(1, 3000) i), ttl => '1 hour');
SELECT count(*) FROM generate_series(1, 20) i,
    LATERAL dedup_begin('long', 'rec-' || i) b, LATERAL dedup_complete('long', 'rec-' || i, 200, '{}') c;
CREATE TABLE live AS SELECT key FROM dedup.claims;
-- expiring within 2 seconds: 2000 claims, 30 completed records and 10
-- processing records whose lease passes (abandoned by a crashed caller)
SELECT count(*) FROM dedup_claim_batch('short', ARRAY(SELECT 'gone-' || i FROM generate_series(1, 2000) i));
SELECT count(*) FROM generate_series(1, 30) i,
    LATERAL dedup_begin('short', 'rec-' || i) b, LATERAL dedup_complete('short', 'rec-' || i, 200, '{}') c;
SELECT count(*) FROM generate_series(31, 40) i, LATERAL dedup_begin('short', 'rec-' || i) b;
-- streams: 5 idle past a 2-second retention, 3 kept for a day
SELECT dedup_set_scope('idle', retention => '2 seconds');
SELECT count(*) FROM generate_series(1, 5) i, LATERAL dedup_advance('idle', 'p-' || i, i) a;
SELECT count(*) FROM generate_series(1, 3) i, LATERAL dedup_advance('kept', 'p-' || i, i) a;});

# 1. exactly the expired rows go, and the figures count them
ok(wait_for('SELECT count(*) FROM dedup.claims', '3020'), 'the expired rows went');
is(sql($exactly_live), '0', 'rows left are exactly the live ones');
is(sql(q{SELECT count(*) FROM dedup_claim_batch('long', ARRAY(SELECT 'live-' || i FROM generate_series(1, 3000) i))}),
	'0', 'live claims are still duplicates');
is(sql(q{SELECT string_agg(kind || '=' || rows_deleted, ' ' ORDER BY kind) FROM dedup_cleanup_stats()}),
	'claim=2000 outbox=0 record=40 stream=5', 'deleted per kind');
is(sql(q{SELECT string_agg(scope, ',' ORDER BY scope) FROM (SELECT DISTINCT scope FROM dedup.streams) s}),
	'kept', 'the streams kept are the live ones');
is(sql(q{SELECT bool_and(errors = 0 AND cleanup_lag < interval '3 seconds') FROM dedup_cleanup_stats()}),
	't', 'no errors, a lag of a few intervals at most');
is(sql(q{SELECT string_agg(DISTINCT datname, ',') FROM dedup_cleanup_stats WHERE batches > 0}),
	'app', 'the view shows app and not the databases it skips');

# 2. each skipped database is logged once, however many passes go by
sleep 3.5;    # three more intervals at least: nothing may be logged again
is($node->log_count('skips database "missingdb": it does not exist'), 1, 'missing database logged once');
is($node->log_count('skips database "noext": extension "dedup" is not installed there'),
	1, 'database without the extension logged once');
is($node->log_count('skips database "closed": it does not allow connections'),
	1, 'database that allows no connections logged once');
is($node->log_count('exited with exit code 1'), 0, 'no worker died at connection');
is($node->log_count('cleaning database "app"'), 1, 'app announced once');

# 3. a longer interval on reload: no pass for a while; back to 1 s: passes resume
reload(q{dedup.cleanup_interval = '1h'});
ok(wait_for(q{SELECT setting FROM pg_settings WHERE name = 'dedup.cleanup_interval'}, '3600'),
	'the interval is 1h after the reload');
sleep 1.5;    # let a pass started under the old setting finish
sql(q{SELECT count(*) FROM dedup_claim_batch('short', ARRAY(SELECT 'later-' || i FROM generate_series(1, 500) i))});
my $stamp = sql($last_pass);
sleep 4;      # the old interval would have run four passes by now
is(sql($last_pass), $stamp, 'no pass while the interval is 1h');
is(sql('SELECT count(*) FROM dedup.claims'), '3520', 'expired rows wait for the next pass');
reload(q{dedup.cleanup_interval = '1s'});
ok(wait_for('SELECT count(*) FROM dedup.claims', '3020', 10),
	'interval back to 1 s on reload: the expired rows went');

# 4. enabled off on reload: no pass; on: passes resume
reload('dedup.cleanup_enabled = off');
ok(wait_for(q{SELECT setting FROM pg_settings WHERE name = 'dedup.cleanup_enabled'}, 'off'),
	'cleanup is off after the reload');
sleep 1.5;
sql(q{SELECT count(*) FROM dedup_claim_batch('short', ARRAY(SELECT 'off-' || i FROM generate_series(1, 500) i))});
$stamp = sql($last_pass);
sleep 4;
is(sql($last_pass), $stamp, 'no pass while disabled');
reload('dedup.cleanup_enabled = on');
ok(wait_for('SELECT count(*) FROM dedup.claims', '3020', 10), 'enabled again on reload: the expired rows went');

# 5. a role: missing, then without the right to delete (each logged once),
# then granted: LOGIN is not needed (the worker connects as the bootstrap
# superuser and cleans as the role)
reload(q{dedup.cleanup_role = 'cleaner'});
ok(wait_for(q{SELECT setting FROM pg_settings WHERE name = 'dedup.cleanup_role'}, 'cleaner'),
	'the cleanup role is cleaner after the reload');
sql(q{SELECT count(*) FROM dedup_claim_batch('short', ARRAY(SELECT 'role-' || i FROM generate_series(1, 100) i))});
sql(q{SELECT count(*) FROM generate_series(1, 4) i, LATERAL dedup_advance('idle', 'role-' || i, i) a});
ok($node->log_within(30, 'skips database "app": role "cleaner" does not exist'), 'a missing role is logged');
$node->safe_psql('app', 'CREATE ROLE cleaner NOLOGIN');
# the message names the role the worker cleans as
ok($node->log_within(30, 'skips database "app": role "cleaner" may not delete from dedup.claims'),
	'a role without DELETE is logged, by name');
sleep 2.5;
is($node->log_count('role "cleaner" does not exist'), 1, 'missing role logged once');
is($node->log_count('role "cleaner" may not delete from dedup.claims'), 1, 'role without DELETE logged once');
is(sql('SELECT count(*) FROM dedup.claims'), '3120', 'nothing deleted without the right');
# 1.0's grant (the two tables) cleans them, and leaves the streams alone
sql('GRANT DELETE ON dedup.claims, dedup.outbox_keys TO cleaner');
ok(wait_for('SELECT count(*) FROM dedup.claims', '3020', 10), 'granted DELETE on the claims, they are cleaned');
sleep 2.5;
is(sql(q{SELECT count(*) FROM dedup.streams WHERE scope = 'idle'}), '4',
	'a role without DELETE on dedup.streams leaves the streams');
sql('GRANT DELETE ON dedup.streams TO cleaner');
ok(wait_for(q{SELECT count(*) FROM dedup.streams WHERE scope = 'idle'}, '0', 10),
	'granted DELETE, a role without LOGIN cleans');
reload(q{dedup.cleanup_role = ''});

# a database whose transactions are read-only: logged once, nothing deleted
sql(q{SELECT count(*) FROM dedup_claim_batch('short', ARRAY(SELECT 'ro-' || i FROM generate_series(1, 100) i))});
$node->safe_psql('postgres', 'ALTER DATABASE app SET default_transaction_read_only = on');
ok($node->log_within(30, 'skips database "app": its transactions are read-only'), 'a read-only database is logged');
sleep 2.5;
is($node->log_count('its transactions are read-only'), 1, 'read-only database logged once');
is(sql('SELECT count(*) FROM dedup.claims'), '3120', 'nothing deleted in a read-only database');
$node->safe_psql('postgres', 'ALTER DATABASE app RESET default_transaction_read_only');
ok(wait_for('SELECT count(*) FROM dedup.claims', '3020', 10), 'writable again, the expired rows went');

# a stage that cannot get its lock (a prepared transaction holds dedup.streams)
# fails each pass, logged and counted, and the pass goes on: the buckets'
# work, a later stage, still switches to a new bucket
sql(q{BEGIN; LOCK TABLE dedup.streams IN ACCESS EXCLUSIVE MODE; PREPARE TRANSACTION 'holds_streams';});
my $errors = sql('SELECT sum(errors) FROM dedup_cleanup_stats()');
sql(q{UPDATE dedup.buckets SET opened_at = opened_at - interval '7 hours' WHERE state = 'c'});
ok( wait_for(
		q{SELECT string_agg(bucket || state, ' ' ORDER BY bucket) FROM dedup.buckets WHERE state IN ('c', 'n')}, '1c',
		10),
	'a stage held back by a lock does not end the pass: the buckets switch');
is(sql("SELECT sum(errors) > $errors FROM dedup_cleanup_stats()"), 't', 'the stage held back failed');
sql(q{ROLLBACK PREPARED 'holds_streams'});

# 6. SIGTERM in the middle of a long pass: the worker is gone within a
# second, its batch rolled back; the next pass finishes the work
reload('dedup.cleanup_enabled = off');
ok(wait_for($workers, '0'), 'no worker while cleanup is off');
sql(q{
SELECT count(*) FROM dedup_claim_batch('long', ARRAY(SELECT 'bulk-' || i FROM generate_series(1, 100000) i));
SELECT count(*) FROM dedup_claim_batch('long', ARRAY(SELECT 'bulk-' || i FROM generate_series(100001, 200000) i));
UPDATE dedup.claims SET expires_at = now() - interval '1 minute' WHERE key NOT IN (SELECT key FROM live);});
reload('dedup.cleanup_batch_size = 1000');
reload(q{dedup.cleanup_pause = '200ms'});
reload('dedup.cleanup_enabled = on');
ok(wait_for($workers, '1'), 'a worker runs');
ok(wait_for('SELECT count(*) < 199000 FROM dedup.claims WHERE expires_at < now()', 't'), 'it is deleting');
# the worker, once it is there again: between two of its passes none may be
my $pid = '';
for (my $i = 0; $i < 100 && $pid !~ /^\d+$/; $i++)
{
	$pid = sql(q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'dedup cleanup worker'});
	sleep(0.1) unless $pid =~ /^\d+$/;
}
kill 'TERM', $pid;
my $took = DedupNode::pid_gone_within($pid, 1.0);
ok(defined $took, 'SIGTERM stopped the worker in the middle of a pass within a second')
  and note sprintf('gone after %.3fs', $took);
my $left = sql('SELECT count(*) FROM dedup.claims WHERE expires_at < now()');
is((200000 - $left) % 1000, 0, 'the worker had deleted whole batches');
reload('dedup.cleanup_batch_size = 100000');
reload('dedup.cleanup_pause = 0');
ok(wait_for('SELECT count(*) FROM dedup.claims', '3020', 60), 'the next passes finished the work');
is(sql($exactly_live), '0', 'live rows survived all of it');

# 7. SIGTERM to the launcher: gone within a second, restarted by the
# postmaster (bgw_restart_time 10 s); then kill -9: crash restart
$pid = sql($launcher_pid);
kill 'TERM', $pid;
$took = DedupNode::pid_gone_within($pid, 1.0);
ok(defined $took, 'SIGTERM stopped the launcher within a second') and note sprintf('gone after %.3fs', $took);
ok( wait_for(
		"SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'dedup cleanup launcher' AND pid <> $pid", '1', 30),
	'the postmaster restarted the launcher');
$pid = sql($launcher_pid);
kill 'KILL', $pid;
sleep 1;
ok( wait_for(
		"SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'dedup cleanup launcher' AND pid <> $pid", '1', 60),
	'after a crash restart the launcher is back');
sql(q{SELECT count(*) FROM dedup_claim_batch('short', ARRAY(SELECT 'crash-' || i FROM generate_series(1, 100) i))});
ok(wait_for('SELECT count(*) FROM dedup.claims', '3020', 30), 'and cleaning');

# 8. the worker switches to a new bucket by size, however young the current
# one: its primary key past dedup.bucket_max_size (64kB here)
my $current = sql(q{SELECT bucket FROM dedup.buckets WHERE state = 'c'});
reload(q{dedup.bucket_max_size = '64kB'});
sql(q{SELECT count(*) FROM dedup_claim_batch('long', ARRAY(SELECT 'size-' || i FROM generate_series(1, 5000) i))});
ok(wait_for("SELECT bool_or(bucket > $current) FROM dedup.buckets WHERE state = 'c'", 't', 30),
	'the worker switched buckets by size');
reload('dedup.bucket_max_size = -1');

# 9. by default the interval follows the ttls written into the current
# bucket: claims of a 2-second ttl alone make it 1 second; the worker
# switches, and the bucket goes whole, none of its rows deleted one by one
$current = sql(q{SELECT bucket FROM dedup.buckets WHERE state = 'c'});
reload('dedup.bucket_interval = 0');
my $deleted = sql(q{SELECT sum(rows_deleted) FROM dedup_cleanup_stats()});
sql(q{SELECT count(*) FROM dedup_claim_batch('short', ARRAY(SELECT 'auto-' || i FROM generate_series(1, 100) i))});
ok(wait_for("SELECT bool_or(bucket > $current) FROM dedup.buckets WHERE state = 'c'", 't', 30),
	'the worker switched buckets after the short ttls');
ok(wait_for("SELECT count(*) FROM dedup.buckets WHERE bucket = $current", '0', 30),
	'and dropped the bucket once they expired');
is(sql('SELECT count(*) FROM dedup.claims'), '8020', 'the short claims went with it, the rest stayed');
is(sql("SELECT sum(rows_deleted) - $deleted FROM dedup_cleanup_stats()"), '100', 'counted as removed');

# 10. the ttls are noted in 64 slots, one a database: with 64 databases that
# wrote claims, a 65th gets none (its interval is 6 hours), until one of the
# 64 is dropped: its slot is taken again.  The 65th ("late") has its own
# cleanup here, by hand: claims of a 2-second ttl, a bucket 1 minute old.
$node->safe_psql('postgres', 'CREATE DATABASE tmpl');
$node->safe_psql('tmpl', 'CREATE EXTENSION dedup');
# in one psql: a database copied file by file (fsync is off), one
# connection a database for its claim
$node->safe_psql('postgres',
	join('', map {
		"CREATE DATABASE slot$_ TEMPLATE tmpl STRATEGY file_copy;\n"
		  . "\\connect slot$_\n"
		  . "SELECT dedup_claim('s', 'k', ttl => '1 hour');\n"
		  . "\\connect postgres\n"
	} 1 .. 64)
	  . 'CREATE DATABASE late TEMPLATE tmpl STRATEGY file_copy;');
my $late_pass = q{
SET dedup.cleanup_pause = 0;
SELECT dedup_claim('s', 'k' || clock_timestamp(), ttl => '2 seconds');
UPDATE dedup.buckets SET opened_at = now() - interval '1 minute' WHERE state = 'c';
CALL dedup_cleanup();
CALL dedup_cleanup();
SELECT string_agg(bucket || state, ',' ORDER BY bucket) FROM dedup.buckets;
};
$node->safe_psql('late', 'SET dedup.cleanup_pause = 0; CALL dedup_cleanup()');
like($node->safe_psql('late', $late_pass), qr/^0c$/m, 'a 65th database gets no slot: 6 hours');
$node->safe_psql('postgres', 'DROP DATABASE slot1');
like($node->safe_psql('late', $late_pass), qr/^0[xs],1c$/m,
	'the slot of a dropped database is taken again: 1 second');

done_testing();
