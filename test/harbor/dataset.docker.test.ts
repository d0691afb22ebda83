/**
 * The shipped Harbor dataset (datasets/openenv-harbor-v1) on real containers: imported as a
 * bundle, every task's image built offline from the local Debian base, then every task played
 * straight through the shell and verifier rooms: its oracle (solution/solve.sh, the golden bash
 * call) must score each score's max, and an empty run (no call) the floor; the two-step task's
 * empty run is stopped after its first step by min_reward.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Docker from 'dockerode';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { importHarbor, parseBaseImageRule } from '../../src/authoring/harbor/index.js';
import { contextDir, loadBundle, type LoadedBundle, type Task } from '../../src/bundle/index.js';
import { buildEnvImage } from '../../src/sandbox/engine/image-build.js';
import { describeDocker } from '../support/docker.js';
import { playVerified } from '../support/verified-play.js';
import { BASE_IMAGE_RULE, DATASET, ensureDebianBase } from './helpers.js';

/** the dataset's tasks, by folder name */
const TASK_IDS = [
  'extract-contacts',
  'fix-backup-script',
  'fix-median',
  'fix-package-import',
  'json-merge',
  'log-pipeline',
  'rename-photos',
  'sales-summary',
  'service-config',
  'sqlite-top-customers',
  'temperature-cli',
  'word-frequency',
];

describeDocker('the shipped Harbor dataset, played through the shell and verifier rooms', () => {
  let out: string;
  let bundle: LoadedBundle;
  const images = new Map<string, string>();
  const tasks = () => Object.values(bundle.splits).flat();

  beforeAll(async () => {
    ensureDebianBase();
    out = path.join(mkdtempSync(path.join(os.tmpdir(), 'harbor-dataset-')), 'harbor-v1');
    const imported = await importHarbor({
      sources: [DATASET],
      out,
      baseImages: [parseBaseImageRule(BASE_IMAGE_RULE)],
      ignoreInternet: false,
      skipRefused: false,
      force: false,
    });
    expect(imported.refused).toEqual([]);
    bundle = await loadBundle(out);
    const docker = new Docker();
    const inflight = new Map<string, Promise<string>>();
    // two builds at a time: small images on a shared two-core machine
    const envs = Object.keys(bundle.manifest.envs);
    const lanes = [0, 1].map(async (lane) => {
      for (let i = lane; i < envs.length; i += 2) {
        const env = envs[i]!;
        images.set(
          env,
          await buildEnvImage(docker, { bundleName: bundle.manifest.name, envName: env, contextDir: contextDir(bundle, env)!, buildArgs: {} }, inflight),
        );
      }
    });
    await Promise.all(lanes);
  }, 600_000);

  afterAll(async () => {
    await bundle?.cleanup();
    if (out) rmSync(path.dirname(out), { recursive: true, force: true });
  });

  it('imports all twelve tasks, each with its own image built offline', () => {
    expect(
      tasks()
        .map((t) => t.task_id)
        .sort(),
    ).toEqual(TASK_IDS);
    expect(images.size).toBe(12);
    for (const tag of images.values()) expect(tag).toMatch(/^openenv-bundle\/harbor-v1-[a-z0-9.-]+:[0-9a-f]{12}$/);
  });

  const image = (task: Task) => images.get(bundle.envOf(task).name)!;
  const byId = (id: string) => bundle.byId.get(id)!;

  it.each(TASK_IDS)('%s: the oracle scores the max, an empty run the floor', async (id) => {
    const task = byId(id);
    const golden = await playVerified(bundle, task, image(task), 'golden');
    expect(
      golden.calls.filter((c) => c.isError),
      JSON.stringify(golden.calls),
    ).toEqual([]);
    expect(Object.keys(golden.scores).length).toBeGreaterThan(0);
    for (const [name, v] of Object.entries(golden.scores)) expect([name, v]).toEqual([name, 1]);
    const empty = await playVerified(bundle, task, image(task), 'empty');
    for (const [name, v] of Object.entries(empty.scores)) expect([name, v]).toEqual([name, 0]);
    if (id === 'sales-summary') expect(Object.keys(golden.scores).sort()).toEqual(['correctness', 'format']);
    if (id === 'log-pipeline') {
      expect(golden.perTurn).toEqual([{ reward: 1 }, { reward: 1 }]);
      // the first step scores 0, under its min_reward: the second is never played
      expect(empty).toMatchObject({ stoppedAfter: 1, perTurn: [{ reward: 0 }], scores: { reward: 0 } });
    }
  });
});
