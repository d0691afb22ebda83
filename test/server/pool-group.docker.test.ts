/**
 * --warm-pool-group on real Docker: a bundle of three envs (the fixture's echo env under three
 * names, each its own image), a pool of 4 filled with the default split's env, and groups of 4
 * resets of one env arriving staggered, as a GRPO trainer's rollouts of one task do. The first
 * reset of a group has the pool start 3 more of its env (the stale pooled envs give way); later
 * resets of the group take them (hits, pooled: true). The engine never runs more env containers
 * than the cap (counted from its start and die events), and nothing is left after.
 */
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { expect, it, onTestFinished } from 'vitest';
import { followContainerLives } from '../../scripts/lib/container-lives.js';
import { WsClient } from '../../scripts/lib/ws-client.js';
import { describeDocker, labelledResources, uniqueInstance, waitFor } from '../support/docker.js';
import { FIXTURE_BUNDLE, INSTANCE_LABEL, startServer } from '../support/docker-server.js';

const ENVS = ['echo', 'echo2', 'echo3'];
const CAP = 8;

/** the fixture bundle with its env also under the names of ENVS (each its own build), a task of each in eval */
function threeEnvBundle(): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'pool-group-'));
  cpSync(FIXTURE_BUNDLE, dir, { recursive: true });
  const manifest = JSON.parse(readFileSync(path.join(dir, 'bundle.json'), 'utf8'));
  manifest.name = 'fixture-three-envs';
  const first = JSON.parse(readFileSync(path.join(dir, 'tasks/eval.jsonl'), 'utf8').trim().split('\n')[0]!);
  const rows: unknown[] = [];
  for (const name of ENVS.slice(1)) {
    cpSync(path.join(dir, 'envs/echo'), path.join(dir, `envs/${name}`), { recursive: true });
    manifest.envs[name] = { ...manifest.envs.echo, build: `envs/${name}` };
    manifest.toolsets[name] = { ...manifest.toolsets.echo, env: name };
    rows.push({ ...first, task_id: `group-${name}`, toolset: name });
  }
  writeFileSync(path.join(dir, 'bundle.json'), JSON.stringify(manifest, null, 2));
  writeFileSync(
    path.join(dir, 'tasks/eval.jsonl'),
    readFileSync(path.join(dir, 'tasks/eval.jsonl'), 'utf8') + rows.map((r) => JSON.stringify(r)).join('\n') + '\n',
  );
  return dir;
}

async function poolStatus(url: string): Promise<any> {
  return ((await (await fetch(`${url}/health`)).json()) as any).pool;
}

describeDocker('warm pool groups on Docker', () => {
  it('groups of 4 resets of one env, staggered: the later resets of each group take envs the pool started for it, and the cap holds', async () => {
    const bundle = threeEnvBundle();
    onTestFinished(() => rmSync(bundle, { recursive: true, force: true }));
    const instance = uniqueInstance('pool-group');
    const label = `${INSTANCE_LABEL}=${instance}`;
    const lives = followContainerLives(label);
    const s = await startServer({ instance, maxConcurrentEnvs: CAP, warmPool: 4, warmPoolGroup: 4, maxConcurrentDeploys: 4 }, bundle);
    try {
      await waitFor(async () => (await poolStatus(s.url))?.ready === 4, 120_000, 'the pool full');
      const groups: { env: string; pooled: boolean[] }[] = [];
      for (const env of ['echo2', 'echo3']) {
        // the group's 4 resets, 1 s apart; each episode plays a call and ends
        const pooled = await Promise.all(
          Array.from({ length: 4 }, async (_, i) => {
            await new Promise((r) => setTimeout(r, i * 1000));
            const c = await WsClient.open(s.url);
            const r = await c.reset({ task_id: `group-${env}` }, 120_000);
            expect(r.type, JSON.stringify(r)).toBe('observation');
            expect((await c.call('echo', { text: env })).data.observation.result.content[0].text).toBe(env);
            await c.call('end_turn', {});
            await c.close();
            return r.data.observation.timings.pooled as boolean;
          }),
        );
        groups.push({ env, pooled });
      }
      // the first reset of each group found none of its env pooled; the last, 3 s on, took one started for it
      for (const g of groups) {
        expect(g.pooled[0], JSON.stringify(groups)).toBe(false);
        expect(g.pooled[3], JSON.stringify(groups)).toBe(true);
      }
      // on an idle engine all three later ones of each group are hits; on a loaded one the stale envs
      // that give way may take longer than a second or two to go, and a reset arriving meanwhile deploys its own
      const laterHits = groups.flatMap((g) => g.pooled.slice(1)).filter(Boolean).length;
      expect(laterHits, JSON.stringify(groups)).toBeGreaterThanOrEqual(3);
      expect((await poolStatus(s.url)).hits).toBeGreaterThanOrEqual(laterHits);
      const { peak } = await lives.stop();
      // the full pool was counted; the cap was never passed
      expect(peak).toBeGreaterThanOrEqual(4);
      expect(peak).toBeLessThanOrEqual(CAP);
    } finally {
      await s.stop();
      expect(labelledResources(label)).toEqual({ containers: [], networks: [] });
    }
  }, 300_000);
});
