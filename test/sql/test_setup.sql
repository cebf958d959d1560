-- Helpers the other regress tests share; pg_regress runs this file first.

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
