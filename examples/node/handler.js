// An HTTP handler with an Idempotency-Key, on dedup's idempotency records.
//
// The README quotes createCharge() from this file; test/integration/docs.sh runs
// it as a program against a throwaway server, as the application role, and
// requires its output.  Connects with libpq's environment (PGHOST,
// PGDATABASE, PGUSER, ...).  Needs the `pg` package (npm install).
'use strict';
const { Pool } = require('pg');

class TemporaryError extends Error {}

// A stand-in for a payment provider: counts its charges.
const provider = {
  calls: 0,
  failNext: false,
  async charge(body) {
    this.calls += 1;
    if (this.failNext) {
      this.failNext = false;
      throw new TemporaryError('provider timeout');
    }
    return { charge: `ch_${this.calls}`, amount: body.amount };
  },
};

// one transaction on a connection of the pool
async function inTransaction(pool, work) {
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    const result = await work(client);
    await client.query('COMMIT');
    return result;
  } catch (e) {
    await client.query('ROLLBACK');
    throw e;
  } finally {
    client.release();
  }
}

async function createCharge(pool, idemKey, body) {
  const { rows: [r] } = await pool.query(                    // 1: take the key
    "SELECT * FROM dedup_begin('charges', $1, $2::jsonb)", [idemKey, JSON.stringify(body)]);
  if (r.outcome === 'replay') return [r.response_code, r.response];  // the stored answer
  if (r.outcome === 'in_progress') return [409, { error: 'a request with this key is in progress' }];
  if (r.outcome === 'mismatch') return [422, { error: 'this key was used with another request' }];
  let charge;
  try {                                                      // started: the work, outside any transaction
    charge = await provider.charge(body);
  } catch (e) {
    if (!(e instanceof TemporaryError)) throw e;
    await pool.query("SELECT dedup_release('charges', $1, attempt => $2)", [idemKey, r.attempts]);
    return [503, { error: 'try again' }];                    // the key given back: a retry starts afresh
  }
  await inTransaction(pool, async (client) => {              // 2: business write and response, at once
    await client.query('INSERT INTO charges (id, amount) VALUES ($1, $2)', [charge.charge, body.amount]);
    await client.query("SELECT dedup_complete('charges', $1, 201, $2::jsonb, attempt => $3)",
      [idemKey, JSON.stringify(charge), r.attempts]);
  });
  return [201, charge];
}

function show(what, [code, body]) {
  const sorted = Object.fromEntries(Object.entries(body).sort());
  console.log(`${(what + ':').padEnd(20)} ${code} ${JSON.stringify(sorted)}`);
}

async function main() {
  const pool = new Pool();
  try {
    await pool.query('CREATE TABLE IF NOT EXISTS charges (id text PRIMARY KEY, amount int NOT NULL)');
    show('first request', await createCharge(pool, 'n-1', { amount: 100 }));
    show('client retries', await createCharge(pool, 'n-1', { amount: 100 }));
    show('same key, new body', await createCharge(pool, 'n-1', { amount: 999 }));
    provider.failNext = true;
    show('provider fails', await createCharge(pool, 'n-2', { amount: 5 }));
    show('client retries', await createCharge(pool, 'n-2', { amount: 5 }));
    // another worker holds n-3: its dedup_begin committed, its work goes on
    await pool.query("SELECT dedup_begin('charges', 'n-3', '{\"amount\": 7}')");
    show('while another runs', await createCharge(pool, 'n-3', { amount: 7 }));
    const { rows: [c] } = await pool.query("SELECT count(*)::int AS n FROM charges");
    console.log(`provider called ${provider.calls} times, ${c.n} charges written`);
  } finally {
    await pool.end();
  }
}

main().catch((e) => { console.error(e); process.exit(1); });
