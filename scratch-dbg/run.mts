import { buildApp } from '../dist/app.js';
import pino from 'pino';
const dir = process.argv[2]!;
const mode = process.argv[3] ?? 'build';
const t0 = Date.now();
const logger = pino({ level: 'info' }, { write: (s: string) => { const l = JSON.parse(s); if (!l.build) process.stdout.write(`${((Date.now() - t0) / 1000).toFixed(1)} ${l.msg}\n`); } } as any);
const app = await buildApp(dir, { instance: 'imgdbg-x', pingInterval: 0, buildArgs: { NODE_IMAGE: 'openenv-local/node:20' }, logger, images: mode as any, imageBuildConcurrency: 2 });
await app.listen({ host: '127.0.0.1', port: 0 });
const url = `http://127.0.0.1:${(app.server.address() as any).port}`;
await app.openenv.ready;
console.log('READY', (Date.now() - t0) / 1000);
for (const task of process.argv.slice(4)) {
  const r = await fetch(`${url}/episodes`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ task_id: task }) });
  const b: any = await r.json();
  console.log('RESET', task, r.status, (Date.now() - t0) / 1000, JSON.stringify(b).slice(0, 300));
  if (r.status === 200) {
    const s = await fetch(`${url}/episodes/${b.episode_id}/step`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ type: 'call_tool', tool_name: 'finish_now', arguments: { score: 1 } }) });
    console.log('STEP', s.status, (Date.now() - t0) / 1000, (await s.text()).slice(0, 200));
  }
}
console.log((await (await fetch(`${url}/health`)).text()));
await app.close();
console.log('CLOSED', (Date.now() - t0) / 1000);
