// test/t/powertools.mjs, run by test/t/012_powertools.pl beside the layer
// (clients/node-powertools/index.mjs) and Powertools' own package: Powertools'
// makeIdempotent on DedupPersistenceLayer.  Prints "ok: ..." per check and
// exits non-zero at the first failure.
import assert from 'node:assert/strict';
import pg from 'pg';
import { IdempotencyConfig, makeIdempotent } from '@aws-lambda-powertools/idempotency';
import { DedupPersistenceLayer } from './index.mjs';

// the layer's pool: PGHOST, PGPORT, PGDATABASE and PGUSER, a role granted
// dedup_grant_usage; the checks read dedup.claims as DEDUP_ADMIN_USER
const pool = new pg.Pool({ max: 4 });
const admin = new pg.Pool({ max: 1, user: process.env.DEDUP_ADMIN_USER });
const context = { getRemainingTimeInMillis: () => 30000, functionName: 'orders', awsRequestId: 'r' };
const ok = (what) => console.log(`ok: ${what}`);

let calls = 0;
let release;
const gate = () => new Promise((resolve) => { release = resolve; });
let waiting = Promise.resolve();
async function processOrder(event) {
  calls += 1;
  if (event.slow) await waiting;
  if (event.fail) throw new Error('provider down');
  return { order: event.order, charged: event.amount, call: calls };
}
const handler = makeIdempotent(processOrder, {
  persistenceStore: new DedupPersistenceLayer({ pool, scope: 'orders-lambda' }),
  config: new IdempotencyConfig({ eventKeyJmesPath: 'id', payloadValidationJmesPath: 'amount',
                                  expiresAfterSeconds: 600 }),
});

// 1. the first call runs the handler and stores its result
const first = await handler({ id: 'evt-1', order: 7, amount: 100 }, context);
assert.deepEqual(first, { order: 7, charged: 100, call: 1 });
assert.equal(calls, 1);
const { rows: [rec] } = await admin.query(
  `SELECT count(*) AS n, min((record).status) AS status,
          min(round(extract(epoch FROM expires_at - (record).completed_at))) AS stay
     FROM dedup.claims WHERE record IS NOT NULL`);
assert.deepEqual([rec.n, rec.status, rec.stay], ['1', 'c', '600']);
ok('the first call runs the handler; its result is a complete record that stays expiresAfterSeconds');

// 2. a repeat returns the stored result, without running the handler
const again = await handler({ id: 'evt-1', order: 7, amount: 100 }, context);
assert.deepEqual(again, first);
assert.equal(calls, 1);
ok('a repeat returns the stored result; the handler ran once');

// 3. a call while another runs: IdempotencyAlreadyInProgressError
waiting = gate();
const running = handler({ id: 'evt-2', order: 8, amount: 50, slow: true }, context);
while (calls < 2) await new Promise((r) => setTimeout(r, 10));
const { rows: [lease] } = await admin.query(
  `SELECT (record).status AS status, round(extract(epoch FROM (record).lease_until - now())) AS lease
     FROM dedup.claims WHERE (record).status = 'p'`);
assert.equal(lease.status, 'p');
assert.ok(lease.lease >= 25 && lease.lease <= 30, `lease ${lease.lease}`);
ok("the in-progress record's lease is the time Lambda has left");
await assert.rejects(handler({ id: 'evt-2', order: 8, amount: 50 }, context),
  (e) => e.name === 'IdempotencyAlreadyInProgressError');
assert.equal(calls, 2);
release();
assert.deepEqual(await running, { order: 8, charged: 50, call: 2 });
ok('a concurrent call gets IdempotencyAlreadyInProgressError; the first completes');

// 4. the same key with another payload: IdempotencyValidationError
await assert.rejects(handler({ id: 'evt-1', order: 7, amount: 999 }, context),
  (e) => e.name === 'IdempotencyValidationError');
assert.equal(calls, 2);
// a field outside payloadValidationJmesPath does not count
assert.deepEqual(await handler({ id: 'evt-1', order: 700, amount: 100 }, context), first);
ok('a payload mismatch gets IdempotencyValidationError; fields not validated do not count');
// without payload validation (a layer configured so), the stored result, unchecked
const unchecked = makeIdempotent(processOrder, {
  persistenceStore: new DedupPersistenceLayer({ pool, scope: 'orders-lambda' }),
  config: new IdempotencyConfig({ eventKeyJmesPath: 'id', expiresAfterSeconds: 600 }),
});
assert.deepEqual(await unchecked({ id: 'evt-1', order: 7, amount: 999 }, context), first);
assert.equal(calls, 2);
ok('without payload validation, another payload gets the stored result');

// 5. the handler throws: the record is given back, and a retry runs it again
await assert.rejects(handler({ id: 'evt-3', order: 9, amount: 5, fail: true }, context), /provider down/);
const retried = await handler({ id: 'evt-3', order: 9, amount: 5 }, context);
assert.equal(retried.call, 4);
ok('a failed call gives the key back; the retry runs the handler');

// 6. expiry: a record past expiresAfterSeconds runs the handler again
const short = makeIdempotent(processOrder, {
  persistenceStore: new DedupPersistenceLayer({ pool, scope: 'orders-lambda-short' }),
  config: new IdempotencyConfig({ eventKeyJmesPath: 'id', expiresAfterSeconds: 1 }),
});
const s1 = await short({ id: 'evt-9', order: 1, amount: 1 }, context);
assert.deepEqual(await short({ id: 'evt-9', order: 1, amount: 1 }, context), s1);
await new Promise((r) => setTimeout(r, 1500));
const s2 = await short({ id: 'evt-9', order: 1, amount: 1 }, context);
assert.equal(s2.call, s1.call + 1);
ok('after expiresAfterSeconds the record has expired and the handler runs again');

await pool.end();
await admin.end();
