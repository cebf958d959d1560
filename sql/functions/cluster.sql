-------------------------------------------------------------------------
-- Distributed PostgreSQL (Citus): a key's stored form for co-locating
-- business tables, the distribution of dedup's tables, and the forwarded
-- call (shards.c, routing.c)
-------------------------------------------------------------------------
-- The fingerprint a key is stored under in a scope (dedup.claims.key): a
-- business table distributed by a column of it, co-located with
-- dedup.claims, has each row on the node of its key's claim.
CREATE OR REPLACE FUNCTION @extschema@.dedup_key(scope text, key text)
RETURNS @extschema@.dedup_fingerprint
AS 'MODULE_PATHNAME', 'dedup_key_varlena' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE OR REPLACE FUNCTION @extschema@.dedup_key(scope text, key bytea)
RETURNS @extschema@.dedup_fingerprint
AS 'MODULE_PATHNAME', 'dedup_key_varlena' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE OR REPLACE FUNCTION @extschema@.dedup_key(scope text, key uuid)
RETURNS @extschema@.dedup_fingerprint
AS 'MODULE_PATHNAME', 'dedup_key_fixed' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE OR REPLACE FUNCTION @extschema@.dedup_key(scope text, key @extschema@.dedup_fingerprint)
RETURNS @extschema@.dedup_fingerprint
AS 'MODULE_PATHNAME', 'dedup_key_fixed' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE OR REPLACE FUNCTION @extschema@.dedup_key(scope text, key bigint)
RETURNS @extschema@.dedup_fingerprint
AS 'MODULE_PATHNAME', 'dedup_key_int8' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.dedup_key(text, text) IS
    'the fingerprint a key is stored under in a scope: distribute a business table by it, co-located with dedup.claims, to keep a claim and its business row on one node';
-- and a stream's, for a table co-located with dedup.streams
CREATE OR REPLACE FUNCTION @extschema@.dedup_stream_key(scope text, stream text)
RETURNS @extschema@.dedup_fingerprint
AS 'MODULE_PATHNAME', 'dedup_stream_key_sql' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.dedup_stream_key(text, text) IS
    'the fingerprint a stream''s mark is stored under in a scope (dedup.streams.key)';

-- A call forwarded to the node of its key's shard (routing.c).  Citus
-- delegates it there by its first argument once dedup_distribute() has
-- distributed it.  Internal, so in schema dedup, but left executable by
-- PUBLIC on purpose: the routing runs it as the role that called, and it
-- runs only dedup's own functions, whose EXECUTE privilege and scope grants
-- are checked there as for any call; it grants nothing.  A role reaches
-- it through schema dedup, whose USAGE dedup_distribute() gives PUBLIC on
-- every node (the tables and the other functions there stay the owner's);
-- on one server nothing calls it.
CREATE OR REPLACE FUNCTION dedup.call_on_shard(key @extschema@.dedup_fingerprint, function text, args text[])
RETURNS SETOF text[]
AS 'MODULE_PATHNAME', 'dedup_call_on_shard' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION dedup.call_on_shard(@extschema@.dedup_fingerprint, text, text[]) IS
    'run a call of one of dedup''s functions on this node, the one of its key''s shard; for dedup''s routing only';

-- Run a statement on this node and, on a Citus cluster whose dedup is
-- distributed, on every worker too: the GRANT and REVOKE of the grant
-- helpers, which Citus does not propagate for an extension's functions.
-- The workers' part runs on connections of its own, committed whatever
-- this transaction does: a grant rolled back here leaves EXECUTE on the
-- workers, which gives no scope (dedup.grants, a reference table, does).
CREATE OR REPLACE FUNCTION dedup.run_everywhere(command text)
RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    distributed boolean := false;
    failed text;
BEGIN
    EXECUTE command;
    IF to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL THEN
        EXECUTE 'SELECT EXISTS (SELECT FROM pg_catalog.pg_dist_partition'
                ' WHERE logicalrelid = ''dedup.claims''::pg_catalog.regclass)' INTO distributed;
    END IF;
    IF distributed THEN
        EXECUTE 'SELECT string_agg(format(''%s:%s: %s'', nodename, nodeport, result), ''; '')'
                ' FROM run_command_on_workers($1) WHERE NOT success' INTO failed USING command;
        IF failed IS NOT NULL THEN
            RAISE EXCEPTION 'could not run "%" on every worker of the Citus cluster', command
                USING ERRCODE = '08006', DETAIL = failed;
        END IF;
    END IF;
END
$$;
REVOKE ALL ON FUNCTION dedup.run_everywhere(text) FROM PUBLIC;

-- The outbox's partitions on a cluster (shards.c, outbox.c): that of an aggregate's
-- events, and all of them, one a shard of dedup.claims.
CREATE OR REPLACE FUNCTION dedup.outbox_partition_of(topic text, aggregate_id text)
RETURNS @extschema@.dedup_fingerprint
AS 'MODULE_PATHNAME', 'dedup_outbox_partition_of' LANGUAGE C STRICT STABLE;
REVOKE ALL ON FUNCTION dedup.outbox_partition_of(text, text) FROM PUBLIC;
CREATE OR REPLACE FUNCTION dedup.outbox_partitions()
RETURNS SETOF @extschema@.dedup_fingerprint
AS 'MODULE_PATHNAME', 'dedup_outbox_partitions' LANGUAGE C STRICT STABLE;
REVOKE ALL ON FUNCTION dedup.outbox_partitions() FROM PUBLIC;

-- Distribute dedup's tables on a Citus cluster, from its coordinator:
-- claims and records (dedup.claims) and sequence marks (dedup.streams) by
-- their key, co-located; the outbox's tables by partition (part), one a
-- shard of dedup.claims, co-located with it; scopes and grants as
-- reference tables; the forwarded call by its key.  The time buckets of
-- dedup.claims are merged into it first (the latest row of each key),
-- since Citus distributes no table with inheritance children; the
-- outbox's events move to their aggregate's partition, each partition
-- starting at its topic's position (so no batch may be handed out, and no
-- key of 1.0 kept).  The histories' tables are distributed by part,
-- co-located (each shard's filters with its keys).  Once, by the
-- extension's owner.
CREATE OR REPLACE FUNCTION @extschema@.dedup_distribute(shard_count integer DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    b record;
    g record;
    n integer;
BEGIN
    IF NOT EXISTS (SELECT FROM pg_extension WHERE extname = 'citus') THEN
        RAISE EXCEPTION 'Citus is not installed in this database'
            USING ERRCODE = '55000',
                  HINT = 'Run CREATE EXTENSION citus first, and add the worker nodes.';
    END IF;
    IF (SELECT groupid FROM pg_dist_local_group) <> 0 THEN
        RAISE EXCEPTION 'dedup_distribute() runs on the coordinator of a Citus cluster'
            USING ERRCODE = '55000';
    END IF;
    IF EXISTS (SELECT FROM pg_dist_partition WHERE logicalrelid = 'dedup.claims'::regclass) THEN
        RAISE EXCEPTION 'dedup''s tables are distributed already'
            USING ERRCODE = '55000';
    END IF;
    -- dedup.cluster_commit (below) has its shard on the coordinator
    IF EXISTS (SELECT FROM pg_dist_node) AND NOT EXISTS (SELECT FROM pg_dist_node WHERE groupid = 0) THEN
        RAISE EXCEPTION 'the coordinator is not in Citus''s metadata'
            USING ERRCODE = '55000',
                  DETAIL = 'dedup''s two-phase commit across nodes writes a table whose shard is on the coordinator.',
                  HINT = 'Run SELECT citus_set_coordinator_host(''<host>'', <port>) on the coordinator first.';
    END IF;
    IF shard_count IS NOT NULL AND (shard_count < 1 OR shard_count > 64000) THEN
        RAISE EXCEPTION 'shard_count must be between 1 and 64000'
            USING ERRCODE = '22023';
    END IF;
    -- a history's generations hold keys of every shard in one filter,
    -- which cannot be split by shard without its keys
    IF EXISTS (SELECT FROM dedup.history_generations) THEN
        RAISE EXCEPTION 'a history that has folded keys does not move to a Citus cluster'
            USING ERRCODE = '0A000',
                  DETAIL = 'On a cluster each shard keeps the filters of its own keys; a filter folded on one server holds keys of every shard and cannot be split without them.',
                  HINT = 'Distribute before the first fold, or once the generations expired (dedup_history(scope) lists them), or take the histories away: dedup_set_scope(scope, history => ''0'').';
    END IF;

    -- no call reads or writes claims or the outbox while they move
    LOCK TABLE dedup.buckets, dedup.claims, dedup.outbox, dedup.outbox_topics,
               dedup.outbox_batches, dedup.outbox_retry, dedup.outbox_held, dedup.outbox_dead,
               dedup.outbox_keys
        IN ACCESS EXCLUSIVE MODE;
    IF EXISTS (SELECT FROM dedup.outbox_batches AS x
               WHERE x.busy AND NOT EXISTS (SELECT FROM dedup.outbox_batches AS y
                                            WHERE y.id = x.id AND y.rev > x.rev)) THEN
        RAISE EXCEPTION 'the outbox has batches handed out'
            USING ERRCODE = '55000',
                  DETAIL = 'The events of a batch move to the partitions of their aggregates on the cluster.',
                  HINT = 'Ack or nack them (dedup_outbox_ack_batch, dedup_outbox_nack_batch, or dedup_outbox_ack and dedup_outbox_nack by id), then distribute.';
    END IF;
    IF EXISTS (SELECT FROM dedup.outbox_keys WHERE expires_at > pg_catalog.statement_timestamp()) THEN
        RAISE EXCEPTION 'keys of outbox events put by dedup 1.0 are kept'
            USING ERRCODE = '55000',
                  DETAIL = 'A cluster keeps the key of an event in its partition only.',
                  HINT = 'Distribute once their topics'' retention passed (the cleanup deletes them).';
    END IF;
    DELETE FROM dedup.outbox_keys;
    CREATE TEMP TABLE dedup_merged ON COMMIT DROP AS
        SELECT * FROM ONLY dedup.claims WITH NO DATA;
    ALTER TABLE dedup_merged ADD COLUMN bucket integer;
    FOR b IN SELECT bucket, relid FROM dedup.buckets WHERE bucket <> 0 LOOP
        EXECUTE format('INSERT INTO dedup_merged SELECT *, %s FROM %s', b.bucket, b.relid);
    END LOOP;
    -- a key's latest row is in its newest bucket; bucket 0 is dedup.claims itself
    DELETE FROM ONLY dedup.claims c USING dedup_merged m WHERE c.key OPERATOR(@extschema@.=) m.key;
    INSERT INTO dedup.claims
        SELECT DISTINCT ON (key) key, expires_at, record, history FROM dedup_merged
        ORDER BY key, bucket DESC;
    FOR b IN SELECT bucket, relid FROM dedup.buckets WHERE bucket <> 0 LOOP
        EXECUTE format('DROP TABLE %s', b.relid);
    END LOOP;
    DELETE FROM dedup.buckets;

    n := coalesce(shard_count, current_setting('citus.shard_count')::integer);
    -- the triggers that tell each node's backends the scopes changed go
    -- onto the shards of the reference tables, where the rows are written
    PERFORM set_config('citus.enable_unsafe_triggers', 'on', true);
    PERFORM create_reference_table('dedup.scopes');
    -- the grants by role name, as change_grant writes them, so that each node
    -- stores its own OID of each role (Citus copies a table's rows as they are)
    CREATE TEMP TABLE dedup_grants_by_name ON COMMIT DROP AS
        SELECT role::text AS role_name, privilege, scope, granted_at FROM dedup.grants;
    DELETE FROM dedup.grants;
    PERFORM create_reference_table('dedup.grants');
    FOR g IN SELECT * FROM dedup_grants_by_name LOOP
        EXECUTE format('INSERT INTO dedup.grants (role, privilege, scope, granted_at)'
                       ' VALUES (%L::pg_catalog.regrole, %L, %L, %L)',
                       g.role_name, g.privilege, g.scope, g.granted_at);
    END LOOP;
    PERFORM create_distributed_table('dedup.claims', 'key', shard_count => n);
    PERFORM create_distributed_table('dedup.streams', 'key', colocate_with => 'dedup.claims');
    -- the histories: each shard of dedup.claims keeps the filters of its own
    -- keys, in the shards of these tables of its index (co-located, by the
    -- part of its outbox partition, a key it holds), so that a look-up
    -- stays on the key's node and a shard move carries them; history_folds
    -- says which shards of a bucket were folded (history.c).  A
    -- generation's number is given by the node that opens it (its group in
    -- the high bits), not by the sequence's default.
    ALTER TABLE dedup.history_generations ALTER COLUMN generation DROP DEFAULT,
        ALTER COLUMN part SET NOT NULL, ALTER COLUMN hash_min SET NOT NULL,
        ALTER COLUMN hash_max SET NOT NULL,
        DROP CONSTRAINT history_generations_pkey,
        ADD CONSTRAINT history_generations_pkey PRIMARY KEY (generation, part);
    ALTER TABLE dedup.history_blocks ALTER COLUMN part SET NOT NULL,
        DROP CONSTRAINT history_blocks_pkey,
        ADD CONSTRAINT history_blocks_pkey PRIMARY KEY (generation, chunk, part);
    CREATE TABLE dedup.history_folds (
        part      @extschema@.dedup_fingerprint NOT NULL,
        bucket    integer NOT NULL,
        keys      bigint NOT NULL,
        folded_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
        CONSTRAINT history_folds_pkey PRIMARY KEY (bucket, part)
    );
    COMMENT ON TABLE dedup.history_folds IS 'on a Citus cluster: the shards of each sealed bucket whose claims were folded into their histories, by part';
    PERFORM create_distributed_table('dedup.history_generations', 'part', colocate_with => 'dedup.claims');
    PERFORM create_distributed_table('dedup.history_blocks', 'part', colocate_with => 'dedup.claims');
    PERFORM create_distributed_table('dedup.history_folds', 'part', colocate_with => 'dedup.claims');
    -- the shards of dedup.claims whose histories are whole for their range
    -- (history.c): a split's children are not, until the cleanup's repair
    -- copied the parent's generations into them (dedup.history_cluster_repair)
    CREATE TABLE dedup.history_spans (
        shardid  bigint PRIMARY KEY,
        hash_min integer NOT NULL,
        hash_max integer NOT NULL
    );
    COMMENT ON TABLE dedup.history_spans IS 'on a Citus cluster: the shards of dedup.claims whose histories are whole for their range of hashes (a split''s children are not, until the cleanup copied the parent''s filters into them)';
    PERFORM create_reference_table('dedup.history_spans');
    -- the outbox: each event to the partition of its aggregate, each
    -- partition of a topic from the topic's position (every event of it
    -- before that was handed out, or is held in dedup.outbox_retry or
    -- dedup.outbox_held, whose rows go with their aggregates)
    CREATE TEMP TABLE dedup_positions ON COMMIT DROP AS
        SELECT t.topic, max((dedup.outbox_position(t.part, t.topic)).next_seq) AS next_seq
        FROM dedup.outbox_topics AS t GROUP BY t.topic;
    DELETE FROM dedup.outbox_topics;
    -- the batches' rows stay where they are, in partition 0 (one
    -- server's), none of them out, with their ids (partition 0's): the
    -- counter of ids goes on, so the id of a batch handed out before never
    -- names one handed out after; partition 0's position is its row in
    -- outbox_topics (below), at least its newest batch row's
    UPDATE dedup.outbox SET part = dedup.outbox_partition_of(topic, aggregateid);
    UPDATE dedup.outbox_retry SET part = dedup.outbox_partition_of(topic, aggregateid);
    UPDATE dedup.outbox_held SET part = dedup.outbox_partition_of(topic, aggregateid);
    UPDATE dedup.outbox_dead SET part = dedup.outbox_partition_of(topic, aggregateid);
    -- the partition first in the keys (one server's have one partition),
    -- as Citus wants its distribution column in them
    ALTER TABLE dedup.outbox
        DROP CONSTRAINT outbox_pkey, ADD CONSTRAINT outbox_pkey PRIMARY KEY (part, id);
    DROP INDEX dedup.outbox_topic_seq;
    CREATE UNIQUE INDEX outbox_topic_seq ON dedup.outbox (part, topic, seq);
    ALTER TABLE dedup.outbox_topics
        DROP CONSTRAINT outbox_topics_pkey, ADD CONSTRAINT outbox_topics_pkey PRIMARY KEY (part, topic);
    ALTER TABLE dedup.outbox_batches
        DROP CONSTRAINT outbox_batches_pkey, ADD CONSTRAINT outbox_batches_pkey PRIMARY KEY (part, id, rev);
    ALTER TABLE dedup.outbox_retry
        DROP CONSTRAINT outbox_retry_pkey, ADD CONSTRAINT outbox_retry_pkey PRIMARY KEY (part, id);
    ALTER TABLE dedup.outbox_held
        DROP CONSTRAINT outbox_held_pkey,
        ADD CONSTRAINT outbox_held_pkey PRIMARY KEY (part, topic, aggregateid);
    ALTER TABLE dedup.outbox_dead
        DROP CONSTRAINT outbox_dead_pkey, ADD CONSTRAINT outbox_dead_pkey PRIMARY KEY (part, id);
    INSERT INTO dedup.outbox_topics (part, topic, next_seq)
        SELECT p.part, x.topic, x.next_seq
        FROM dedup_positions AS x, dedup.outbox_partitions() AS p(part);
    PERFORM create_distributed_table('dedup.outbox', 'part', colocate_with => 'dedup.claims');
    PERFORM create_distributed_table('dedup.outbox_topics', 'part', colocate_with => 'dedup.claims');
    PERFORM create_distributed_table('dedup.outbox_batches', 'part', colocate_with => 'dedup.claims');
    PERFORM create_distributed_table('dedup.outbox_retry', 'part', colocate_with => 'dedup.claims');
    PERFORM create_distributed_table('dedup.outbox_held', 'part', colocate_with => 'dedup.claims');
    PERFORM create_distributed_table('dedup.outbox_dead', 'part', colocate_with => 'dedup.claims');
    -- the counter of batch ids on every node past this one's: partition 0's
    -- batch rows keep their ids, and its next batches are handed out on
    -- the node of its shard, from that node's counter (src/outbox.c), so
    -- that no id handed out before names a batch handed out after
    PERFORM dedup.run_everywhere(format('SELECT pg_catalog.setval(%L, %s, %L)', 'dedup.outbox_batch_ids',
                                        c.last_value, c.is_called))
    FROM dedup.outbox_batch_ids AS c;
    -- the two-phase commit of a transaction that sent a call to another node
    -- and wrote on its own (src/routing.c): before it commits, dedup deletes
    -- (no row) from this table, always empty, which Citus manages with its
    -- one shard on the coordinator: a write on a second node as Citus sees
    -- it, and Citus commits every transaction that wrote on more than one
    -- node with two-phase commit.  Made here, on the coordinator, and not by
    -- the install script: Citus makes the table a shard and puts a table of
    -- its own in its place on every node, which an extension's table on the
    -- workers would clash with.  No role but the owner reads or writes it.
    CREATE TABLE dedup.cluster_commit (
        id integer CONSTRAINT cluster_commit_pkey PRIMARY KEY,
        CONSTRAINT cluster_commit_empty CHECK (false)
    );
    COMMENT ON TABLE dedup.cluster_commit IS 'on a Citus cluster, always empty: deleted from before a transaction that sent a call to another node and wrote on its own commits, so that Citus commits it with two-phase commit';
    PERFORM citus_add_local_table_to_metadata('dedup.cluster_commit');
    PERFORM create_distributed_function(
        'dedup.call_on_shard(@extschema@.dedup_fingerprint, text, text[])', '$1',
        colocate_with => 'dedup.claims', force_delegation => true);
    -- a routed call runs dedup.call_on_shard as the role that called, here
    -- and on the node of its key: every role may look it up in schema dedup
    -- (USAGE only: its tables and other functions stay the owner's)
    PERFORM dedup.run_everywhere('GRANT USAGE ON SCHEMA dedup TO PUBLIC');
    -- the roles granted before: their EXECUTE on the workers too (the rows
    -- are there already, so change_grant only grants)
    FOR g IN SELECT role_name, privilege,
                    array_agg(scope) FILTER (WHERE scope IS NOT NULL) AS scopes,
                    bool_or(scope IS NULL) AS every_scope
             FROM dedup_grants_by_name GROUP BY 1, 2 LOOP
        PERFORM dedup.change_grant(g.role_name::regrole, g.privilege,
                                   CASE WHEN NOT g.every_scope THEN g.scopes END, true);
    END LOOP;
END;
$$;
COMMENT ON FUNCTION @extschema@.dedup_distribute(integer) IS
    'on a Citus coordinator: distribute dedup.claims and dedup.streams by key (shard_count shards, citus.shard_count by default) and the outbox by partition (one a shard), make the scopes and grants reference tables, and route calls to the node of their key';
REVOKE ALL ON FUNCTION @extschema@.dedup_distribute(integer) FROM PUBLIC;

-- The time buckets of dedup.claims on a cluster (bucket.c): one step of
-- their work on this node, as the coordinator's cleanup asks.  Internal.
CREATE OR REPLACE FUNCTION dedup.bucket_node(action text, bucket integer)
RETURNS text
AS 'MODULE_PATHNAME', 'dedup_bucket_node' LANGUAGE C STRICT VOLATILE;
REVOKE ALL ON FUNCTION dedup.bucket_node(text, integer) FROM PUBLIC;

-- Tell every worker (their results, failures as '!' || the error), from the coordinator.
CREATE OR REPLACE FUNCTION dedup.bucket_workers(action text, bucket integer)
RETURNS text[]
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    results text[];
BEGIN
    EXECUTE 'SELECT coalesce(array_agg(CASE WHEN success THEN result ELSE ''!'' || result END), ''{}'')'
            ' FROM run_command_on_workers($1)'
        INTO results USING CASE WHEN action = 'fold'
                                THEN format('SELECT dedup.history_fold_node(%s)', bucket)
                                ELSE format('SELECT dedup.bucket_node(%L, %s)', action, bucket) END;
    RETURN results;
END
$$;
REVOKE ALL ON FUNCTION dedup.bucket_workers(text, integer) FROM PUBLIC;

-- One step of the buckets' work on a cluster, driven by the coordinator's
-- cleanup (bucket.c, the cleanup's steps 0 to 4): open a bucket (its table
-- created and distributed, co-located with dedup.claims) when a node's
-- current bucket is due, by time or by its shards' size there; switch to it
-- once every node lists it, each node after the calls there on the current
-- one ended; seal a closed one once every node did, reading its latest
-- expiry across the shards; retire it on every node once that passed; drop
-- its table once every node retired it.  The coordinator's dedup.buckets
-- is the cluster's list: a bucket moves on there once every node's did.  A
-- node that cannot be reached leaves the step to the next pass.  Returns
-- the rows of the buckets dropped.
CREATE OR REPLACE FUNCTION dedup.bucket_cluster_step(step integer,
                                                     OUT claims bigint, OUT records bigint)
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    b record;
    r text[];
    due boolean;
    nrows integer;
    nlive integer;
    name text;
    mx timestamptz;
    nclaims bigint;
    nrecords bigint;
    msg text;
    folds boolean;
BEGIN
    claims := 0;
    records := 0;
    -- the coordinator's list is the cluster's: a worker's own is told, never tells
    IF EXISTS (SELECT FROM pg_dist_local_group WHERE groupid <> 0) THEN
        RAISE EXCEPTION 'the buckets of dedup.claims are driven from the coordinator of the Citus cluster'
            USING ERRCODE = '0A000',
                  DETAIL = 'This node is a worker: its dedup.buckets lists the buckets as the coordinator told it, without their latest expiry.',
                  HINT = 'Run CALL dedup_cleanup() on the coordinator.';
    END IF;
    IF step = 0 THEN
        IF NOT EXISTS (SELECT FROM dedup.buckets) THEN
            -- the first pass: bucket 0, dedup.claims itself, on every node
            PERFORM dedup.bucket_node('list', 0);
            PERFORM dedup.bucket_workers('list', 0);
            RETURN;
        END IF;
        -- a node added since the buckets began lists them all (while it
        -- holds no shard), so that a shard moved to it finds its claims
        PERFORM dedup.bucket_workers('adopt:' || (SELECT string_agg(bucket || state, ',' ORDER BY bucket)
                                                   FROM dedup.buckets WHERE state IN ('c', 'x', 's')),
                                     (SELECT bucket FROM dedup.buckets WHERE state = 'c'));
        IF EXISTS (SELECT FROM dedup.buckets WHERE state = 'n') THEN
            RETURN;                 -- opened, not yet switched to
        END IF;
        SELECT count(*), count(*) FILTER (WHERE state <> 'r') INTO nrows, nlive FROM dedup.buckets;
        IF nrows >= 128 OR nlive >= 64 THEN
            RAISE WARNING 'dedup.claims keeps its current bucket: dedup.buckets lists % buckets', nrows
                USING ERRCODE = '54000',
                      HINT = 'A node that cannot be reached holds back the drops; raise dedup.bucket_max_size or dedup.bucket_interval.';
            RETURN;
        END IF;
        r := dedup.bucket_workers('due', (SELECT bucket FROM dedup.buckets WHERE state = 'c'));
        due := 't' = ANY (r) OR dedup.bucket_node('due', 0) = 't';
        -- Citus creates a table on every node: none opened while one is down
        IF NOT due OR EXISTS (SELECT FROM unnest(r) x WHERE x LIKE '!%') THEN
            RETURN;
        END IF;
        name := format('claims_%s', (SELECT max(bucket) + 1 FROM dedup.buckets));
        BEGIN
            EXECUTE format('CREATE TABLE dedup.%I (LIKE dedup.claims INCLUDING DEFAULTS INCLUDING CONSTRAINTS,'
                           ' CONSTRAINT %I PRIMARY KEY (key)) WITH (autovacuum_vacuum_scale_factor = 0.02)',
                           name, name || '_pkey');
            PERFORM create_distributed_table(format('dedup.%I', name), 'key', colocate_with => 'dedup.claims');
        EXCEPTION WHEN internal_error THEN
            -- Citus creates no table co-located with a group one of whose
            -- shards moves (citus_move_shard_placement, the rebalancer),
            -- and says so without a SQLSTATE: the current bucket keeps the
            -- claims, and a pass after the move opens the next
            GET STACKED DIAGNOSTICS msg = MESSAGE_TEXT;
            IF msg NOT LIKE 'could not acquire the lock required to colocate %' THEN
                RAISE;
            END IF;
            RAISE NOTICE 'dedup.claims opens its next bucket at a later pass: a shard of dedup.claims is moving'
                USING DETAIL = format('Citus said: %s', msg);
            RETURN;
        END;
        PERFORM dedup.bucket_node('list', (SELECT max(bucket) + 1 FROM dedup.buckets));
    ELSIF step = 1 THEN
        FOR b IN SELECT bucket FROM dedup.buckets WHERE state = 'n' LOOP
            -- every node reads it before any writes it
            r := dedup.bucket_workers('list', b.bucket);
            CONTINUE WHEN EXISTS (SELECT FROM unnest(r) x WHERE x <> 'n' AND x <> 'c');
            r := dedup.bucket_workers('switch', b.bucket);
            CONTINUE WHEN EXISTS (SELECT FROM unnest(r) x WHERE x <> 'c');
            PERFORM dedup.bucket_node('switch', b.bucket);
        END LOOP;
    ELSIF step = 2 THEN
        -- the histories made whole after a split, and every shard's span
        -- written, before any fold into it (step 3, a transaction after)
        IF EXISTS (SELECT FROM dedup.scopes WHERE history_id IS NOT NULL AND history IS NOT NULL) THEN
            PERFORM dedup.history_cluster_repair();
        END IF;
        FOR b IN SELECT bucket FROM dedup.buckets WHERE state = 'x' ORDER BY bucket LOOP
            r := dedup.bucket_workers('seal', b.bucket);
            CONTINUE WHEN EXISTS (SELECT FROM unnest(r) x WHERE x <> 's');
            -- every node's writers ended: its latest expiry, across its shards
            EXECUTE format('SELECT max(expires_at), count(*) FILTER (WHERE record IS NULL),'
                           ' count(*) FILTER (WHERE record IS NOT NULL) FROM dedup.%I',
                           CASE WHEN b.bucket = 0 THEN 'claims' ELSE format('claims_%s', b.bucket) END)
                INTO mx, nclaims, nrecords;
            PERFORM dedup.bucket_node('seal', b.bucket);
            UPDATE dedup.buckets SET max_expires_at = mx, claims = nclaims, records = nrecords
                WHERE bucket = b.bucket;
        END LOOP;
    ELSIF step = 3 THEN
        folds := EXISTS (SELECT FROM dedup.scopes WHERE history_id IS NOT NULL AND history IS NOT NULL);
        FOR b IN SELECT bucket FROM dedup.buckets
                 WHERE state = 's' AND (max_expires_at IS NULL OR max_expires_at <= clock_timestamp()) LOOP
            IF folds THEN
                -- every node folds its shards of the bucket into their
                -- histories, each shard once (dedup.history_folds, which
                -- moves with it); no node stops reading the bucket until
                -- every shard's fold committed, wherever it is now
                r := dedup.bucket_workers('fold', b.bucket);
                -- a node that cannot be reached (or failed) folds at a later pass
                CONTINUE WHEN EXISTS (SELECT FROM unnest(r) x WHERE x LIKE '!%');
                PERFORM dedup.history_fold_node(b.bucket);
                CONTINUE WHEN (SELECT count(*) FROM dedup.history_folds f WHERE f.bucket = b.bucket)
                              < (SELECT count(*) FROM pg_dist_shard WHERE logicalrelid = 'dedup.claims'::regclass);
            END IF;
            r := dedup.bucket_workers('retire', b.bucket);
            CONTINUE WHEN EXISTS (SELECT FROM unnest(r) x WHERE x <> 'r');
            PERFORM dedup.bucket_node('retire', b.bucket);
        END LOOP;
        -- the generations whose time passed, from every shard: not while a
        -- node cannot be reached (Citus deletes from every shard at once)
        IF EXISTS (SELECT FROM dedup.scopes WHERE history_id IS NOT NULL)
           AND NOT EXISTS (SELECT FROM unnest(dedup.bucket_workers('state', 0)) x WHERE x LIKE '!%') THEN
            PERFORM dedup.history_cluster_expire();
        END IF;
    ELSIF step = 4 THEN
        -- claims IS NULL: dropped by an earlier pass, not yet unlisted everywhere
        FOR b IN SELECT bucket, buckets.claims AS c, buckets.records AS rc
                 FROM dedup.buckets WHERE state = 'r' LOOP
            -- Citus drops the table on every node: not while one is down
            r := dedup.bucket_workers('state', b.bucket);
            CONTINUE WHEN EXISTS (SELECT FROM unnest(r) x WHERE x LIKE '!%');
            IF b.c IS NOT NULL THEN
                IF b.bucket = 0 THEN
                    TRUNCATE dedup.claims;
                ELSIF to_regclass(format('dedup.%I', format('claims_%s', b.bucket))) IS NOT NULL THEN
                    EXECUTE format('DROP TABLE dedup.%I', format('claims_%s', b.bucket));
                END IF;
                DELETE FROM dedup.history_folds f WHERE f.bucket = b.bucket;
                claims := claims + b.c;
                records := records + coalesce(b.rc, 0);
                UPDATE dedup.buckets SET claims = NULL, records = NULL WHERE bucket = b.bucket;
            END IF;
            -- unlisted here only once every node unlisted it ('-'): a node
            -- that did not keeps it for the next pass, which asks again
            r := dedup.bucket_workers('forget', b.bucket);
            CONTINUE WHEN EXISTS (SELECT FROM unnest(r) x WHERE x <> '-');
            PERFORM dedup.bucket_node('forget', b.bucket);
        END LOOP;
    END IF;
END
$$;
REVOKE ALL ON FUNCTION dedup.bucket_cluster_step(integer) FROM PUBLIC;

-- The histories on a cluster (history.c): fold this node's shards of a
-- sealed bucket into their histories, each shard once; returns the keys
-- folded.  Internal, the coordinator's cleanup's (bucket_cluster_step).
CREATE OR REPLACE FUNCTION dedup.history_fold_node(bucket integer)
RETURNS bigint
AS 'MODULE_PATHNAME', 'dedup_history_fold_node' LANGUAGE C STRICT VOLATILE;
REVOKE ALL ON FUNCTION dedup.history_fold_node(integer) FROM PUBLIC;

-- Delete the generations whose slice ended a window ago, and those of
-- scopes that have no history any more, from every shard (each node frees
-- its memory of them when it needs the room: filter.c).
CREATE OR REPLACE FUNCTION dedup.history_cluster_expire()
RETURNS bigint
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    s record;
    g record;
    gone bigint[] := '{}';
    live integer[];
BEGIN
    IF to_regclass('dedup.history_folds') IS NULL THEN
        RETURN 0;
    END IF;
    SELECT coalesce(array_agg(history_id), '{}') INTO live FROM dedup.scopes
        WHERE history_id IS NOT NULL AND history IS NOT NULL;
    FOR s IN SELECT history_id, history FROM dedup.scopes
             WHERE history_id IS NOT NULL AND history IS NOT NULL LOOP
        FOR g IN DELETE FROM dedup.history_generations
                 WHERE history_id = s.history_id AND slice_end <= pg_catalog.now() - s.history
                 RETURNING generation LOOP
            gone := gone || g.generation;
        END LOOP;
    END LOOP;
    FOR g IN DELETE FROM dedup.history_generations WHERE history_id <> ALL (live)
             RETURNING generation LOOP
        gone := gone || g.generation;
    END LOOP;
    IF cardinality(gone) > 0 THEN
        DELETE FROM dedup.history_blocks WHERE generation = ANY (gone);
    END IF;
    RETURN cardinality(gone);
END
$$;
REVOKE ALL ON FUNCTION dedup.history_cluster_expire() FROM PUBLIC;

-- The histories after a split of a shard of dedup.claims (history.c): Citus
-- sent every row of the parent's generations to the one child whose range
-- holds their part, but each child's keys may be in them.  Copy each
-- generation whose range (hash_min, hash_max) passes its shard's into every
-- other shard of dedup.claims its range overlaps, rows and chunks, under that
-- shard's part and a number of the coordinator's, and narrow every copy to
-- its shard's range; then the spans: the shards gone unlisted, those not
-- listed listed (dedup.history_spans), which lets their look-ups and folds
-- go on.  In one transaction, from the coordinator's cleanup (its seal
-- step), before any fold; returns the generations copied.  Internal.
CREATE OR REPLACE FUNCTION dedup.history_cluster_repair()
RETURNS bigint
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    g record;
    c record;
    home bigint;
    lo integer;
    hi integer;
    cpart @extschema@.dedup_fingerprint;
    gen bigint;
    copied bigint := 0;
    gone bigint[];
    ids bigint[];
    mins integer[];
    maxs integer[];
BEGIN
    IF to_regclass('dedup.history_spans') IS NULL THEN
        RETURN 0;
    END IF;
    FOR g IN SELECT generation, part, hash_min, hash_max FROM dedup.history_generations
             ORDER BY generation, part LOOP
        home := get_shard_id_for_distribution_column('dedup.claims', g.part);
        SELECT shardminvalue::integer, shardmaxvalue::integer INTO lo, hi
            FROM pg_dist_shard WHERE shardid = home;
        CONTINUE WHEN g.hash_min >= lo AND g.hash_max <= hi;
        FOR c IN SELECT shardid, shardminvalue::integer AS min, shardmaxvalue::integer AS max
                 FROM pg_dist_shard
                 WHERE logicalrelid = 'dedup.claims'::regclass AND shardid <> home
                   AND shardminvalue::integer <= g.hash_max AND shardmaxvalue::integer >= g.hash_min
                 ORDER BY shardminvalue::integer LOOP
            SELECT p INTO STRICT cpart FROM dedup.outbox_partitions() p
                WHERE get_shard_id_for_distribution_column('dedup.claims', p) = c.shardid;
            -- numbered as the coordinator's (its group, 0, + 1 in the high bits)
            gen := (1::bigint << 48) + nextval('dedup.history_generations_seq');
            INSERT INTO dedup.history_generations
                (generation, history_id, opened_at, slice_end, rate, k, nblocks, capacity, keys,
                 part, hash_min, hash_max)
                SELECT gen, history_id, opened_at, slice_end, rate, k, nblocks, capacity, keys,
                       cpart, greatest(hash_min, c.min), least(hash_max, c.max)
                FROM dedup.history_generations
                WHERE generation = g.generation AND part OPERATOR(@extschema@.=) g.part;
            INSERT INTO dedup.history_blocks (generation, chunk, bits, part)
                SELECT gen, chunk, bits, cpart FROM dedup.history_blocks
                WHERE generation = g.generation AND part OPERATOR(@extschema@.=) g.part;
            copied := copied + 1;
        END LOOP;
        UPDATE dedup.history_generations
            SET hash_min = greatest(hash_min, lo), hash_max = least(hash_max, hi)
            WHERE generation = g.generation AND part OPERATOR(@extschema@.=) g.part;
    END LOOP;
    -- (Citus writes a reference table from a statement that reads no local table)
    gone := ARRAY(SELECT x.shardid FROM dedup.history_spans x WHERE NOT EXISTS
                      (SELECT FROM pg_dist_shard d WHERE d.shardid = x.shardid
                       AND d.logicalrelid = 'dedup.claims'::regclass));
    IF cardinality(gone) > 0 THEN
        DELETE FROM dedup.history_spans WHERE shardid = ANY (gone);
    END IF;
    SELECT coalesce(array_agg(d.shardid), '{}'), coalesce(array_agg(d.shardminvalue::integer), '{}'),
           coalesce(array_agg(d.shardmaxvalue::integer), '{}')
        INTO ids, mins, maxs
        FROM pg_dist_shard d WHERE d.logicalrelid = 'dedup.claims'::regclass
        AND d.shardid <> ALL (ARRAY(SELECT x.shardid FROM dedup.history_spans x));
    IF cardinality(ids) > 0 THEN
        INSERT INTO dedup.history_spans (shardid, hash_min, hash_max)
            SELECT * FROM unnest(ids, mins, maxs);
    END IF;
    RETURN copied;
END
$$;
REVOKE ALL ON FUNCTION dedup.history_cluster_repair() FROM PUBLIC;
