/**
 * The address-pool test: Docker's default pools hold about 30 bridge networks, so 40 concurrent
 * episodes only work because every episode network gets a subnet from our own pool.
 */
import { execFileSync } from 'node:child_process';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { LABELS, type EnvHandle } from '../../../src/sandbox/sandbox.js';
import { DockerSandbox } from '../../../src/sandbox/docker/index.js';
import { describeDocker, labelledResources, uniqueInstance } from '../../support/docker.js';
import { buildEcho, echoSpec, post } from './fixture.js';

const N = 40;

describeDocker('DockerSandbox under load', () => {
  const instance = uniqueInstance('load');
  const instanceLabel = `${LABELS.instance}=${instance}`;
  const sandbox = new DockerSandbox({ instance, bundleName: 'fixture-v1' });
  let image = '';

  beforeAll(async () => {
    image = await buildEcho(sandbox);
  });

  afterAll(async () => {
    execFileSync('docker', ['network', 'prune', '-f', '--filter', `label=${instanceLabel}`], { stdio: 'ignore' });
    await sandbox.sweep();
    await sandbox.close();
  });

  it(`the engine's default address pools alone would not hold ${N} networks`, () => {
    // Plain networks (no subnet given) draw from the engine's default pools; they are labelled with
    // this test's instance so the afterAll removes them even if this test fails half way.
    const created: string[] = [];
    let refusal = '';
    try {
      for (let i = 0; i < N; i++) {
        try {
          created.push(
            execFileSync('docker', ['network', 'create', '--label', instanceLabel, `${instance}-default-pool-${i}`], {
              encoding: 'utf8',
              stdio: ['ignore', 'pipe', 'pipe'],
            }).trim(),
          );
        } catch (err) {
          refusal = String((err as { stderr?: Buffer }).stderr ?? err);
          break;
        }
      }
    } finally {
      if (created.length > 0) execFileSync('docker', ['network', 'rm', ...created], { stdio: 'ignore' });
    }
    console.log(`[measure] the engine's default pools gave ${created.length} more networks, then: ${refusal.trim()}`);
    expect(created.length).toBeLessThan(N);
    expect(refusal).toMatch(/could not find an available, non-overlapping IPv4 address pool/);
  });

  it(`deploys ${N} envs at once, each answering a tool call, and tears them all down`, async () => {
    const t0 = Date.now();
    const handles: EnvHandle[] = await Promise.all(
      Array.from({ length: N }, (_, i) => sandbox.deploy({ envId: `load-${i}`, env: echoSpec(image, { deployTimeoutMs: 90_000 }) })),
    );
    const deployWall = Date.now() - t0;
    expect(sandbox.networksInUse()).toBe(N);
    expect(labelledResources(instanceLabel).containers).toHaveLength(N);
    expect(new Set(handles.map((h) => new URL(h.baseUrl).hostname)).size).toBe(N);
    expect(new Set(handles.map((h) => h.networkId)).size).toBe(N);

    const answers = await Promise.all(
      handles.map(async (h, i) => {
        await post(h.baseUrl, '/reset', { task_id: `load-${i}`, data: {} });
        return post(h.baseUrl, '/tools/call', { name: 'echo', arguments: { text: `env ${i}` } });
      }),
    );
    answers.forEach((a, i) => expect(a).toMatchObject({ status: 200, json: { text: `env ${i}` } }));

    const t1 = Date.now();
    await Promise.all(handles.map((h) => sandbox.teardown(h.envId)));
    const teardownWall = Date.now() - t1;
    console.log(`[measure] ${N} concurrent deploys ready in ${deployWall} ms (wall); ${N} concurrent teardowns in ${teardownWall} ms`);
    expect(sandbox.networksInUse()).toBe(0);
    expect(labelledResources(instanceLabel)).toEqual({ containers: [], networks: [] });
  });
});
