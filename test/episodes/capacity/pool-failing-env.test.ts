/**
 * The warm pool under a failing env (ProcessSandbox, no Docker):
 * - an env that crashes at start: failed refills count the moment they fail, refilling stops at
 *   the threshold with no refill beyond the first wave, and the refills still deploying stop too;
 * - a pooled env killed the moment a reset takes it (after the hand-out check, during its /reset)
 *   is the server's loss: the reset deploys a fresh env and the episode plays.
 */
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { WARM_POOL } from '../../../src/defaults.js';
import type { PoolStatus } from '../../../src/protocol/pool.js';
import type { DeployRequest, EnvHandle, Sandbox } from '../../../src/sandbox/sandbox.js';
import type { ProcessSandbox } from '../../support/process-sandbox.js';
import { FIXTURE_BUNDLE, startProcessServer, type ProcessServer } from '../../support/process-server.js';
import { waitFor } from '../../../scripts/lib/wait.js';
import { WsClient } from '../../../scripts/lib/ws-client.js';

async function pool(s: ProcessServer): Promise<PoolStatus> {
  const h = (await (await fetch(`${s.url}/health`)).json()) as { pool: PoolStatus };
  return h.pool;
}

async function metric(s: ProcessServer, name: string): Promise<number> {
  const text = await (await fetch(`${s.url}/metrics`)).text();
  const line = text.split('\n').find((l) => l.split(' ')[0] === name);
  return line ? Number(line.split(' ').pop()) : NaN;
}

/** the fixture bundle whose one env exits with code 3 as soon as it starts */
function crashingBundle(): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'pool-crashing-env-'));
  cpSync(FIXTURE_BUNDLE, dir, { recursive: true });
  const manifest = JSON.parse(readFileSync(path.join(dir, 'bundle.json'), 'utf8'));
  manifest.envs.echo.environment = { ECHO_EXIT_AT_START: '3' };
  writeFileSync(path.join(dir, 'bundle.json'), JSON.stringify(manifest, null, 2));
  return dir;
}

/**
 * Pooled envs are reached through a proxy that, on the first POST /reset it sees, kills the env
 * behind the server's back and drops the connection: the env died the moment a reset took it,
 * after it answered the hand-out check.
 */
class KillAtFirstReset {
  readonly killed: string[] = [];
  private readonly targets = new Map<string, string>();
  private readonly server: http.Server;
  private url = '';

  constructor(private readonly inner: ProcessSandbox) {
    this.server = http.createServer((req, res) => void this.forward(req, res));
  }

  async listen(): Promise<void> {
    await new Promise<void>((r) => this.server.listen(0, '127.0.0.1', r));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  close(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((r) => this.server.close(() => r()));
  }

  sandbox(): Sandbox {
    const deploy = async (req: DeployRequest): Promise<EnvHandle> => {
      const handle = await this.inner.deploy(req);
      if (!req.envId.startsWith('pool-')) return handle;
      this.targets.set(req.envId, handle.baseUrl);
      return { ...handle, baseUrl: `${this.url}/${req.envId}` };
    };
    return new Proxy(this.inner, {
      get: (target, prop) => {
        if (prop === 'deploy') return deploy;
        const v = Reflect.get(target, prop) as unknown;
        return typeof v === 'function' ? v.bind(target) : v;
      },
    }) as Sandbox;
  }

  private async forward(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const [, id = '', ...rest] = (req.url ?? '/').split('/');
    const target = this.targets.get(id);
    const sub = `/${rest.join('/')}`;
    if (!target) return void res.writeHead(502).end();
    if (req.method === 'POST' && sub === '/reset' && this.killed.length === 0) {
      this.killed.push(id);
      await this.inner.killBehindBack(id);
      req.socket.destroy();
      return;
    }
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const headers = Object.fromEntries(Object.entries(req.headers).filter(([k]) => k !== 'host' && k !== 'content-length')) as Record<string, string>;
    try {
      const r = await fetch(target + sub, { method: req.method, headers, body: chunks.length ? Buffer.concat(chunks) : undefined });
      res.writeHead(r.status, { 'content-type': r.headers.get('content-type') ?? 'application/json' }).end(Buffer.from(await r.arrayBuffer()));
    } catch {
      req.socket.destroy();
    }
  }
}

describe('the pool under a failing env', () => {
  const dirs: string[] = [];
  afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

  it('an env that crashes at start: failures count as they happen, no refill runs beyond the first wave, and refilling stops at the threshold', async () => {
    const bundle = crashingBundle();
    dirs.push(bundle);
    const size = 8;
    const poolSpawns: string[] = [];
    const s = await startProcessServer(
      { maxConcurrentEnvs: size, warmPool: size, maxConcurrentDeploys: size },
      {
        bundle,
        wrap: (sb) => {
          sb.events.on('spawn', (id: string) => id.startsWith('pool-') && poolSpawns.push(id));
          return sb;
        },
      },
    );
    try {
      await waitFor(async () => (await pool(s)).refilling === false, 30_000, 'refilling to stop');
      // the refills still deploying when refilling stopped are stopped with it
      await waitFor(async () => (await pool(s)).deploying === 0, 30_000, 'no refill deploying');
      const p = await pool(s);
      expect(p.refill_failures).toBe(WARM_POOL.maxConsecutiveFailures);
      expect(p.consecutive_failures).toBe(WARM_POOL.maxConsecutiveFailures);
      expect(p.last_error).toContain('exited with code 3');
      expect(await metric(s, 'openenv_pool_refill_failures_total')).toBe(WARM_POOL.maxConsecutiveFailures);
      // no failure started a refill of its own while the first wave was still deploying
      expect(poolSpawns.length).toBeLessThanOrEqual(size);
      expect(new Set(poolSpawns).size).toBe(poolSpawns.length);
      const stopped = await metric(s, 'openenv_pool_discarded_total{reason="stopped"}');
      expect(stopped).toBe(poolSpawns.length - WARM_POOL.maxConsecutiveFailures);
      await waitFor(() => s.sandbox.held().length === 0, 30_000, 'every stopped refill removed');
    } finally {
      await s.stop();
    }
  });

  it('a pooled env killed the moment a reset takes it: the reset deploys a fresh env instead and the episode plays', async () => {
    let killer!: KillAtFirstReset;
    const s = await startProcessServer(
      { maxConcurrentEnvs: 2, warmPool: 1 },
      {
        wrap: (sb) => {
          killer = new KillAtFirstReset(sb);
          return killer.sandbox();
        },
      },
    );
    await killer.listen();
    try {
      await waitFor(async () => (await pool(s)).ready === 1, 30_000, 'a pooled env ready');
      const c = await WsClient.open(s.url);
      const r = await c.reset({ task_id: 'fx-echo-0' });
      expect(r.type).toBe('observation');
      expect(killer.killed).toHaveLength(1);
      const id = r.data.observation.episode_id as string;
      const ep = s.app.openenv.manager.get(id)!;
      // a fresh env of its own, not the dead pooled one
      expect(ep.envId).toBe(id);
      expect(r.data.observation.timings.pooled).toBe(false);
      expect(s.sandbox.held()).not.toContain(killer.killed[0]);
      expect(await metric(s, 'openenv_pool_discarded_total{reason="dead"}')).toBe(1);
      expect(await metric(s, 'openenv_env_failures_total{reason="env_crashed"}')).not.toBeGreaterThan(0);
      expect((await c.call('echo', { text: 'fresh' })).data.observation.result.content[0].text).toBe('fresh');
      expect((await c.call('end_turn', {})).data.done).toBe(true);
      await c.close();
      await ep.tornDown;
    } finally {
      await s.stop();
      await killer.close();
    }
  });
});
