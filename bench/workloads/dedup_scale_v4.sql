-- scale: dedup_claim of a random key (UUIDv4-like: 128 random bits), then the business insert
\set r1 random(0, 9223372036854775806)
\set r2 random(0, 9223372036854775806)
BEGIN;
SELECT dedup_claim('bench', (lpad(to_hex(:r1::bigint), 16, '0') || lpad(to_hex(:r2::bigint), 16, '0'))::uuid);
INSERT INTO orders (message_id, amount) VALUES ((lpad(to_hex(:r1::bigint), 16, '0') || lpad(to_hex(:r2::bigint), 16, '0'))::uuid::text, 1);
COMMIT;
