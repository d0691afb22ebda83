/**
 * Failure paths a healthy engine will not produce on demand: removals the engine refuses. A fake
 * engine (just the dockerode calls involved) stands in.
 */
import type Dockerode from 'dockerode';
import { describe, expect, it } from 'vitest';
import { LABELS, SandboxError } from '../../../src/sandbox/sandbox.js';
import { DockerSandbox } from '../../../src/sandbox/docker/index.js';
import { echoSpec } from './fixture.js';

function engineError(statusCode: number, message: string): Error {
  return Object.assign(new Error(`(HTTP code ${statusCode}) - ${message}`), { statusCode, json: { message } });
}

class FakeEngine {
  readonly networks = new Map<string, Record<string, string>>();
  readonly containers = new Map<string, Record<string, string>>();
  /** how many network removals to refuse before obeying */
  refuseNetworkRemovals = 0;
  containerRemoveError: Error | null = null;
  networkRemoveCalls = 0;
  listCalls = 0;
  private seq = 0;

  private matches(labels: Record<string, string>, filters: string): boolean {
    const wanted = (JSON.parse(filters) as { label: string[] }).label;
    return wanted.every((kv) => {
      const [k, v] = kv.split('=') as [string, string];
      return labels[k] === v;
    });
  }

  async createNetwork(opts: { Labels: Record<string, string> }) {
    const id = `net${++this.seq}`;
    this.networks.set(id, opts.Labels);
    return { id };
  }
  async createContainer(opts: { Labels: Record<string, string> }) {
    // the container is created, then the engine fails (e.g. a daemon error mid-request)
    this.containers.set(`ctr${++this.seq}`, opts.Labels);
    throw engineError(500, 'boom');
  }
  async listContainers(opts: { filters: string }) {
    this.listCalls++;
    return [...this.containers].filter(([, l]) => this.matches(l, opts.filters)).map(([Id, Labels]) => ({ Id, Labels }));
  }
  async listNetworks(opts: { filters: string }) {
    return [...this.networks].filter(([, l]) => this.matches(l, opts.filters)).map(([Id, Labels]) => ({ Id, Labels }));
  }
  getContainer(id: string) {
    return {
      remove: async () => {
        if (this.containerRemoveError) throw this.containerRemoveError;
        if (!this.containers.delete(id)) throw engineError(404, `No such container: ${id}`);
      },
    };
  }
  getNetwork(id: string) {
    return {
      disconnect: async () => {},
      remove: async () => {
        this.networkRemoveCalls++;
        if (this.refuseNetworkRemovals > 0) {
          this.refuseNetworkRemovals--;
          throw engineError(403, `error while removing network: network ${id} has active endpoints`);
        }
        if (!this.networks.delete(id)) throw engineError(404, `network ${id} not found`);
      },
    };
  }
}

function sandboxOn(engine: FakeEngine) {
  return new DockerSandbox({ docker: engine as unknown as Dockerode, instance: 'fake', bundleName: 'fixture-v1', removeAttempts: 3, removeBaseDelayMs: 1 });
}

describe('DockerSandbox against a refusing engine', () => {
  it('keeps the subnet while the network cannot be removed, retries, and releases it once it is gone', async () => {
    const engine = new FakeEngine();
    const sandbox = sandboxOn(engine);
    engine.refuseNetworkRemovals = Infinity;
    const err = await sandbox.deploy({ envId: 'e1', env: echoSpec('img') }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(SandboxError);
    expect((err as SandboxError).reason).toBe('engine_error');
    expect((err as SandboxError).message).toMatch(/boom/);
    // the container went, the network could not: its subnet is still held, the failure counted
    expect(engine.containers.size).toBe(0);
    expect(engine.networks.size).toBe(1);
    expect(engine.networkRemoveCalls).toBe(3);
    expect(sandbox.networksInUse()).toBe(1);
    expect(sandbox.removalFailures).toBe(1);
    expect(await sandbox.listEnvIds()).toEqual(['e1']);

    // a teardown that still fails says so
    const tdErr = await sandbox.teardown('e1').catch((e: unknown) => e);
    expect((tdErr as SandboxError).reason).toBe('engine_error');
    expect((tdErr as SandboxError).message).toMatch(/active endpoints/);
    expect(sandbox.networksInUse()).toBe(1);

    // the engine recovers after one more refusal: the retry gets through
    engine.refuseNetworkRemovals = 1;
    await sandbox.teardown('e1');
    expect(engine.networks.size).toBe(0);
    expect(sandbox.networksInUse()).toBe(0);
    await sandbox.close();
  });

  it('counts "already being removed" (409) and "not found" (404) as removed', async () => {
    const engine = new FakeEngine();
    const sandbox = sandboxOn(engine);
    const labels = { [LABELS.managed]: '1', [LABELS.instance]: 'fake', [LABELS.episode]: 'e2' };
    engine.containers.set('c409', labels);
    engine.networks.set('n1', labels);
    engine.containerRemoveError = engineError(409, 'removal of container c409 is already in progress');
    await sandbox.teardown('e2');
    engine.containerRemoveError = engineError(404, 'No such container: c409');
    engine.networks.set('n2', labels);
    await sandbox.teardown('e2');
    expect(engine.networks.size).toBe(0);
    await sandbox.close();
  });

  it('shares one removal between concurrent teardowns of an episode', async () => {
    const engine = new FakeEngine();
    const sandbox = sandboxOn(engine);
    const labels = { [LABELS.managed]: '1', [LABELS.instance]: 'fake', [LABELS.episode]: 'e3' };
    engine.containers.set('c1', labels);
    await Promise.all([sandbox.teardown('e3'), sandbox.teardown('e3'), sandbox.teardown('e3')]);
    expect(engine.listCalls).toBe(1);
    await sandbox.teardown('e3');
    expect(engine.listCalls).toBe(2);
    await sandbox.close();
  });

  it('refuses calls once closed', async () => {
    const sandbox = sandboxOn(new FakeEngine());
    await sandbox.close();
    await expect(sandbox.deploy({ envId: 'x', env: echoSpec('img') })).rejects.toThrow(/closed/);
    await expect(sandbox.sweep()).rejects.toThrow(/closed/);
  });
});
