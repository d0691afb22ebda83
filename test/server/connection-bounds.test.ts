/**
 * Connections are bounded, as an adversarial client and a careless user meet them, on
 * process-backed servers: every socket has a deadline (headers, whole request), open connections
 * are bounded (the oldest idle or half-sent one makes room), an unauthenticated body is not read,
 * the server closes with idle, half-sent and abandoned connections open, and two small things a
 * user hit.
 * /health is asked under each abuse: it answers, within a bound far above what it takes.
 */
import { connect, type Socket } from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import type { Sandbox } from '../../src/sandbox/sandbox.js';
import { processSuiteServer, startProcessServer } from '../support/process-server.js';
import { waitFor } from '../../scripts/lib/wait.js';
import { http } from '../routes/http.js';
import { WsClient } from '../../scripts/lib/ws-client.js';

const TOKEN = 'connection-bounds-token';

function portOf(url: string): number {
  return Number(new URL(url).port);
}

/** a raw TCP connection to the server, with a promise of its close */
function rawConnect(url: string): Promise<{ socket: Socket; closed: Promise<void>; received: () => string }> {
  return new Promise((resolve, reject) => {
    const socket = connect(portOf(url), '127.0.0.1');
    let data = '';
    socket.on('data', (d) => (data += d.toString()));
    socket.on('error', () => undefined);
    const closed = new Promise<void>((r) => socket.once('close', () => r()));
    socket.once('connect', () => resolve({ socket, closed, received: () => data }));
    socket.once('error', reject);
  });
}

/** resolves with true when `p` settles within `ms`, false when it does not */
function within(p: Promise<unknown>, ms: number): Promise<boolean> {
  return Promise.race([p.then(() => true), new Promise<boolean>((r) => setTimeout(() => r(false), ms).unref())]);
}

/** GET /health: its status and how long it took (logged, never asserted beyond a generous bound) */
async function health(url: string, under: string): Promise<number> {
  const t0 = performance.now();
  const res = await fetch(`${url}/health`, { signal: AbortSignal.timeout(10_000) });
  await res.text();
  const ms = performance.now() - t0;
  console.log(`/health under ${under}: ${res.status} in ${ms.toFixed(1)} ms`);
  return res.status;
}

/** a client that sends one header byte every `everyMs` and never finishes its request */
function slowLoris(socket: Socket, everyMs: number): () => void {
  const text = 'GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ' + 'a'.repeat(10_000);
  let i = 0;
  const t = setInterval(() => {
    if (socket.destroyed) return clearInterval(t);
    socket.write(text[i++ % text.length]!);
  }, everyMs);
  return () => clearInterval(t);
}

describe('every socket has a deadline', () => {
  const s = processSuiteServer({ headersTimeout: 1, requestTimeout: 2, maxConnections: 40, maxConcurrentEnvs: 1 });
  const stops: (() => void)[] = [];
  afterAll(() => stops.forEach((f) => f()));

  it('a connection that sends nothing, and one that sends a header byte every 200 ms, are closed; /health answers meanwhile', async () => {
    const silent = await rawConnect(s.url);
    const slow = await rawConnect(s.url);
    stops.push(slowLoris(slow.socket, 200));
    expect(await health(s.url, 'one silent and one slow-header connection')).toBe(200);
    // headersTimeout is 1 s: far past it, both are gone (they stayed open forever before)
    expect(await within(silent.closed, 20_000)).toBe(true);
    expect(await within(slow.closed, 20_000)).toBe(true);
    // both were closed by the headers deadline, counted from the connection (not Node's, from the first byte)
    expect(s.app.connections.stats().headers_timed_out).toBe(2);
  });

  it('a body sent slower than --request-timeout is cut; an answer that takes longer than it (a reset waiting for a slot) is not', async () => {
    const slowBody = await rawConnect(s.url);
    slowBody.socket.write('POST /episodes HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{');
    const drip = setInterval(() => !slowBody.socket.destroyed && slowBody.socket.write(' '), 200);
    stops.push(() => clearInterval(drip));
    expect(await health(s.url, 'a body dripping one byte every 200 ms')).toBe(200);
    expect(await within(slowBody.closed, 20_000)).toBe(true);
    clearInterval(drip);
    expect(slowBody.received()).toMatch(/^HTTP\/1\.1 408/);

    // the one slot is held; a second reset waits for it past --request-timeout (2 s) and gets it
    const first = await http(s.url, 'POST', '/episodes', { task_id: 'fx-echo-0' });
    expect(first.status).toBe(201);
    const second = http(s.url, 'POST', '/episodes', { task_id: 'fx-echo-1' });
    await waitFor(() => s.app.openenv.admission.waitingCount === 1, 10_000, 'the second reset waiting');
    // the answer is slow on purpose: the slot frees a second after the request timeout
    await new Promise((r) => setTimeout(r, 3000));
    expect((await http(s.url, 'DELETE', `/episodes/${first.body.episode_id}`)).status).toBe(204);
    const got = await second;
    expect(got.status).toBe(201);
    expect((await http(s.url, 'DELETE', `/episodes/${got.body.episode_id}`)).status).toBe(204);
  });

  it('a WebSocket session quiet for longer than both timeouts plays on', async () => {
    const c = await WsClient.open(s.url);
    expect((await c.reset({ task_id: 'fx-echo-0' })).type).toBe('observation');
    // quiet on purpose, past --headers-timeout (1 s) and --request-timeout (2 s)
    await new Promise((r) => setTimeout(r, 3000));
    expect((await c.call('echo', { text: 'still here' })).data.observation.result.data).toEqual({ text: 'still here' });
    await c.close();
    await waitFor(() => s.app.openenv.manager.list().length === 0, 20_000, 'the episode torn down');
  });
});

describe('at --max-connections', () => {
  // a headers timeout far longer than the test: only the bound can close a connection here (with
  // 1 s, a loop stalled past it on a loaded machine closed a socket before its client had seen it
  // connect, and the test got ECONNRESET)
  const s = processSuiteServer({ headersTimeout: 120, requestTimeout: 240, maxConnections: 40, maxConcurrentEnvs: 1 });

  it('past --max-connections slow clients make room (the oldest goes); /health answers; the open count stays at the bound', async () => {
    const max = s.app.connections.max;
    const clients = [];
    for (let i = 0; i < max * 3; i++) {
      const c = await rawConnect(s.url);
      // slower than the headers timeout lets through: every one of them would stay forever
      c.socket.write('GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n');
      clients.push(c);
    }
    // every connection past the bound made room for itself (the server may see the last one a moment after its client)
    await waitFor(() => s.app.connections.stats().evicted === max * 2, 10_000, `${max * 2} connections evicted`);
    expect(s.app.connections.open).toBe(max);
    expect(await health(s.url, `${max * 3} half-sent requests against a bound of ${max}`)).toBe(200);
    const oldest = clients.slice(0, max);
    for (const c of oldest) expect(await within(c.closed, 20_000)).toBe(true);
    for (const c of clients) c.socket.destroy();
  });
});

describe('an unauthenticated body is not read', () => {
  const s = processSuiteServer({ token: TOKEN });

  it('a 100 MB POST without a token gets its 401 and the connection closes long before the body is sent', async () => {
    const total = 100 * 1024 * 1024;
    const c = await rawConnect(s.url);
    c.socket.write(`POST /episodes HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${total}\r\n\r\n`);
    const chunk = Buffer.alloc(1024 * 1024, 0x20);
    let sent = 0;
    let closed = false;
    void c.closed.then(() => (closed = true));
    c.socket.write(chunk);
    sent += chunk.length;
    await waitFor(() => c.received().includes('\r\n\r\n') || closed, 10_000, 'an answer');
    expect(c.received()).toMatch(/^HTTP\/1\.1 401/);
    while (!closed && sent < total) {
      const ok = c.socket.write(chunk);
      sent += chunk.length;
      if (!ok) await within(new Promise((r) => c.socket.once('drain', r)), 2000);
    }
    // before: the server read (and threw away) all 100 MB on a connection it kept open
    expect(await within(c.closed, 10_000)).toBe(true);
    expect(sent).toBeLessThan(total);
    expect(await health(s.url, 'an unauthenticated 100 MB POST')).toBe(200);
  });
});

describe('the server closes with idle, half-sent and abandoned connections open', () => {
  it('app.close() resolves: an idle TCP connection, a half-sent request, an aborted /console/stream', async () => {
    const s = await startProcessServer({ token: TOKEN });
    const idle = await rawConnect(s.url);
    const half = await rawConnect(s.url);
    half.socket.write('GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n');
    const stream = await rawConnect(s.url);
    stream.socket.write(`GET /console/stream HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${TOKEN}\r\n\r\n`);
    await waitFor(() => stream.received().includes('200'), 10_000, 'the stream answered');
    // a reader that went away without closing (its process stopped reading)
    stream.socket.pause();
    expect(await within(s.stop(), 20_000)).toBe(true);
    // the client reads again: the server's close reaches it
    stream.socket.resume();
    for (const [name, c] of Object.entries({ idle, half, stream })) expect(await within(c.closed, 5000), name).toBe(true);
  });
});

describe('small things a user hit', () => {
  let gate!: () => void;
  const held = new Promise<void>((r) => (gate = r));
  // teardowns wait for the test: an ended episode stays in the manager meanwhile
  const s = processSuiteServer(
    {},
    {
      wrap: (sandbox) =>
        new Proxy(sandbox, {
          get(target, prop) {
            if (prop === 'teardown') return async (...args: Parameters<Sandbox['teardown']>) => (await held, target.teardown(...args));
            const v = Reflect.get(target, prop, target) as unknown;
            return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
          },
        }) as Sandbox,
    },
  );
  afterAll(() => gate());

  it('GET /episodes lists an ended episode (its env still being torn down) nowhere under active', async () => {
    const done = await http(s.url, 'POST', '/episodes', { task_id: 'fx-echo-0' });
    const live = await http(s.url, 'POST', '/episodes', { task_id: 'fx-echo-1' });
    const fin = await http(s.url, 'POST', `/episodes/${done.body.episode_id}/step`, { type: 'call_tool', tool_name: 'finish_now', arguments: { score: 1 } });
    expect(fin.body.done).toBe(true);
    expect(s.app.openenv.manager.get(done.body.episode_id)?.phase).toBe('done');
    const list = await http(s.url, 'GET', '/episodes');
    expect(list.body.active.map((e: { episode_id: string }) => e.episode_id)).toEqual([live.body.episode_id]);
    expect(list.body.active.every((e: { phase: string }) => e.phase !== 'done')).toBe(true);
    gate();
    await http(s.url, 'DELETE', `/episodes/${live.body.episode_id}`);
  });

  it('a body without content-type: application/json is told what to send', async () => {
    // curl -d sends a form type; a raw client may send none
    for (const type of ['application/x-www-form-urlencoded', null]) {
      const c = await rawConnect(s.url);
      const body = '{"task_id":"fx-echo-0"}';
      c.socket.write(
        `POST /episodes HTTP/1.1\r\nHost: 127.0.0.1\r\n${type ? `Content-Type: ${type}\r\n` : ''}Content-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`,
      );
      expect(await within(c.closed, 10_000)).toBe(true);
      const [head, text] = c.received().split('\r\n\r\n');
      expect(head).toMatch(/^HTTP\/1\.1 415/);
      const answer = JSON.parse(text!) as { error: string; message: string };
      expect(answer.error).toBe('invalid_request');
      expect(answer.message).toMatch(/content-type: application\/json/);
    }
  });
});
