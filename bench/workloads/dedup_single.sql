-- dedup: one new key per call
\set r random(1, 9223372036854775806)
SELECT dedup_claim('bench-single', 'msg-' || :r);
