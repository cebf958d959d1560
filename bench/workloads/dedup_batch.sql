-- dedup: 100 new keys per call
\set r random(1, 9223372036854775806)
SELECT count(*) FROM dedup_claim_batch('bench-batch', ARRAY(SELECT 'b-' || :r || '-' || i FROM generate_series(1, 100) i));
