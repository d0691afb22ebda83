/**
 * Faults a server meets in production, with the envs as processes: a peer that goes silent
 * without closing, a deploy that hangs, the engine restarting mid-episode (a stand-in: see
 * EngineRestartSandbox), an env that writes or answers without end.
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import WebSocket from 'ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LOG_TAIL_BYTES } from '../../src/defaults.js';
import { SandboxError, type DeployRequest, type EnvHandle, type Sandbox } from '../../src/sandbox/sandbox.js';
import type { ProcessSandbox } from '../support/process-sandbox.js';
import { processSuiteServer, startProcessServer, type ProcessServer } from '../support/process-server.js';
import { waitFor } from '../../scripts/lib/wait.js';
import { WsClient } from '../../scripts/lib/ws-client.js';
import { http } from '../routes/http.js';
import { heldBytes } from '../support/memory.js';

const REPO = fileURLToPath(new URL('../..', import.meta.url));
const MiB = 1024 * 1024;

function slotsFree(s: ProcessServer): boolean {
  return s.app.openenv.manager.list().length === 0 && s.app.openenv.admission.activeCount === 0 && s.sandbox.held().length === 0;
}

/** how many sessions the server dropped for missed pings (its ws_dropped log lines) */
function pingDrops(s: { logs(): string }): number {
  return s
    .logs()
    .split('\n')
    .filter((l) => l.includes('"event":"ws_dropped"')).length;
}

describe('a peer that goes silent without closing', () => {
  // pings every 0.3 s: a peer that misses two is dropped. The idle timeout is far away, so only
  // the pings can free the slot within the wait below.
  const s = processSuiteServer({ pingInterval: 0.3, idleTimeout: 600, toolTimeout: 1 });

  it('a client process that is paused (SIGSTOP) loses its slot within the ping budget', async () => {
    // a real client in its own process: resets, says so, then is stopped by us
    const script = `
      import WebSocket from 'ws';
      const ws = new WebSocket(process.argv[1]);
      ws.on('open', () => ws.send(JSON.stringify({ type: 'reset', data: { task_id: 'fx-echo-0' } })));
      ws.on('message', (m) => { const f = JSON.parse(m.toString()); console.log(f.type); });
    `;
    const child = spawn(process.execPath, ['--input-type=module', '-e', script, `${s.url.replace('http', 'ws')}/ws`], {
      cwd: REPO,
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    try {
      const first = await new Promise<string>((resolve, reject) => {
        child.stdout!.once('data', (d: Buffer) => resolve(d.toString().trim()));
        child.once('exit', (code) => reject(new Error(`client exited ${code}`)));
      });
      expect(first).toBe('observation');
      expect(s.app.openenv.admission.activeCount).toBe(1);
      const dropsBefore = pingDrops(s);
      child.kill('SIGSTOP');
      // the slot comes back: two missed pings, the socket terminated, the episode torn down
      await waitFor(() => slotsFree(s) && s.app.openenv.sessions.socketCount === 0, 20_000, 'the paused client dropped');
      expect(pingDrops(s)).toBe(dropsBefore + 1);
    } finally {
      child.kill('SIGKILL');
    }
  });

  it('a socket that stops reading (and so answers no ping) loses its slot within the ping budget', async () => {
    const c = await WsClient.open(s.url);
    expect((await c.reset({ task_id: 'fx-echo-0' })).type).toBe('observation');
    const dropsBefore = pingDrops(s);
    (c.ws as unknown as { _socket: { pause(): void } })._socket.pause();
    await waitFor(() => slotsFree(s) && s.app.openenv.sessions.socketCount === 0, 20_000, 'the mute socket dropped');
    expect(pingDrops(s)).toBe(dropsBefore + 1);
    c.terminate();
  });
});

describe('a peer whose pings are answered for it', () => {
  // pings every 0.3 s; idle after 3 s
  const s = processSuiteServer({ pingInterval: 0.3, idleTimeout: 3, toolTimeout: 1 });

  it('a peer behind a proxy that answers pings for it is governed by the idle timeout', async () => {
    // autoPong: the "proxy" answers every ping, the client behind it says nothing more
    const ws = new WebSocket(`${s.url.replace('http', 'ws')}/ws`, { autoPong: true });
    await new Promise((r) => ws.once('open', r));
    let pings = 0;
    ws.on('ping', () => pings++);
    const reply = new Promise((r) => ws.once('message', r));
    ws.send(JSON.stringify({ type: 'reset', data: { task_id: 'fx-echo-0' } }));
    await reply;
    const closed = await new Promise<{ code: number; reason: string }>((r) => ws.once('close', (code, reason) => r({ code, reason: reason.toString() })));
    // answered pings kept it past the ping budget; the idle clock closed it cleanly
    expect(pings).toBeGreaterThan(2);
    expect(closed.code).toBe(1000);
    expect(closed.reason).toMatch(/idle/);
    expect(pingDrops(s)).toBe(0);
    await waitFor(() => slotsFree(s), 20_000, 'the idle episode torn down');
  });
});

describe('a deploy that hangs', () => {
  const s = processSuiteServer({ maxConcurrentEnvs: 3 });

  it("does not delay other episodes' steps or resets", async () => {
    const a = await WsClient.open(s.url);
    expect((await a.reset({ task_id: 'fx-echo-0' })).type).toBe('observation');
    // the next env never listens: its deploy waits out deploy_timeout_s (30 s)
    s.sandbox.overrideNextDeploy({ ECHO_NO_LISTEN: '1' });
    const hung = await WsClient.open(s.url);
    const hungReply = hung.reset({ task_id: 'fx-echo-1' });
    const hungId = await s.sandbox.nextSpawn();
    await waitFor(() => s.app.openenv.manager.list().some((e) => e.phase === 'deploying'), 10_000, 'the hung deploy under way');
    // meanwhile: steps on a, and a whole new episode, answer while the other still deploys
    for (let i = 0; i < 5; i++) expect((await a.call('echo', { text: `a${i}` })).data.observation.result.data).toEqual({ text: `a${i}` });
    const b = await WsClient.open(s.url);
    expect((await b.reset({ task_id: 'fx-echo-2' })).type).toBe('observation');
    expect((await b.call('echo', { text: 'b' })).data.observation.result.data).toEqual({ text: 'b' });
    const stillDeploying = s.app.openenv.manager.list().find((e) => e.phase === 'deploying');
    expect(stillDeploying, 'the hung deploy finished before the others were served').toBeDefined();
    expect(s.sandbox.held()).toContain(hungId);
    await b.close();
    await a.close();
    // closing the hung session takes its deploy down with it
    hung.terminate();
    await hungReply.catch(() => undefined);
    await waitFor(() => slotsFree(s), 30_000, 'everything torn down');
  });
});

/**
 * The engine restarting, as the server sees it: while "down" every engine call fails as dockerd's
 * socket does (refused), and the restart kills every container (no live-restore). Restarting the
 * real, shared dockerd in a test would take everyone else's containers with it: not done.
 */
class EngineRestartSandbox implements Sandbox {
  down = false;
  constructor(readonly inner: ProcessSandbox) {}
  private check(): void {
    if (this.down) throw new SandboxError('engine_failed', 'Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?');
  }
  /** dockerd stops: its containers are killed with it */
  goDown(): void {
    this.down = true;
    const envs = (this.inner as unknown as { envs: Map<string, { child: { kill(sig: string): void } }> }).envs;
    for (const p of envs.values()) p.child.kill('SIGKILL');
  }
  async ping() {
    this.check();
    return this.inner.ping();
  }
  readonly images: Sandbox['images'] = {
    build: async (r) => {
      this.check();
      return this.inner.images.build(r);
    },
    check: async (ref) => {
      this.check();
      return this.inner.images.check(ref);
    },
  };
  async deploy(req: DeployRequest): Promise<EnvHandle> {
    this.check();
    return this.inner.deploy(req);
  }
  async diagnose(h: EnvHandle) {
    this.check();
    return this.inner.diagnose(h);
  }
  async teardown(id: string) {
    this.check();
    return this.inner.teardown(id);
  }
  async sweep() {
    this.check();
    return this.inner.sweep();
  }
  async listEnvIds() {
    this.check();
    return this.inner.listEnvIds();
  }
  networksInUse() {
    return this.inner.networksInUse();
  }
  close() {
    return this.inner.close();
  }
}

describe('the engine restarted mid-episode', () => {
  let s: ProcessServer;
  let engine: EngineRestartSandbox;
  beforeAll(async () => {
    s = await startProcessServer({ maxConcurrentEnvs: 2, reconcileIntervalMs: 200 }, { wrap: (sb) => (engine = new EngineRestartSandbox(sb)) });
  });
  afterAll(async () => {
    await s?.stop();
  });

  it('the next step ends env_crashed or env_unreachable, /health is 503 while down and healthy after, nothing is left', async () => {
    expect((await http(s.url, 'GET', '/health')).status).toBe(200);
    const c = await WsClient.open(s.url);
    expect((await c.reset({ task_id: 'fx-echo-0' })).type).toBe('observation');
    engine.goDown();
    const step = await c.call('echo', { text: 'anyone?' });
    expect(step.type).toBe('observation');
    expect(step.data).toMatchObject({ done: true, reward: null, observation: { end_reason: 'env_failed' } });
    expect(['env_crashed', 'env_unreachable']).toContain(step.data.observation.failure.reason);
    await waitFor(async () => (await http(s.url, 'GET', '/health')).status === 503, 20_000, '/health 503 while the engine is down');
    const health = await http(s.url, 'GET', '/health');
    expect(health.body).toMatchObject({ status: 'unhealthy', reason: expect.stringMatching(/engine/) });
    // a reset meanwhile fails with the engine's reason, and frees its slot
    const d = await WsClient.open(s.url);
    const refused = await d.reset({ task_id: 'fx-echo-1' });
    expect(refused).toMatchObject({ type: 'error', data: { code: 'EXECUTION_ERROR', reason: 'engine_error' } });
    expect(refused.data.message).toMatch(/Docker daemon/);
    // the engine is back
    engine.down = false;
    await waitFor(async () => (await http(s.url, 'GET', '/health')).status === 200, 20_000, '/health 200 once the engine is back');
    await c.close();
    // what the failed teardown left, the reconciler removes
    await waitFor(() => slotsFree(s), 20_000, 'nothing left');
    expect(s.sandbox.live()).toEqual([]);
    // and episodes work again
    const r = await d.reset({ task_id: 'fx-echo-1' });
    expect(r.type).toBe('observation');
    expect((await d.call('echo', { text: 'back' })).data.observation.result.data).toEqual({ text: 'back' });
    await d.close();
    await waitFor(() => slotsFree(s), 20_000, 'nothing left');
  });
});

describe('an env that writes or answers without end', () => {
  const s = processSuiteServer({ toolTimeout: 20, maxConcurrentEnvs: 2 });

  it('stdout written without end: the log tail stays bounded, the server does not grow, the episode works', async () => {
    s.sandbox.overrideNextDeploy({ ECHO_FLOOD_STDOUT: '1' });
    const c = await WsClient.open(s.url);
    const r = await c.reset({ task_id: 'fx-echo-0' });
    expect(r.type).toBe('observation');
    global.gc?.();
    const before = heldBytes();
    // let it write for a while, working meanwhile (some hundreds of MB go through the pipe)
    for (let i = 0; i < 20; i++) expect((await c.call('echo', { text: `x${i}` })).data.observation.result.data).toEqual({ text: `x${i}` });
    await new Promise((res) => setTimeout(res, 2000));
    const id = r.data.observation.episode_id as string;
    const diag = await s.sandbox.diagnose({
      envId: id,
      containerId: (s.sandbox as unknown as { envs: Map<string, { containerId: string }> }).envs.get(id)!.containerId,
      baseUrl: '',
      networkId: '',
    });
    expect(diag.running).toBe(true);
    expect(Buffer.byteLength(diag.logTail)).toBeLessThanOrEqual(LOG_TAIL_BYTES + 16);
    expect(heldBytes() - before).toBeLessThan(256 * MiB);
    // it crashes: the failure's log tail, carried in the observation, is bounded too
    const crashed = await c.call('crash', {});
    expect(crashed.data.done).toBe(true);
    expect(Buffer.byteLength(crashed.data.observation.failure.log_tail ?? '')).toBeLessThanOrEqual(LOG_TAIL_BYTES + 16);
    await c.close();
    await waitFor(() => slotsFree(s), 20_000, 'torn down');
  });

  it('a tool answer that never ends: the read stops at the bound, the call fails as execution_error, the episode goes on', async () => {
    s.sandbox.overrideNextDeploy({ ECHO_ENDLESS_REPLY: '1' });
    const c = await WsClient.open(s.url);
    expect((await c.reset({ task_id: 'fx-echo-0' })).type).toBe('observation');
    global.gc?.();
    const before = heldBytes();
    const out = await c.call('echo', { text: 'hi' });
    expect(out.type).toBe('observation');
    expect(out.data.done).toBe(false);
    expect(out.data.observation.error).toMatchObject({ error_type: 'execution_error' });
    expect(out.data.observation.error.message).toMatch(/MiB/);
    expect(heldBytes() - before).toBeLessThan(256 * MiB);
    // still an episode: the next call is answered (and bounded) the same way
    expect((await c.state()).data).toMatchObject({ done: false, step_count: 1 });
    await c.close();
    await waitFor(() => slotsFree(s), 20_000, 'torn down');
  });
});
