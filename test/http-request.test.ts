/**
 * An env's kept connection (src/http-request.ts keptConnection): the warm pool's hand-out check and
 * the episode's client speak to a pooled env over one TCP connection, so a warm reset opens one
 * connection, not two; another env (another handle) never gets it. Against a real HTTP server on
 * 127.0.0.1 that counts the connections it accepts.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { keptConnection, statusOf } from '../src/http-request.js';
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
    const other = new EnvClient(base, undefined, keptConnection({ baseUrl: base }));
    await other.request('POST', '/reset', {}, 1000);
    expect(accepted - before).toBe(2);
    keptConnection(handle).destroy();
  });

  it('a check without one opens its own connection and closes it after', async () => {
    await until(() => open === 1, 'only the other env connection of the test before is open');
    const before = accepted;
    expect(await statusOf(`${base}/healthz`, 1000)).toBe(200);
    expect(accepted - before).toBe(1);
    await until(() => open === 1, 'the check closed its own connection');
  });
});
