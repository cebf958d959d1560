// bench/paced/paced.js: commit-to-effect latency at a steady rate, for the
// outbox stage's paced part (bench/stages/outbox.sh).
//
//   node paced.js dedup|graphile RATE SECONDS
//
// Producers (4 connections) commit RATE business transactions a second,
// paced by the clock (each is due at start + i / RATE, whatever the ones
// before took): BEGIN; INSERT INTO paced_business; the event (a dedup put
// of topic 'paced', or graphile-worker's add_job of task 'paced'); COMMIT.
// Each event's key is noted with the clock just before its COMMIT is sent;
// its effect is when the consumer, in this process too, receives it: a
// dedup relay looping on dedup_outbox_take_batch('paced', 100, wait => '1
// second') then acking, or graphile-worker's runner, woken by its LISTEN,
// whose task resolves at once (concurrency 4, PACED_GRAPHILE_CONCURRENCY:
// with its default, 1, it fell seconds behind at 50/s on a loaded machine).
// Prints one line: mode, events, p50_ms, p99_ms, max_ms (the first second's
// events left out), late_starts (events that started more than 10 ms after
// they were due: the producers did not keep the pace), missing.  Connects
// with the PG* environment.
'use strict';
const { performance } = require('perf_hooks');
const pg = require('pg');

const [mode, rateArg, secondsArg] = process.argv.slice(2);
const rate = Number(rateArg || 200);
const seconds = Number(secondsArg || 20);
const PRODUCERS = 4;
const now = () => performance.now();
const sent = new Map();	// key -> clock as its COMMIT was sent
const lat = [];
let received = 0;
let startedAt = 0;

function effect(key) {
	const t = sent.get(key);
	if (t === undefined)
		return;
	sent.delete(key);
	received++;
	if (t - startedAt >= 1000)
		lat.push(now() - t);
}

async function connect() {
	const c = new pg.Client();
	await c.connect();
	return c;
}

async function main() {
	const setup = await connect();
	await setup.query('CREATE TABLE IF NOT EXISTS paced_business (id bigserial PRIMARY KEY, k text, at timestamptz DEFAULT now())');
	await setup.query('TRUNCATE paced_business');
	let consumer;
	let stop = false;
	let put;
	if (mode === 'dedup') {
		await setup.query("DELETE FROM dedup.outbox WHERE topic = 'paced'");
		const relay = await connect();
		put = (c, key) => c.query("SELECT dedup_outbox_put('paced', $1, jsonb_build_object('k', $1::text))", [key]);
		consumer = (async () => {
			while (!stop) {
				const r = await relay.query({ text: "SELECT batch_id, payload->>'k' AS k FROM dedup_outbox_take_batch('paced', 100, wait => '1 second')", name: 'take' });
				for (const row of r.rows)
					effect(row.k);
				if (r.rows.length > 0)
					await relay.query({ text: 'SELECT dedup_outbox_ack_batch($1)', name: 'ack', values: [r.rows[0].batch_id] });
			}
			await relay.end();
		})();
	} else if (mode === 'graphile') {
		const { run, Logger } = require('graphile-worker');
		const pool = new pg.Pool({ max: 4 });
		pool.on('error', (e) => { console.error(e); process.exit(1); });
		const runner = await run({
			pgPool: pool,
			concurrency: Number(process.env.PACED_GRAPHILE_CONCURRENCY || 4),
			noHandleSignals: true,
			logger: new Logger(() => (level, message) => { if (level === 'error') console.error(message); }),
			taskList: { paced: async (payload) => { effect(payload.k); } },
		});
		put = (c, key) => c.query("SELECT graphile_worker.add_job('paced', json_build_object('k', $1::text))", [key]);
		consumer = (async () => {
			while (!stop)
				await new Promise((r) => setTimeout(r, 50));
			await runner.stop();
			await pool.end();
		})();
	} else
		throw new Error('mode: dedup or graphile');

	const producers = [];
	for (let i = 0; i < PRODUCERS; i++)
		producers.push(await connect());
	const idle = producers.slice();
	const waiting = [];	// resolvers of the events waiting for an idle producer
	const total = rate * seconds;
	let late = 0;	// events that started more than 10 ms after they were due
	startedAt = now();
	const one = async (c, i) => {
		const key = 'p-' + process.pid + '-' + i;
		await c.query('BEGIN');
		await c.query({ text: 'INSERT INTO paced_business (k) VALUES ($1)', name: 'business', values: [key] });
		await put(c, key);
		sent.set(key, now());
		await c.query('COMMIT');
		if (waiting.length > 0)
			waiting.shift()(c);
		else
			idle.push(c);
	};
	const running = [];
	for (let i = 0; i < total; i++) {
		const due = startedAt + (i * 1000) / rate;
		const wait = due - now();
		if (wait > 0)
			await new Promise((r) => setTimeout(r, wait));
		const c = idle.length > 0 ? idle.pop() : await new Promise((r) => waiting.push(r));
		if (now() - due > 10)
			late++;
		running.push(one(c, i));
	}
	await Promise.all(running);
	const until = now() + 5000;
	while (sent.size > 0 && now() < until)
		await new Promise((r) => setTimeout(r, 10));
	stop = true;
	await consumer;
	for (const c of producers)
		await c.end();
	await setup.end();
	lat.sort((a, b) => a - b);
	const q = (p) => lat[Math.min(lat.length - 1, Math.floor(p * lat.length))].toFixed(2);
	const lost = total - received;
	console.log(`${mode} events=${received} p50_ms=${q(0.5)} p99_ms=${q(0.99)} max_ms=${lat[lat.length - 1].toFixed(2)} late_starts=${late} missing=${lost}`);
	if (lost !== 0)
		process.exit(1);
}

main().catch((e) => { console.error(e); process.exit(1); });
