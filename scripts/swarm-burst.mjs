#!/usr/bin/env node
// A burst of resets against a running server: N `POST /episodes` at once, each timed from request
// to answer (queue + deploy + the env's /reset), then every episode deleted.
//   node scripts/swarm-burst.mjs http://10.77.0.11:18500 64        (token in AGENTENV_TOKEN)
const [url, nArg] = process.argv.slice(2);
const n = Number(nArg ?? 64);
const token = process.env.AGENTENV_TOKEN;
const headers = { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) };
const pct = (xs, p) => xs[Math.min(xs.length - 1, Math.ceil((p / 100) * xs.length) - 1)];
const t0 = performance.now();
const results = await Promise.all(
  Array.from({ length: n }, async (_, i) => {
    const started = performance.now();
    const res = await fetch(`${url}/episodes`, { method: 'POST', headers, body: JSON.stringify({ split: 'train', index: i % 6 }) });
    const body = await res.json();
    return { ms: performance.now() - started, status: res.status, id: body.episode_id, reason: body.failure?.reason };
  }),
);
const wall = performance.now() - t0;
const ok = results.filter((r) => r.status === 201);
const ms = ok.map((r) => r.ms).sort((a, b) => a - b);
console.log(
  `${n} resets at once: ${ok.length} started, ${n - ok.length} failed ${JSON.stringify(results.filter((r) => r.status !== 201).map((r) => r.reason ?? r.status))}`,
);
if (ms.length)
  console.log(
    `reset latency  p50 ${pct(ms, 50).toFixed(0)} ms  p95 ${pct(ms, 95).toFixed(0)} ms  max ${ms.at(-1).toFixed(0)} ms  (burst wall ${(wall / 1000).toFixed(1)} s)`,
  );
await Promise.all(ok.map((r) => fetch(`${url}/episodes/${r.id}`, { method: 'DELETE', headers })));
