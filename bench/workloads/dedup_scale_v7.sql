-- scale: dedup_claim of a time-ordered key (UUIDv7-like: milliseconds since the epoch, then random bits), then the business insert
\set r2 random(0, 9223372036854775806)
BEGIN;
SELECT dedup_claim('bench', (lpad(to_hex((extract(epoch FROM now()) * 1000)::bigint), 12, '0') || lpad(to_hex(:r2::bigint), 20, '0'))::uuid);
INSERT INTO orders (message_id, amount) VALUES ((lpad(to_hex((extract(epoch FROM now()) * 1000)::bigint), 12, '0') || lpad(to_hex(:r2::bigint), 20, '0'))::uuid::text, 1);
COMMIT;
