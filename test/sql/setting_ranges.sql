-- The settings with a range refuse a value outside it (22023), and keep
-- the value they had.  The message names the range's bounds; from
-- PostgreSQL 16 on with their unit ("(1 s .. 2147483647 s)"), so this
-- test's output before 16 is setting_ranges.out, from 16 on
-- setting_ranges_1.out: the one test whose output differs by version.
CREATE TEMP TABLE ranged AS
SELECT name, setting FROM pg_settings
WHERE name IN ('dedup.default_ttl', 'dedup.cleanup_batch_size', 'dedup.cleanup_pause',
               'dedup.bucket_max_size', 'dedup.bucket_interval');
SELECT count(*) AS ranged FROM ranged;
SELECT stmt, regress_try(stmt) FROM (VALUES
  ($$SET dedup.default_ttl = 0$$),
  ($$SET dedup.default_ttl = '-1h'$$),
  ($$SET dedup.cleanup_batch_size = 0$$),
  ($$SET dedup.cleanup_pause = '-1ms'$$),
  ($$SET dedup.cleanup_pause = '2min'$$),
  ($$SET dedup.bucket_max_size = -2$$),
  ($$SET dedup.bucket_interval = -1$$)) AS t(stmt);
-- nothing changed
SELECT s.name, s.setting FROM pg_settings AS s JOIN ranged AS r USING (name)
WHERE s.setting IS DISTINCT FROM r.setting;
DROP TABLE ranged;
