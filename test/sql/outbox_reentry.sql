-- A take run by a statement of a take: a trigger on dedup.outbox_batches
-- (a superuser's) that takes from another topic while the fast path's
-- take inserts its batch row.  The inner take must not free the outer's
-- kept plans (outbox_fast.c, fast_plans_check_size(): a take frees them
-- once outbox_batches grew past 4x + 8 blocks of their size) while one of
-- them runs: SPI went on reading the freed plan (here the statement's
-- text in the error's context, read back as garbage).
TRUNCATE dedup.outbox, dedup.outbox_topics, dedup.outbox_batches, dedup.outbox_retry, dedup.outbox_held,
         dedup.outbox_dead;
SELECT dedup_outbox_put(t, t || '-' || i, jsonb_build_object(t, i), t || i) IS NOT NULL AS put
FROM generate_series(1, 3) i, unnest(ARRAY['ra', 'rb']) t;
-- a position for both topics (a topic's first take is the PL/pgSQL one's)
SELECT dedup_outbox_ack_batch(batch_id) FROM dedup_outbox_take_batch('ra', 1);
SELECT dedup_outbox_ack_batch(batch_id) FROM dedup_outbox_take_batch('rb', 1);
CREATE TABLE reentry_inner (payload jsonb);
-- on ra's batch row: outbox_batches grown past 8 blocks (rows of another
-- topic, settled), then a take from rb; then an error if asked
CREATE FUNCTION reentry_trigger() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.topic = 'ra' AND NEW.rev = 0 AND current_setting('regress.reenter', true) = 'on' THEN
    PERFORM set_config('regress.reenter', 'off', true);
    INSERT INTO dedup.outbox_batches (part, topic, id, rev, busy, next_seq, low_id)
    SELECT NEW.part, 'junk', -g, 0, false, 0, 0 FROM generate_series(1, 1500) g;
    INSERT INTO public.reentry_inner SELECT payload FROM public.dedup_outbox_take_batch('rb', 1);
    IF current_setting('regress.raise', true) = 'on' THEN
      RAISE EXCEPTION 'after the inner take';
    END IF;
  END IF;
  RETURN NEW;
END $$;
CREATE TRIGGER reentry BEFORE INSERT ON dedup.outbox_batches
  FOR EACH ROW EXECUTE FUNCTION reentry_trigger();
-- a new session: its plans made at the first take, while the table is small
\c
SELECT pg_relation_size('dedup.outbox_batches') < 8 * 8192 AS small;
-- the take, failing after the inner one: its error names the statement it
-- ran, which the inner take left as it was
CREATE FUNCTION reentry_context() RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
  ctx text;
BEGIN
  PERFORM set_config('regress.reenter', 'on', true);
  PERFORM set_config('regress.raise', 'on', true);
  PERFORM dedup_outbox_take_batch('ra', 1);
  RETURN NULL;
EXCEPTION WHEN raise_exception THEN
  GET STACKED DIAGNOSTICS ctx = PG_EXCEPTION_CONTEXT;
  RETURN ctx LIKE '%INSERT INTO dedup.outbox_batches (part, topic, id, rev, busy, attempt,%'
    OR current_setting('dedup.outbox_fast_path') = 'off';
END $$;
SELECT reentry_context() AS context_intact;
-- nothing written: no batch out, the junk rolled back
SELECT count(*) AS rows FROM dedup.outbox_batches WHERE topic = 'junk';
SELECT count(*) AS out FROM dedup.outbox_inflight;
SELECT count(*) AS inner_taken FROM reentry_inner;
-- the take again, in a new session, with no error: both batches handed out,
-- each with its topic's next event, and acked whole
\c
SELECT set_config('regress.reenter', 'on', false) \gset
SELECT payload FROM dedup_outbox_take_batch('ra', 1);
SELECT payload FROM reentry_inner;
SELECT topic, events FROM dedup.outbox_inflight ORDER BY topic;
SELECT sum(dedup_outbox_ack_batch(id)) AS acked FROM dedup.outbox_inflight;
DROP TRIGGER reentry ON dedup.outbox_batches;
-- the rest of each topic, in order, once
SELECT payload FROM dedup_outbox_take_batch('ra', 5);
SELECT payload FROM dedup_outbox_take_batch('rb', 5);
DROP FUNCTION reentry_context();
DROP FUNCTION reentry_trigger();
DROP TABLE reentry_inner;
TRUNCATE dedup.outbox, dedup.outbox_topics, dedup.outbox_batches, dedup.outbox_retry, dedup.outbox_held,
         dedup.outbox_dead;
