-- scale: the seed's ON CONFLICT DO NOTHING of a random key (UUIDv4-like: 128 random bits) as text, then the business insert
\set r1 random(0, 9223372036854775806)
\set r2 random(0, 9223372036854775806)
BEGIN;
INSERT INTO seed_idem (key, expires_at) VALUES ((lpad(to_hex(:r1::bigint), 16, '0') || lpad(to_hex(:r2::bigint), 16, '0'))::uuid::text, now() + interval '1 day') ON CONFLICT DO NOTHING;
INSERT INTO orders (message_id, amount) VALUES ((lpad(to_hex(:r1::bigint), 16, '0') || lpad(to_hex(:r2::bigint), 16, '0'))::uuid::text, 1);
COMMIT;
