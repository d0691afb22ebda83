/**
 * A call reaches only the env deployed for its episode. An env's address is
 * only a hint: once its container is gone, another episode's env (another server on the same
 * subnet pool) may hold it. Every exchange proves the episode's env-identity secret both ways
 * (src/sandbox/env-identity.ts), and the death of the container ends the episode at once.
 */
import { execFileSync } from 'node:child_process';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EnvCallError, EnvClient } from '../../../src/episodes/env-client.js';
import { DockerSandbox } from '../../../src/sandbox/docker/index.js';
import { AUTH_HEADER, envProof, newEnvSecret, NONCE_HEADER, PROOF_HEADER } from '../../../src/sandbox/env-identity.js';
import { describeDocker, labelledResources, uniqueInstance, waitFor } from '../../support/docker.js';
import { INSTANCE_LABEL, startServer, type TestServer } from '../../support/docker-server.js';
import { WsClient } from '../../../scripts/lib/ws-client.js';
import { buildEcho, echoSpec } from './fixture.js';

const EPISODE_LABEL = 'io.openenv.bundle-server.episode';

function docker(args: string[]): string {
  return execFileSync('docker', args, { encoding: 'utf8', stdio: 'pipe' }).trim();
}

function envOf(episodeId: string): { container: string; network: string; ip: string } {
  const { containers, networks } = labelledResources(`${EPISODE_LABEL}=${episodeId}`);
  expect(containers).toHaveLength(1);
  expect(networks).toHaveLength(1);
  const ip = docker(['inspect', '-f', '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}', containers[0]!]);
  return { container: containers[0]!, network: networks[0]!, ip };
}

async function rejection(p: Promise<unknown>): Promise<unknown> {
  try {
    await p;
  } catch (e) {
    return e;
  }
  throw new Error('expected the call to be refused, but it was answered');
}

describe('the env client checks who answers', () => {
  // a stand-in env on loopback whose proofs the test controls
  let mode: 'none' | 'right' | 'wrong' | '421' = 'none';
  let lastAuth: { nonce?: string; auth?: string } = {};
  const secret = newEnvSecret();
  const server = http.createServer((req, res) => {
    const nonce = String(req.headers[NONCE_HEADER] ?? '');
    lastAuth = { nonce, auth: String(req.headers[AUTH_HEADER] ?? '') };
    const headers: Record<string, string> = { 'content-type': 'application/json' };
    if (mode === 'right') headers[PROOF_HEADER] = envProof(secret, nonce, 'response');
    if (mode === 'wrong') headers[PROOF_HEADER] = envProof(newEnvSecret(), nonce, 'response');
    res.writeHead(mode === '421' ? 421 : 200, headers);
    res.end(JSON.stringify({ ok: true }));
  });
  let url = '';
  beforeAll(async () => {
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise<void>((r) => server.close(() => r())));

  it('every request proves the secret without carrying it, with a fresh nonce', async () => {
    const client = new EnvClient(url, secret);
    mode = 'none';
    await client.request('GET', '/state', undefined, 5_000);
    const first = lastAuth;
    await client.request('GET', '/state', undefined, 5_000);
    expect(first.nonce).toMatch(/^[0-9a-f]{32}$/);
    expect(first.auth).toBe(envProof(secret, first.nonce!, 'request'));
    expect(lastAuth.nonce).not.toBe(first.nonce);
    expect(JSON.stringify(first)).not.toContain(secret);
  });

  it('an env that never proves itself (it predates the check) is answered as before', async () => {
    mode = 'none';
    const client = new EnvClient(url, secret);
    for (let i = 0; i < 3; i++) expect((await client.request('POST', '/tools/call', {}, 5_000)).status).toBe(200);
  });

  it('a wrong proof, a 421, or no proof after the env has proven itself: refused as wrong_env', async () => {
    mode = 'wrong';
    const e1 = await rejection(new EnvClient(url, secret).request('POST', '/tools/call', {}, 5_000));
    expect(e1).toBeInstanceOf(EnvCallError);
    expect(e1).toMatchObject({ kind: 'wrong_env' });

    mode = '421';
    expect(await rejection(new EnvClient(url, secret).request('POST', '/finish', {}, 5_000))).toMatchObject({ kind: 'wrong_env' });

    const client = new EnvClient(url, secret);
    mode = 'right';
    expect((await client.request('POST', '/reset', {}, 5_000)).status).toBe(200);
    mode = 'none';
    const e3 = await rejection(client.request('POST', '/tools/call', {}, 5_000));
    expect(e3).toMatchObject({ kind: 'wrong_env' });
    expect((e3 as Error).message).toMatch(/other than this episode's env/);
  });
});

describeDocker('env identity on real Docker', () => {
  const sandbox = new DockerSandbox({ instance: uniqueInstance('ident'), bundleName: 'fixture-v1' });
  afterAll(async () => {
    await sandbox.sweep();
    await sandbox.close();
    expect(labelledResources(`${INSTANCE_LABEL}=${sandbox.instance}`)).toEqual({ containers: [], networks: [] });
  });

  it("another episode's env refuses a call meant for this one, does nothing, and the client says wrong_env", async () => {
    const image = await buildEcho(sandbox);
    const [one, two] = await Promise.all([
      sandbox.deploy({ envId: 'ident-one', env: echoSpec(image) }),
      sandbox.deploy({ envId: 'ident-two', env: echoSpec(image) }),
    ]);
    expect(one.secret).toMatch(/^[0-9a-f]{64}$/);
    expect(two.secret).not.toBe(one.secret);
    // episode one's client, pointed at episode two's address (what a stale address amounts to)
    const misdirected = await rejection(new EnvClient(two.baseUrl, one.secret).request('POST', '/reset', { task_id: 'x', data: {}, seed: 1 }, 10_000));
    expect(misdirected).toBeInstanceOf(EnvCallError);
    expect(misdirected).toMatchObject({ kind: 'wrong_env' });
    // episode two's env did not act on it
    const own = new EnvClient(two.baseUrl, two.secret);
    expect((await own.request('GET', '/state', undefined, 10_000)).body).toMatchObject({ task_id: null, steps: 0 });
    // and each env answers its own episode
    expect((await new EnvClient(one.baseUrl, one.secret).request('POST', '/reset', { task_id: 'a', data: {}, seed: 1 }, 10_000)).status).toBe(200);
    expect((await own.request('POST', '/reset', { task_id: 'b', data: {}, seed: 2 }, 10_000)).status).toBe(200);
    await Promise.all([sandbox.teardown('ident-one'), sandbox.teardown('ident-two')]);
  });
});

describeDocker('a stale env address taken over by another server’s episode', () => {
  // two servers on the same subnet pool: the second one's first env gets the first one's address
  const pool = `10.250.${100 + Math.floor(Math.random() * 150)}.0/24`;
  let a: TestServer;
  let b: TestServer;
  beforeAll(async () => {
    // no network stock: the scenario needs B's first network on the subnet A's env had
    [a, b] = await Promise.all([
      startServer({ subnetPool: pool, toolTimeout: 20, networkStock: 0 }),
      startServer({ subnetPool: pool, toolTimeout: 20, networkStock: 0 }),
    ]);
  });
  afterAll(async () => {
    await Promise.all([a?.stop(), b?.stop()]);
    for (const s of [a, b]) if (s) expect(labelledResources(`${INSTANCE_LABEL}=${s.instance}`)).toEqual({ containers: [], networks: [] });
  });

  it("never scores an episode with another env's answers: it ends env_failed and the other env sees no call", async () => {
    const ca = await WsClient.open(a.url);
    const ra = await ca.reset({ task_id: 'fx-echo-0' });
    const envA = envOf(ra.data.observation.episode_id);
    // the env goes away behind the server's back
    docker(['rm', '-f', envA.container]);
    try {
      docker(['network', 'rm', envA.network]);
    } catch {
      // already removed by the server noticing the container's removal
    }
    await waitFor(() => labelledResources(`${EPISODE_LABEL}=${ra.data.observation.episode_id}`).networks.length === 0, 20_000, 'episode network gone');

    const cb = await WsClient.open(b.url);
    const rb = await cb.reset({ task_id: 'fx-echo-1' });
    const envB = envOf(rb.data.observation.episode_id);
    expect(envB.ip).toBe(envA.ip); // the situation of the defect: B's env holds A's old address

    const echo = await ca.call('echo', { text: 'who answers?' });
    expect(echo.data).toMatchObject({ done: true, reward: null });
    expect(echo.data.observation.end_reason).toBe('env_failed');
    expect(['env_crashed', 'env_unreachable']).toContain(echo.data.observation.failure.reason);
    const fin = await ca.call('finish_now', { score: 0.99 });
    expect(fin.data?.reward ?? null).not.toBe(0.99);
    expect(fin.data?.observation?.end_reason).not.toBe('finished');

    // B's env never saw A's calls, and B's episode plays on as its own
    expect(docker(['logs', envB.container])).not.toMatch(/POST \/tools\/call -> 200|POST \/finish/);
    const own = await cb.call('echo', { text: 'mine' });
    expect(own.data.observation.result.content[0].text).toBe('mine');
    const done = await cb.call('finish_now', { score: 0.5 });
    expect(done.data).toMatchObject({ done: true, reward: 0.5 });
    await Promise.all([ca.close(), cb.close()]);
  });
});
