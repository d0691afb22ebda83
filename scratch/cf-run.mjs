import { pino } from 'pino';
import { checkStatic } from '/work/wt/check-fast/dist/authoring/check-static.js';
import { checkDynamic } from '/work/wt/check-fast/dist/authoring/check-dynamic.js';
const st = await checkStatic('/work/wt/check-fast/bundles/gridsim-v1');
const log = pino({ level: 'info' }, pino.destination(2));
const r = await checkDynamic(st.bundle, st.validators, { tasks: Number(process.argv[2] ?? 2), split: 'eval', concurrency: 2, buildArgs: { NODE_IMAGE: 'openenv-local/node:20' }, log });
console.log(JSON.stringify({ episodes: r.episodes, envs: r.envs, findings: r.findings.list.slice(0, 3), plays_s: r.plays_s }));
await st.bundle.cleanup();
