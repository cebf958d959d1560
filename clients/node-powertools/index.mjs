// DedupPersistenceLayer: Powertools for AWS Lambda's idempotency
// (@aws-lambda-powertools/idempotency, makeIdempotent and its middleware) on
// dedup's idempotency records, in one PostgreSQL: the in-progress record is
// dedup_begin's lease, the stored result dedup_complete's response, a
// failure dedup_release.  Tested by test/t/012_powertools.pl.
//
//   import { DedupPersistenceLayer } from '@dedup/powertools-persistence';
//   const persistenceStore = new DedupPersistenceLayer({ pool, scope: 'orders-lambda' });
//   export const handler = makeIdempotent(processOrder, { persistenceStore, config });
//
// Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.
import {
  BasePersistenceLayer,
  IdempotencyRecord,
} from '@aws-lambda-powertools/idempotency/persistence';
import {
  IdempotencyItemAlreadyExistsError,
  IdempotencyItemNotFoundError,
  IdempotencyRecordStatus,
} from '@aws-lambda-powertools/idempotency';

// seconds (possibly fractional) as a PostgreSQL interval, or NULL
const seconds = (s) => (s === undefined || s === null ? null : `${Math.max(s, 0.001)} seconds`);

class DedupPersistenceLayer extends BasePersistenceLayer {
  #pool;
  #scope;
  #attempts = new Map(); // idempotency key -> the attempt this process holds

  // pool: a pg Pool (or Client) of a role granted dedup_grant_usage on scope
  constructor({ pool, scope }) {
    super();
    if (!pool || !scope) throw new TypeError('DedupPersistenceLayer needs a pool and a scope');
    this.#pool = pool;
    this.#scope = scope;
  }

  // The record Powertools reads back (dedup decides expiry: a record it
  // answers with is live).  The response is stored as {"data": ...}, so
  // that any result (a string, a number, undefined) round-trips.
  #record(key, status, r, payloadHash) {
    return new IdempotencyRecord({
      idempotencyKey: key,
      status,
      expiryTimestamp: r.expires_at ? Date.parse(r.expires_at) / 1000 : undefined,
      inProgressExpiryTimestamp: r.lease_expires_at ? Date.parse(r.lease_expires_at) : undefined,
      responseData: r.response ? r.response.data : undefined,
      payloadHash,
    });
  }

  // saveInProgress: dedup_begin with the lease Lambda has left and the
  // record's expiry as its ttl; the payload hash, when validation is on, is
  // the request.  Anything but "started" is an existing record.
  async _putRecord(record) {
    const now = Date.now();
    const lease = record.inProgressExpiryTimestamp
      ? seconds((record.inProgressExpiryTimestamp - now) / 1000) : null;
    const ttl = seconds(record.expiryTimestamp - now / 1000);
    const request = record.payloadHash ? JSON.stringify(record.payloadHash) : null;
    const { rows: [r] } = await this.#pool.query(
      `SELECT outcome, response, attempts, lease_expires_at, request_fingerprint
         FROM dedup_begin($1, $2, $3::jsonb, $4::interval, $5::interval)`,
      [this.#scope, record.idempotencyKey, request, lease, ttl]);
    const key = record.idempotencyKey;
    switch (r.outcome) {
      case 'started':
        this.#attempts.set(key, r.attempts);
        return;
      case 'replay':
        throw new IdempotencyItemAlreadyExistsError(`idempotency key ${key} has completed`,
          this.#record(key, IdempotencyRecordStatus.COMPLETED, r, record.payloadHash));
      case 'in_progress':
        throw new IdempotencyItemAlreadyExistsError(`idempotency key ${key} is in progress`,
          this.#record(key, IdempotencyRecordStatus.INPROGRESS, r, record.payloadHash));
      case 'mismatch':
        // validation off now, on when the record was stored: Powertools
        // answers with the stored record, unchecked
        if (!this.isPayloadValidationEnabled()) {
          throw new IdempotencyItemAlreadyExistsError(`idempotency key ${key} exists`,
            await this._getRecord(key));
        }
        // the stored request's fingerprint, which is not this payload's hash:
        // Powertools raises its IdempotencyValidationError
        throw new IdempotencyItemAlreadyExistsError(`idempotency key ${key} was used with another payload`,
          this.#record(key, IdempotencyRecordStatus.COMPLETED, r, r.request_fingerprint ?? ''));
      default:
        throw new Error(`unexpected outcome of dedup_begin: ${r.outcome}`);
    }
  }

  // getRecord: the live record, read without changing it
  async _getRecord(idempotencyKey) {
    const { rows: [r] } = await this.#pool.query(
      'SELECT status, response, lease_expires_at, expires_at FROM dedup_lookup($1, $2)',
      [this.#scope, idempotencyKey]);
    if (!r) throw new IdempotencyItemNotFoundError(`no record of idempotency key ${idempotencyKey}`);
    const status = r.status === 'complete'
      ? IdempotencyRecordStatus.COMPLETED : IdempotencyRecordStatus.INPROGRESS;
    return this.#record(idempotencyKey, status, r, undefined);
  }

  // saveSuccess: dedup_complete with the attempt this process began; the
  // record then stays the ttl its begin was given
  async _updateRecord(record) {
    const key = record.idempotencyKey;
    await this.#pool.query(
      "SELECT dedup_complete($1, $2, 200, jsonb_build_object('data', $3::jsonb), attempt => $4)",
      [this.#scope, key, JSON.stringify(record.responseData ?? null), this.#attempts.get(key) ?? null]);
    this.#attempts.delete(key);
  }

  // deleteRecord, after the function threw: give the key back, so that a
  // retry runs it again
  async _deleteRecord(record) {
    const key = record.idempotencyKey;
    await this.#pool.query('SELECT dedup_release($1, $2, attempt => $3)',
      [this.#scope, key, this.#attempts.get(key) ?? null]);
    this.#attempts.delete(key);
  }
}

export { DedupPersistenceLayer };
