/**
 * An env's kept connection (src/util/http-request.ts keptConnection): the warm pool's hand-out check and
 * the episode's client speak to a pooled env over one TCP connection, so a warm reset opens one
 * connection, not two; another env (another handle) never gets it. Against a real HTTP server on
 * 127.0.0.1 that counts the connections it accepts.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { deadline, keptConnection, statusOf } from '../src/util/http-request.js';
import { EnvClient } from '../src/episodes/env-client.js';

let server: Server;
let base: string;
let accepted = 0;
let open = 0;

beforeAll(async () => {
  server = createServer((req, res) => {
    if (req.url === '/healthz') res.writeHead(200).end('ok');
    else res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ path: req.url }));
  });
  server.on('connection', (socket) => {
    accepted++;
    open++;
    socket.on('close', () => open--);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(() => new Promise((r) => server.close(r)));

async function until(cond: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 200 && !cond(); i++) await new Promise((r) => setTimeout(r, 10));
  expect(cond(), what).toBe(true);
}

describe("an env's kept connection", () => {
  it('is one per owner: the same handle gets the same agent, another handle its own', () => {
    const a = {};
    const b = {};
    expect(keptConnection(a)).toBe(keptConnection(a));
    expect(keptConnection(a)).not.toBe(keptConnection(b));
  });

  it("carries the hand-out check and then the episode's calls over one TCP connection", async () => {
    const handle = { baseUrl: base };
    const before = accepted;
    expect(await statusOf(`${base}/healthz`, 1000, keptConnection(handle))).toBe(200);
    const client = new EnvClient(base, undefined, keptConnection(handle));
    expect((await client.request('POST', '/reset', {}, 1000)).body).toEqual({ path: '/reset' });
    expect((await client.request('POST', '/tools/call', { name: 'x' }, 1000)).body).toEqual({ path: '/tools/call' });
    expect(accepted - before, 'connections accepted for one env').toBe(1);
    // another env at the same address (a recycled network) never rides on it
    const otherHandle = { baseUrl: base };
    const other = new EnvClient(base, undefined, keptConnection(otherHandle));
    await other.request('POST', '/reset', {}, 1000);
    expect(accepted - before).toBe(2);
    keptConnection(handle).destroy();
    keptConnection(otherHandle).destroy();
  });

  it('a check without one opens its own connection and closes it after', async () => {
    await until(() => open === 0, 'no connection left open by the test before');
    const before = accepted;
    expect(await statusOf(`${base}/healthz`, 1000)).toBe(200);
    expect(accepted - before).toBe(1);
    await until(() => open === 0, 'the check closed its own connection');
  });
});

describe("a call's deadline", () => {
  it('aborts its signal when the time passes, saying so', async () => {
    const d = deadline(20);
    await new Promise((r) => setTimeout(r, 60));
    expect(d.signal.aborted).toBe(true);
    expect(d.timedOut()).toBe(true);
    expect((d.signal.reason as Error).name).toBe('TimeoutError');
    d.done();
  });

  it("aborts with the caller's reason when the caller's signal aborts first (then it is no timeout), or had aborted already", () => {
    const caller = new AbortController();
    const d = deadline(10_000, caller.signal);
    expect(d.signal.aborted).toBe(false);
    caller.abort(new Error('the episode ended'));
    expect(d.signal.aborted).toBe(true);
    expect(d.timedOut()).toBe(false);
    expect((d.signal.reason as Error).message).toBe('the episode ended');
    d.done();
    const early = deadline(10_000, AbortSignal.abort(new Error('gone')));
    expect(early.signal.aborted).toBe(true);
    early.done();
  });

  it('once done, neither the time nor the caller aborts it, and the caller keeps no listener', async () => {
    const caller = new AbortController();
    let listeners = 0;
    const add = caller.signal.addEventListener.bind(caller.signal);
    const remove = caller.signal.removeEventListener.bind(caller.signal);
    caller.signal.addEventListener = ((...a: Parameters<typeof add>) => (listeners++, add(...a))) as typeof add;
    caller.signal.removeEventListener = ((...a: Parameters<typeof remove>) => (listeners--, remove(...a))) as typeof remove;
    const d = deadline(20, caller.signal);
    expect(listeners).toBe(1);
    d.done();
    expect(listeners).toBe(0);
    caller.abort();
    await new Promise((r) => setTimeout(r, 60));
    expect(d.signal.aborted).toBe(false);
    expect(d.timedOut()).toBe(false);
  });

  it('an env that does not answer in time is a timeout, not unreachable', async () => {
    const silent = createServer(() => {});
    await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
    try {
      const url = `http://127.0.0.1:${(silent.address() as AddressInfo).port}`;
      const err = await new EnvClient(url).request('POST', '/reset', {}, 100).catch((e: Error) => e);
      expect(err).toMatchObject({ kind: 'timeout' });
      const stop = new AbortController();
      setTimeout(() => stop.abort(new Error('closed by the client')), 50);
      const aborted = await new EnvClient(url).request('POST', '/reset', {}, 10_000, stop.signal).catch((e: Error) => e);
      expect(aborted).toMatchObject({ kind: 'aborted' });
      expect((aborted as Error).message).toMatch(/closed by the client/);
      expect(await statusOf(`${url}/healthz`, 100)).toBeNull();
    } finally {
      silent.closeAllConnections();
      await new Promise((r) => silent.close(r));
    }
  });
});
