-- Tables of the benchmark: the business table and the seeds' hand-written patterns.
CREATE EXTENSION IF NOT EXISTS dedup;
CREATE TABLE orders (
    id         bigserial PRIMARY KEY,
    message_id text NOT NULL,
    amount     integer NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
-- the seed's dedup table: text key, expires_at index for its cleanup
CREATE TABLE seed_idem (
    key        text PRIMARY KEY,
    expires_at timestamptz NOT NULL
);
CREATE INDEX seed_idem_expires_at ON seed_idem (expires_at);
-- the seed's Stripe-style idempotency table
CREATE TABLE seed_stripe (
    key        text PRIMARY KEY,
    status     text NOT NULL,
    response   jsonb,
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL
);
CREATE INDEX seed_stripe_expires_at ON seed_stripe (expires_at);
-- the seed's outbox: a plain INSERT per event, a poller that marks them published
CREATE TABLE seed_outbox (
    id            bigserial PRIMARY KEY,
    aggregatetype text NOT NULL,
    aggregateid   text NOT NULL,
    type          text NOT NULL,
    payload       jsonb NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    published     boolean NOT NULL DEFAULT false
);
CREATE INDEX seed_outbox_unpublished ON seed_outbox (id) WHERE NOT published;
-- the same outbox made idempotent by hand: a unique event key, put with
-- INSERT ... ON CONFLICT DO NOTHING (what dedup_outbox_put promises)
CREATE TABLE seed_outbox_idem (
    id            bigserial PRIMARY KEY,
    event_key     text NOT NULL UNIQUE,
    aggregatetype text NOT NULL,
    aggregateid   text NOT NULL,
    type          text NOT NULL,
    payload       jsonb NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    published     boolean NOT NULL DEFAULT false
);
CREATE INDEX seed_outbox_idem_unpublished ON seed_outbox_idem (id) WHERE NOT published;
-- PgQ (Debian's postgresql-15-pgq3), for the drain comparison
CREATE EXTENSION IF NOT EXISTS pgq;
