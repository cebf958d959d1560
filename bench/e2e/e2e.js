// bench/e2e/e2e.js: scripts/bench's e2e stage, the client program.  One
// Node process with both drivers (node-postgres and node-redis) handles a
// queue of messages, some of them redeliveries, the way a consumer would,
// in five modes:
//
//   dedup-in-insert  the claim written into the business INSERT, one
//                    statement in autocommit:
//                    INSERT INTO orders ... SELECT ... WHERE dedup_claim(...)
//   redis-pair       SET msg:<id> 1 NX EX 86400 on Redis, then, if it said OK,
//                    the business INSERT (autocommit) on PostgreSQL
//   dedup-statement  the claim as a statement of its own in the business
//                    transaction: BEGIN; SELECT dedup_claim(...); the
//                    INSERT if it said new; COMMIT
//   seed-statement   the seed's hand-written dedup table in its place: BEGIN;
//                    INSERT INTO seed_idem ... ON CONFLICT DO NOTHING; the
//                    INSERT if it inserted; COMMIT (the floor of a
//                    statement of its own that writes the key)
//   select-true      the floor of any statement of its own: BEGIN; SELECT
//                    true; the INSERT if the id is new to this run (known
//                    by the program itself); COMMIT
//
// The workers (async, one pg Client each and, in redis-pair, one Redis
// client each; named queries, so each statement is prepared once a
// connection) share one queue of --messages messages, --redeliveries of
// them (a fraction) redeliveries of another message's id, shuffled by
// --seed.  Each run starts on a fresh state (--fresh, a shell command, then
// FLUSHALL on Redis), connects its workers, then times the queue from the
// first message to the last.  A warm-up run of each mode over the first
// --warmup messages (not counted) comes first, so that the first timed run
// does not pay for V8's compiling the shared code.  Then the modes run
// interleaved, --reps times; each
// run appends a row to --csv (results.csv's columns) and the medians end the
// output, one line a mode: "median MODE MSGS_PER_S", then one a mode of the
// CPU time a message took, in microseconds, of this process, of the workers'
// PostgreSQL backends and of redis-server (from /proc, where there is one):
// "median-cpu MODE CLIENT POSTGRES REDIS TOTAL" (each its own median).  On a machine shared with other
// work the rates swing with it; the CPU a message costs swings much less.
//
// Correctness is asserted after every run, and a failure exits 1: the
// business rows are exactly the distinct message ids, each once (dedup and
// Redis both), as many claims said new as there are distinct ids (the
// redeliveries were refused), Redis holds a key per distinct id.
//
// PostgreSQL is reached through the PG* environment variables, Redis through
// the unix socket --redis.
//
// Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.
'use strict';
const { execFileSync } = require('child_process');
const pg = require('pg');
const redis = require('redis');

const MODES = ['dedup-in-insert', 'redis-pair', 'dedup-statement', 'seed-statement', 'select-true'];
const opt = {
	messages: 20000, redeliveries: 0.2, workers: 4, reps: 3, seed: 42, warmup: 2000,
	scope: 'bench', modes: MODES.join(','), csv: '', fresh: '', redis: '',
};
for (let i = 2; i < process.argv.length; i += 2) {
	const k = process.argv[i].replace(/^--/, '');
	if (!(k in opt) || i + 1 >= process.argv.length) {
		console.error(`usage: node e2e.js ${Object.keys(opt).map((o) => `[--${o} V]`).join(' ')}`);
		process.exit(2);
	}
	opt[k] = typeof opt[k] === 'number' ? Number(process.argv[i + 1]) : process.argv[i + 1];
}
const modes = opt.modes.split(',');
for (const m of modes) {
	if (!MODES.includes(m)) { console.error(`unknown mode ${m}`); process.exit(2); }
}
if (modes.includes('redis-pair') && !opt.redis) { console.error('redis-pair needs --redis SOCKET'); process.exit(2); }

// The queue: distinct ids, then redeliveries of ids drawn among them,
// shuffled (Fisher-Yates) by a seeded generator (mulberry32).
function rng(seed) {
	let a = seed >>> 0;
	return () => {
		a = (a + 0x6D2B79F5) >>> 0;
		let t = a;
		t = Math.imul(t ^ (t >>> 15), t | 1);
		t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
		return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
	};
}
const rand = rng(opt.seed);
const nRedeliveries = Math.round(opt.messages * opt.redeliveries);
const nDistinct = opt.messages - nRedeliveries;
const queue = [];
for (let i = 0; i < nDistinct; i++) {
	queue.push(`msg-${Math.floor(rand() * 2 ** 53).toString(16)}-${i}`);
}
for (let i = 0; i < nRedeliveries; i++) queue.push(queue[Math.floor(rand() * nDistinct)]);
for (let i = queue.length - 1; i > 0; i--) {
	const j = Math.floor(rand() * (i + 1));
	[queue[i], queue[j]] = [queue[j], queue[i]];
}

const INSERT_CLAIMED = {
	name: 'e2e_insert_claimed',
	text: 'INSERT INTO orders (message_id, amount) SELECT $2::text, 1 WHERE dedup_claim($1::text, $2::text)',
};
const INSERT = { name: 'e2e_insert', text: 'INSERT INTO orders (message_id, amount) VALUES ($1::text, 1)' };
const CLAIM = { name: 'e2e_claim', text: 'SELECT dedup_claim($1::text, $2::text) AS new' };
const SEED_CLAIM = {
	name: 'e2e_seed_claim',
	text: "INSERT INTO seed_idem (key, expires_at) VALUES ($1::text, now() + interval '1 day') ON CONFLICT DO NOTHING",
};
const SELECT_TRUE = { name: 'e2e_select_true', text: 'SELECT true AS t' };

// One message in each mode; returns whether it was handled as new.
const handle = {
	'dedup-in-insert': async (w, id) =>
		(await w.pg.query({ ...INSERT_CLAIMED, values: [opt.scope, id] })).rowCount === 1,
	'redis-pair': async (w, id) => {
		if ((await w.redis.set(`msg:${id}`, '1', { NX: true, EX: 86400 })) !== 'OK') return false;
		await w.pg.query({ ...INSERT, values: [id] });
		return true;
	},
	'dedup-statement': async (w, id) => {
		await w.pg.query('BEGIN');
		const isNew = (await w.pg.query({ ...CLAIM, values: [opt.scope, id] })).rows[0].new === true;
		if (isNew) await w.pg.query({ ...INSERT, values: [id] });
		await w.pg.query('COMMIT');
		return isNew;
	},
	'seed-statement': async (w, id) => {
		await w.pg.query('BEGIN');
		const isNew = (await w.pg.query({ ...SEED_CLAIM, values: [id] })).rowCount === 1;
		if (isNew) await w.pg.query({ ...INSERT, values: [id] });
		await w.pg.query('COMMIT');
		return isNew;
	},
	'select-true': async (w, id) => {
		await w.pg.query('BEGIN');
		const isNew = (await w.pg.query(SELECT_TRUE)).rows[0].t === true && !w.seen.has(id);
		if (isNew) {
			w.seen.add(id);
			await w.pg.query({ ...INSERT, values: [id] });
		}
		await w.pg.query('COMMIT');
		return isNew;
	},
};

function redisClient() {
	const c = redis.createClient({ socket: { path: opt.redis } });
	c.on('error', (e) => { console.error(`redis: ${e.message}`); process.exit(1); });
	return c;
}

// CPU time (user + system, microseconds) of processes, from /proc/PID/stat
const fs = require('fs');
let clockTicks = 0;
try { clockTicks = Number(execFileSync('getconf', ['CLK_TCK']).toString()); } catch (e) { clockTicks = 0; }
function cpuMicros(pids) {
	if (!clockTicks) return NaN;
	let ticks = 0;
	for (const pid of pids) {
		try {
			const st = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
			const f = st.slice(st.lastIndexOf(')') + 2).split(' ');	// f[0] is field 3, state
			ticks += Number(f[11]) + Number(f[12]);					// utime, stime
		} catch (e) {
			return NaN;
		}
	}
	return ticks * 1e6 / clockTicks;
}
function ownCpuMicros() {
	const u = process.cpuUsage();
	return u.user + u.system;
}

function fail(msg) {
	console.error(`FAIL: ${msg}`);
	process.exit(1);
}

let redisPid = 0;
async function runOnce(mode, rep, ctl, ctlRedis, msgs) {
	const distinct = new Set(msgs).size;
	if (opt.fresh) execFileSync('bash', ['-c', opt.fresh], { stdio: 'inherit' });
	if (ctlRedis) await ctlRedis.flushAll();
	const workers = [];
	const seen = new Set();	// select-true's ids handled, shared by its workers
	for (let i = 0; i < opt.workers; i++) {
		const w = { pg: new pg.Client(), redis: mode === 'redis-pair' ? redisClient() : null, seen };
		await w.pg.connect();
		if (w.redis) await w.redis.connect();
		w.pid = (await w.pg.query('SELECT pg_backend_pid() AS p')).rows[0].p;
		workers.push(w);
	}
	const pgPids = workers.map((w) => w.pid);
	const redisPids = mode === 'redis-pair' && redisPid ? [redisPid] : [];
	const lat = new Float64Array(msgs.length);
	let next = 0;
	let handledNew = 0;
	const lsn0 = (await ctl.query('SELECT pg_current_wal_lsn() AS l')).rows[0].l;
	const cpu0 = [ownCpuMicros(), cpuMicros(pgPids), cpuMicros(redisPids)];
	const t0 = process.hrtime.bigint();
	await Promise.all(workers.map(async (w) => {
		for (let i = next++; i < msgs.length; i = next++) {
			const s = process.hrtime.bigint();
			if (await handle[mode](w, msgs[i])) handledNew++;
			lat[i] = Number(process.hrtime.bigint() - s) / 1e6;
		}
	}));
	const secs = Number(process.hrtime.bigint() - t0) / 1e9;
	const cpu = [ownCpuMicros() - cpu0[0], cpuMicros(pgPids) - cpu0[1], cpuMicros(redisPids) - cpu0[2]]
		.map((c) => c / msgs.length);
	const wal = (await ctl.query('SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1::pg_lsn)::bigint AS b',
		[lsn0])).rows[0].b;
	for (const w of workers) {
		await w.pg.end();
		if (w.redis) await w.redis.quit();
	}

	// correctness
	const { rows: [o] } = await ctl.query(
		'SELECT count(*)::int AS n, count(DISTINCT message_id)::int AS d FROM orders');
	const wantRows = distinct;
	if (o.n !== wantRows || o.d !== wantRows) {
		fail(`${mode} rep ${rep}: ${o.n} business rows, ${o.d} distinct message ids; want ${wantRows} (${distinct} distinct of ${msgs.length} messages)`);
	}
	const wantNew = distinct;
	if (handledNew !== wantNew) fail(`${mode} rep ${rep}: ${handledNew} messages handled as new; want ${wantNew}`);
	if (mode === 'redis-pair') {
		const keys = await ctlRedis.dbSize();
		if (keys !== distinct) fail(`${mode} rep ${rep}: ${keys} Redis keys; want ${distinct}`);
	}

	const sorted = Array.from(lat).sort((a, b) => a - b);
	const avg = sorted.reduce((a, b) => a + b, 0) / sorted.length;
	const p99 = sorted[Math.max(0, Math.ceil(sorted.length * 0.99) - 1)];
	const rate = msgs.length / secs;
	const walPerMsg = Number(wal) / msgs.length;
	return { rate, avg, p99, walPerMsg, cpu };
}

(async () => {
	const ctl = new pg.Client();
	await ctl.connect();
	let ctlRedis = null;
	if (opt.redis) {
		ctlRedis = redisClient();
		await ctlRedis.connect();
		const m = /process_id:(\d+)/.exec(await ctlRedis.info('server'));
		redisPid = m ? Number(m[1]) : 0;
	}
	console.log(`${queue.length} messages (${nDistinct} distinct ids, ${nRedeliveries} redeliveries, seed ${opt.seed}), `
		+ `${opt.workers} workers, modes ${modes.join(' ')}, ${opt.reps} reps`);
	const rates = {};
	const cpus = {};
	if (opt.warmup > 0) {
		for (const mode of modes) await runOnce(mode, 'warm-up', ctl, ctlRedis, queue.slice(0, opt.warmup));
		console.log(`warm-up: each mode over the first ${Math.min(opt.warmup, queue.length)} messages; ok`);
	}
	for (let rep = 1; rep <= opt.reps; rep++) {
		for (const mode of modes) {
			const r = await runOnce(mode, rep, ctl, ctlRedis, queue);
			(rates[mode] = rates[mode] || []).push(r.rate);
			(cpus[mode] = cpus[mode] || []).push(r.cpu);
			const name = `e2e_${mode.replace(/-/g, '_')}`;
			console.log(`${new Date().toISOString().slice(11, 19)}  rep ${rep} ${mode}: ${r.rate.toFixed(1)} msgs/s, `
				+ `latency avg ${r.avg.toFixed(3)} ms p99 ${r.p99.toFixed(3)} ms, ${r.walPerMsg.toFixed(1)} WAL bytes/msg, `
				+ `CPU µs/msg ${r.cpu.map((c) => c.toFixed(1)).join(' + ')} (client + postgres + redis); ok`);
			if (opt.csv) {
				fs.appendFileSync(opt.csv,
					`${name},${r.rate.toFixed(3)},${r.avg.toFixed(3)},${r.p99.toFixed(3)},${r.walPerMsg.toFixed(2)},,,${queue.length},\n`);
			}
		}
	}
	for (const mode of modes) {
		const s = rates[mode].slice().sort((a, b) => a - b);
		console.log(`median ${mode} ${s[Math.floor((s.length - 1) / 2)].toFixed(3)}`);
	}
	const med = (a) => a.slice().sort((x, y) => x - y)[Math.floor((a.length - 1) / 2)];
	for (const mode of modes) {
		const c = [0, 1, 2].map((k) => med(cpus[mode].map((r) => r[k])));
		c.push(med(cpus[mode].map((r) => r[0] + r[1] + r[2])));
		console.log(`median-cpu ${mode} ${c.map((x) => x.toFixed(2)).join(' ')}`);
	}
	await ctl.end();
	if (ctlRedis) await ctlRedis.quit();
})().catch((e) => fail(e.stack || e.message));
