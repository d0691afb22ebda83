/**
 * The stranger's path on real Docker, for both templates: `init` → `check` (passes: every golden
 * solution at the max, every empty one at the floor) → `serve` → an episode over /ws that plays a
 * golden solution and gets its reward. Then the shipped Python example, arith-v1, checked and
 * served the same way, and a broken Python copy (an env that ignores its seed) that check fails.
 * Each temporary bundle's image is removed afterwards; the shipped ones are kept, as the server keeps them.
 */
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, expect, it } from 'vitest';
import { BASE_IMAGE_ARG, type EnvLanguage } from '../../src/authoring/init.js';
import { describeDocker, LOCAL_NODE_IMAGE, LOCAL_PYTHON_IMAGE, labelledResources } from '../support/docker.js';
import { INSTANCE_LABEL, startServer } from '../support/docker-server.js';
import { WsClient } from '../../scripts/lib/ws-client.js';
import { bufferIo, initTemp, run, type TempBundle } from './helpers.js';

const runCheck = run('check');

const ARITH = fileURLToPath(new URL('../../bundles/arith-v1', import.meta.url));
const LOCAL: Record<EnvLanguage, string> = { node: LOCAL_NODE_IMAGE, python: LOCAL_PYTHON_IMAGE };
const buildArgs = (env: EnvLanguage) => ({ [BASE_IMAGE_ARG[env].arg]: LOCAL[env] });

interface CheckJson {
  ok: boolean;
  problems: { where: string; message: string }[];
  played: { instance: string; tasks: number; golden: { passed: number; played: number }; empty: { passed: number; played: number } } | null;
}

async function check(dir: string, env: EnvLanguage): Promise<{ code: number; result: CheckJson }> {
  const b = bufferIo();
  const [k, v] = Object.entries(buildArgs(env))[0] as [string, string];
  const code = await runCheck([dir, '--tasks', 'all', '--json', '--build-arg', `${k}=${v}`], b.io);
  const result = JSON.parse(b.out()) as CheckJson;
  // check's own episodes left nothing on the engine
  if (result.played) expect(labelledResources(`${INSTANCE_LABEL}=${result.played.instance}`)).toEqual({ containers: [], networks: [] });
  return { code, result };
}

/** Serves `dir` and plays `steps` on task `taskId` over /ws; resolves with the last observation frame. */
async function serveAndPlay(dir: string, env: EnvLanguage, taskId: string, steps: [string, Record<string, unknown>][]): Promise<any> {
  const s = await startServer({ buildArgs: buildArgs(env) }, dir);
  try {
    const ws = await WsClient.open(s.url);
    try {
      const reset = await ws.reset({ task_id: taskId, seed: 7 });
      expect(reset.type, JSON.stringify(reset)).toBe('observation');
      let last: any = reset;
      for (const [tool, args] of steps) last = await ws.call(tool, args);
      return last;
    } finally {
      await ws.close();
    }
  } finally {
    await s.stop();
    expect(labelledResources(`${INSTANCE_LABEL}=${s.instance}`)).toEqual({ containers: [], networks: [] });
  }
}

describeDocker("the stranger's path: init, check, serve, play", () => {
  const temps: TempBundle[] = [];
  afterAll(async () => {
    for (const t of temps) {
      const name = t.dir.split('/').pop() as string;
      const images = execFileSync('docker', ['image', 'ls', '-q', '--filter', `reference=openenv-bundle/${name}-*`], { encoding: 'utf8' })
        .split('\n')
        .filter(Boolean);
      if (images.length) execFileSync('docker', ['rmi', '-f', ...new Set(images)], { stdio: 'pipe' });
      await t.remove();
    }
  });

  it.each(['node', 'python'] as const)(
    'a %s bundle from init passes check, serves, and scores its golden solution 1 over /ws',
    async (env) => {
      const b = await initTemp(`stranger-${env}`, env);
      temps.push(b);
      const { code, result } = await check(b.dir, env);
      expect(result.problems).toEqual([]);
      expect(code).toBe(0);
      expect(result.played).toMatchObject({ tasks: 5, golden: { passed: 5, played: 5 }, empty: { passed: 5, played: 5 } });

      const last = await serveAndPlay(b.dir, env, `stranger-${env}-train-1`, [
        ['get_hint', {}],
        ['submit_answer', { answer: '8' }],
      ]);
      expect(last.data).toMatchObject({ done: true, reward: 1, observation: { end_reason: 'finished', scores: { correct: 1 } } });
    },
    300_000,
  );

  it('check fails a Python env that ignores its seed without saying so', async () => {
    const b = await initTemp('stranger-seedless', 'python');
    temps.push(b);
    await b.edit('envs/qa/server.py', 'import signal\n', 'import random\nimport signal\n');
    await b.edit(
      'envs/qa/server.py',
      'return {"text": str(episode["data"].get("hint", "No hint for this one."))}',
      'return {"text": "%s (%f)" % (episode["data"].get("hint"), random.random())}',
    );
    const { code, result } = await check(b.dir, 'python');
    expect(code).toBe(1);
    expect(result.problems.map((p) => `${p.where}: ${p.message}`).join('\n')).toMatch(
      /task stranger-seedless-train-1 .*played twice with seed 1234, the golden solution gave different results .*declare "ignores_seed": true/,
    );
  }, 300_000);

  it('arith-v1, the shipped Python example, passes check and scores a two-turn golden solution 1 over /ws', async () => {
    const { code, result } = await check(ARITH, 'python');
    expect(result.problems).toEqual([]);
    expect(code).toBe(0);
    expect(result.played).toMatchObject({ tasks: 12, golden: { passed: 12, played: 12 }, empty: { passed: 12, played: 12 } });

    const last = await serveAndPlay(ARITH, 'python', 'arith-train-1', [
      ['calculate', { a: 391, op: '+', b: 418 }],
      ['submit', { answer: 809 }],
      ['end_turn', {}],
      ['calculate', { a: 809, op: '*', b: 10 }],
      ['submit', { answer: 8090 }],
    ]);
    expect(last.data).toMatchObject({ done: true, reward: 1, observation: { end_reason: 'finished', scores: { correct: 1 } } });
  }, 300_000);
});
