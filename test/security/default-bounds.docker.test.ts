/**
 * The bounds a default server keeps on an env's writable layer when its bundle sets none
 * (docs/security.md, "A storage bound per env"): a server started with no bound option serves a
 * shell env (the local Debian base as it is, no `storage_mb`, no `max_files` in its bundle), and
 * a model's `bash` call that writes past the default storage bound (2048 MB), or makes entries
 * past the default file bound (100,000), ends its episode `storage_exceeded`, the message naming
 * the server's default and what the env did; nothing of the episode is left on the engine.
 * Each prints what it measured (`[default bounds]` lines): how far past the bound the env got and
 * how long it took to stop it.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Dockerode from 'dockerode';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { ENV_LAYER_DEFAULTS } from '../../src/defaults.js';
import { LABELS } from '../../src/sandbox/sandbox.js';
import { http as call } from '../routes/http.js';
import { describeDocker, waitFor } from '../support/docker.js';
import { suiteServer } from '../support/docker-server.js';
import { LOCAL_DEBIAN_IMAGE, ensureDebianBase } from '../harbor/helpers.js';

const docker = new Dockerode();
/** subnets of this file's server (no other test file uses them) */
const SUBNET_POOL = '10.243.0.0/22';
/** what one call may take: the writes and the file flood run well under it, on the old code too */
const CALL_S = 280;

const dir = mkdtempSync(path.join(os.tmpdir(), 'openenv-default-bounds-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function writeBundle(): string {
  const task = (id: string) => ({
    task_id: id,
    toolset: 'shell',
    env: 'box',
    system_prompt: 'You are tested.',
    turns: ['Do it.'],
    verifier: { tests: 'verifiers/zero', timeout_s: 30 },
  });
  const files: Record<string, string> = {
    'bundle.json': JSON.stringify({
      name: 'default-bounds',
      version: '1.0.0',
      description: 'A shell env whose bundle sets no bound of its writable layer.',
      default_split: 'train',
      splits: { train: 'tasks/train.jsonl' },
      // no storage_mb, no max_files: the server's defaults apply
      envs: { box: { kind: 'shell', image: LOCAL_DEBIAN_IMAGE, workdir: '/app', resources: { memory_mb: 512, cpus: 1, pids: 256 } } },
      toolsets: { shell: { builtin: ['shell'] } },
      reward: 'mean',
      scores: { reward: { min: 0, max: 1 } },
    }),
    'tasks/train.jsonl': ['fill', 'flood'].map((id) => JSON.stringify(task(id))).join('\n') + '\n',
    'verifiers/zero/test.sh': 'echo 0 > /logs/verifier/reward.txt\n',
  };
  for (const [rel, content] of Object.entries(files)) {
    mkdirSync(path.dirname(path.join(dir, rel)), { recursive: true });
    writeFileSync(path.join(dir, rel), content);
  }
  return dir;
}

/** plays `command` in a fresh episode of `task`: the reply of its one `bash` call, how long it took, when it came, and the episode's id */
async function oneCall(url: string, task: string, command: string): Promise<{ body: any; seconds: number; at: number; id: string }> {
  const started = await call(url, 'POST', '/episodes', { task_id: task });
  expect(started.status, JSON.stringify(started.body)).toBe(201);
  const id = started.body.episode_id as string;
  const t0 = Date.now();
  const r = await call(url, 'POST', `/episodes/${id}/step`, { type: 'call_tool', tool_name: 'bash', arguments: { command, timeout_s: CALL_S } });
  return { body: r.body, seconds: (Date.now() - t0) / 1000, at: Date.now(), id };
}

/** the episode's containers, once it is deleted, until none is left (a layer of many files takes seconds to remove) */
async function nothingLeft(url: string, id: string): Promise<void> {
  await call(url, 'DELETE', `/episodes/${id}`);
  const left = () => docker.listContainers({ all: true, filters: { label: [`${LABELS.episode}=${id}`] } });
  let now = await left();
  for (let i = 0; i < 300 && now.length > 0; i++) {
    await new Promise((res) => setTimeout(res, 200));
    now = await left();
  }
  expect(now).toEqual([]);
}

describeDocker('the bounds a default server keeps on an env whose bundle sets none', () => {
  beforeAll(() => {
    ensureDebianBase();
    writeBundle();
  });
  // no bound option: the defaults
  const s = suiteServer({ maxConcurrentEnvs: 2, toolTimeout: CALL_S + 20, subnetPool: SUBNET_POOL }, { bundle: dir });

  it('/bundle grants the env the default bounds', async () => {
    // an env's grant is in /bundle once its image is ready (the images build after the server is up)
    await waitFor(async () => (await call(s.url, 'GET', '/bundle')).body.envs.box !== undefined, 120_000, "the env's grant in /bundle");
    expect((await call(s.url, 'GET', '/bundle')).body.envs.box).toMatchObject({
      storage_mb: ENV_LAYER_DEFAULTS.storageMb,
      max_files: ENV_LAYER_DEFAULTS.maxFiles,
    });
  });

  it('an env that writes past the default storage bound is stopped: storage_exceeded, naming the default, and nothing left', async () => {
    // 8 GB of zeros in 1 MB writes, as a task's own runaway writer would (at 1.45 GB/s here: the
    // margin past the bound is seconds of writing, not the one look a writer of 3 GB could outrun)
    const r = await oneCall(s.url, 'fill', 'dd if=/dev/zero of=/app/fill bs=1M count=8192 status=none; echo wrote all');
    expect(r.body, JSON.stringify(r.body).slice(0, 2000)).toMatchObject({
      done: true,
      observation: { end_reason: 'env_failed', failure: { reason: 'storage_exceeded', retryable: false } },
    });
    const message = r.body.observation.failure.message as string;
    expect(message).toMatch(
      /the env wrote \d+ MB to its container's writable layer, past the server's default storage bound \(2048 MB, --default-storage-mb; its bundle gives no storage_mb\), and was stopped/,
    );
    const wrote = Number(/wrote (\d+) MB/.exec(message)![1]);
    expect(wrote).toBeGreaterThan(ENV_LAYER_DEFAULTS.storageMb);
    console.log(`[default bounds] an env writing 8 GB (no storage_mb) was stopped at ${wrote} MB, ${r.seconds.toFixed(1)} s after its call began`);
    await nothingLeft(s.url, r.id);
  }, 600_000);

  it('an env that makes files past the default file bound is stopped: storage_exceeded, naming the default, and nothing left', async () => {
    // up to 600,000 empty files, 1,000 to a folder: the watch's looks grow costly with them, and
    // are spaced by their cost, so the env gets past the bound (twice it, here): the margin is wide
    const r = await oneCall(
      s.url,
      'flood',
      'mkdir -p /app/f && cd /app/f && for d in $(seq 600); do mkdir $d && (cd $d && seq 1000 | xargs touch); done; echo made all',
    );
    expect(r.body, JSON.stringify(r.body).slice(0, 2000)).toMatchObject({
      done: true,
      observation: { end_reason: 'env_failed', failure: { reason: 'storage_exceeded', retryable: false } },
    });
    const message = r.body.observation.failure.message as string;
    expect(message).toMatch(
      /the env made [\d,]+ entries \(files and directories created, changed or deleted\) in its container's writable layer, past the server's default file bound \(100,000, --default-max-files; its bundle gives no max_files\), and was stopped/,
    );
    const made = Number(/made ([\d,]+) entries/.exec(message)![1]!.replace(/,/g, ''));
    expect(made).toBeGreaterThan(ENV_LAYER_DEFAULTS.maxFiles);
    await nothingLeft(s.url, r.id);
    console.log(
      `[default bounds] an env making 600,000 files (no max_files) was stopped at ${made.toLocaleString('en-US')} entries, ${r.seconds.toFixed(1)} s after its call began; nothing of it was left ${((Date.now() - r.at) / 1000).toFixed(1)} s after the reply`,
    );
  }, 600_000);
});
