-- Helpers the other regress tests share; pg_regress runs this file first.
-- They are not temporary (pg_temp), so that each is written once: they
-- live in the test database, which every test after this one uses.

-- Run a statement; say "no error", or the SQLSTATE and message it failed
-- with.  The statement runs in a subtransaction, so a failure leaves the
-- test's transaction usable and rolls back whatever the statement did.
CREATE FUNCTION regress_try(stmt text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE stmt;
    RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE || ': ' || SQLERRM;
END
$$;

-- Start from a database with no time buckets (earlier tests ran the
-- cleanup): every bucket's table but dedup.claims dropped, dedup.buckets
-- and dedup.claims emptied.
CREATE PROCEDURE regress_reset_buckets() LANGUAGE plpgsql AS $$
DECLARE b record;
BEGIN
  FOR b IN SELECT relid FROM dedup.buckets WHERE bucket > 0 LOOP
    EXECUTE pg_catalog.format('DROP TABLE %s', b.relid);
  END LOOP;
  DELETE FROM dedup.buckets;
  TRUNCATE dedup.claims;
END $$;
-- Expire every row of the sealed buckets, 10 minutes ago, as the clock
-- would: the next pass of the cleanup drops (or folds) them.
CREATE PROCEDURE regress_expire_sealed() LANGUAGE plpgsql AS $$
DECLARE b record;
BEGIN
  FOR b IN SELECT relid FROM dedup.buckets WHERE state = 's' LOOP
    EXECUTE pg_catalog.format('UPDATE %s SET expires_at = clock_timestamp() - interval ''10 minutes''', b.relid);
  END LOOP;
  UPDATE dedup.buckets SET max_expires_at = clock_timestamp() - interval '10 minutes' WHERE state = 's';
END $$;
