/**
 * Harbor's multi-step semantics on the real server: a three-step Harbor task written for these
 * tests (test/fixtures/harbor-tasks/three-steps: step 2 has `min_reward = 1.0`, the strategy is
 * left to Harbor's default, "mean") imported by the built CLI as a user runs it, served on real
 * containers and played over /ws. Step 1 passed, step 2 failed: the episode stops after step 2
 * (step 3 never played, never verified) and its reward is Harbor's mean over the steps that ran,
 * 0.5; the same task with `turn_reward: "mean_all_turns"` (our option, counting the unplayed step
 * as 0) scores 1/3. Its oracle plays all three steps at 1.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { GoldenStep } from '../../src/bundle/schema.js';
import type { Transcript } from '../../src/protocol/console.js';
import { describeDocker, labelledResources } from '../support/docker.js';
import { INSTANCE_LABEL, startServer, type TestServer } from '../support/docker-server.js';
import { BASE_IMAGE_RULE, ensureDebianBase } from './helpers.js';
import { playOverWs } from './ws-play.js';

const CLI = path.resolve(import.meta.dirname, '../../dist/cli/openenv-bundle.js');
const TASK = path.resolve(import.meta.dirname, '../fixtures/harbor-tasks/three-steps');
/** the imported task, and a copy of its row naming our own rule */
const HARBOR_MEAN = 'three-steps';
const ALL_TURNS = 'three-steps-all-turns';
/** subnets of this file's server (no other test file uses them) */
const SUBNET_POOL = '10.247.32.0/22';
/** the bundle's name, so its env's image is this file's own (openenv-bundle/<bundle>-<env>) */
const BUNDLE = 'multi-step-three-steps';
const IMAGE_REPO = `openenv-bundle/${BUNDLE}-three-steps`;

/** the tags of this file's env image on the engine */
function ownImages(): string[] {
  return execFileSync('docker', ['images', '--format', '{{.Repository}}:{{.Tag}}', IMAGE_REPO], { encoding: 'utf8' }).split('\n').filter(Boolean);
}

describeDocker("a three-step Harbor task with min_reward on step 2, served: Harbor's reward for an early stop", () => {
  let tmp: string;
  let s: TestServer;
  let golden: GoldenStep[];
  let importOutput: string;
  let imagesBefore: string[] = [];

  beforeAll(async () => {
    ensureDebianBase();
    imagesBefore = ownImages();
    tmp = mkdtempSync(path.join(os.tmpdir(), 'harbor-multi-step-'));
    const out = path.join(tmp, BUNDLE);
    const r = spawnSync(process.execPath, [CLI, 'import', 'harbor', TASK, '--out', out, '--base-image', BASE_IMAGE_RULE], {
      encoding: 'utf8',
      timeout: 300_000,
    });
    expect(r.status, r.stdout + r.stderr).toBe(0);
    importOutput = r.stdout;
    const file = path.join(out, 'tasks/train.jsonl');
    const [row] = readFileSync(file, 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, any>);
    // Harbor's default strategy: nothing written, the bundle's default (mean) applies
    expect(row).toMatchObject({ task_id: HARBOR_MEAN, max_turns: 3 });
    expect(row!.turn_reward).toBeUndefined();
    expect(row!.per_turn.map((t: Record<string, unknown>) => t.min_reward ?? null)).toEqual([null, { reward: 1 }, null]);
    golden = row!.golden as GoldenStep[];
    writeFileSync(file, [row, { ...row, task_id: ALL_TURNS, turn_reward: 'mean_all_turns' }].map((x) => JSON.stringify(x)).join('\n') + '\n');
    s = await startServer({ subnetPool: SUBNET_POOL, maxConcurrentEnvs: 2, networkStock: 0 }, out);
  }, 900_000);

  afterAll(async () => {
    if (s?.app) {
      await s.stop();
      expect(labelledResources(`${INSTANCE_LABEL}=${s.instance}`)).toEqual({ containers: [], networks: [] });
    }
    if (tmp) rmSync(tmp, { recursive: true, force: true });
    // the engine as it was: the env image this suite built is removed
    const built = ownImages().filter((i) => !imagesBefore.includes(i));
    if (built.length > 0) execFileSync('docker', ['rmi', ...built], { stdio: 'pipe' });
  });

  const verifiedTurns = async (episodeId: string): Promise<number[]> => {
    const r = await fetch(`${s.url}/console/episodes/${episodeId}`);
    expect(r.status).toBe(200);
    const t = (await r.json()) as Transcript;
    return t.events.flatMap((ev) => (ev.kind === 'verifier' ? [ev.turn] : []));
  };

  /** step 1 solved (its golden call), step 2 not (end_turn at once): step 2 scores 0, under its min_reward */
  const passOneFailTwo = (): GoldenStep[] => [golden[0]!, { tool: 'end_turn' }, { tool: 'end_turn' }];

  it('the import notes no difference in the mean (there is none), and what still differs for a multi-step task', () => {
    expect(importOutput).not.toMatch(/counts 0/);
    expect(importOutput).toMatch(/\[\[steps\]\]: a step whose verifier fails .*without a reward here/);
  });

  it("step 1 passed, step 2 under its min_reward: the episode stops after step 2, scored Harbor's mean over the steps that ran (0.5)", async () => {
    const p = await playOverWs(s.url, HARBOR_MEAN, passOneFailTwo());
    expect(p.errors(), JSON.stringify(p.steps)).toEqual([]);
    // step 2's end_turn ends the episode: step 3's prompt is never given
    expect(p.steps.length).toBe(3);
    expect(p.steps[1]!.done).toBe(false);
    expect(p.last).toMatchObject({ done: true, reward: 0.5, observation: { end_reason: 'turns_ended', scores: { reward: 0.5 } } });
    expect(p.last.observation.result).toMatchObject({ content: [{ text: expect.stringMatching(/under its min_reward/) }] });
    expect(JSON.stringify(p.steps)).not.toContain('/app/report.txt');
    expect(await verifiedTurns(p.episodeId)).toEqual([1, 2]);
    await p.close();
  });

  it('the same play with turn_reward "mean_all_turns" (the unplayed step counting 0): 1/3', async () => {
    const p = await playOverWs(s.url, ALL_TURNS, passOneFailTwo());
    expect(p.errors(), JSON.stringify(p.steps)).toEqual([]);
    expect(p.steps.length).toBe(3);
    expect(p.last).toMatchObject({ done: true, observation: { end_reason: 'turns_ended' } });
    expect(p.last.reward).toBeCloseTo(1 / 3, 12);
    expect((p.last.observation.scores as Record<string, number>).reward).toBeCloseTo(1 / 3, 12);
    expect(await verifiedTurns(p.episodeId)).toEqual([1, 2]);
    await p.close();
  });

  it('the oracle plays all three steps, each verified, and scores 1 under either rule', async () => {
    for (const id of [HARBOR_MEAN, ALL_TURNS]) {
      const p = await playOverWs(s.url, id, golden);
      expect(p.errors(), JSON.stringify(p.steps)).toEqual([]);
      expect(p.last).toMatchObject({ done: true, reward: 1, observation: { end_reason: 'turns_ended', scores: { reward: 1 } } });
      expect(await verifiedTurns(p.episodeId)).toEqual([1, 2, 3]);
      await p.close();
    }
  });
});
