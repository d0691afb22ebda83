/**
 * Property-based fuzzing (fast-check) of what clients send: /ws frames, reset data, /episodes and
 * /mcp bodies. Whatever arrives, no exception escapes the parsers but BadInputError, no answer is
 * a 5xx, the server keeps serving, and nothing is logged at error.
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BadInputError } from '../../src/errors.js';
import { parseClientFrame, parseResetData } from '../../src/sessions/client-input.js';
import { McpService } from '../../src/sessions/mcp-service.js';
import { startProcessServer, type ProcessServer } from '../support/process-server.js';
import { WsClient } from '../../scripts/lib/ws-client.js';
import { http } from '../routes/http.js';

const KEYS = [
  'type',
  'data',
  'task_id',
  'split',
  'index',
  'seed',
  'episode_id',
  'reset_timeout_s',
  'tool_name',
  'arguments',
  'jsonrpc',
  'id',
  'method',
  'params',
  'name',
  'session_id',
  'toolset',
  '__proto__',
  'constructor',
  'toString',
];
const TYPES = ['reset', 'step', 'state', 'close', 'mcp', 'list_tools', 'call_tool', 'constructor', '__proto__', 'toString', ''];
const METHODS = ['tools/list', 'tools/call', 'openenv/session/create', 'openenv/session/close', 'initialize', 'constructor', '__proto__'];

/** JSON values biased toward the shapes the parsers look at */
const { value: jsonish } = fc.letrec((tie) => ({
  value: fc.oneof(
    { depthSize: 'small' },
    fc.constantFrom(...TYPES, ...METHODS),
    fc.integer({ min: -3, max: 1e6 }),
    fc.double(),
    fc.boolean(),
    fc.constant(null),
    fc.string(),
    fc.array(tie('value'), { maxLength: 4 }),
    fc.dictionary(fc.constantFrom(...KEYS), tie('value'), { maxKeys: 6 }),
  ),
}));
const frameLike = fc.dictionary(fc.constantFrom(...KEYS), jsonish, { maxKeys: 5 });
/** text: JSON of the above, arbitrary text, or JSON cut short */
const text = fc.oneof(
  frameLike.map((v) => JSON.stringify(v)),
  jsonish.map((v) => JSON.stringify(v) ?? 'null'),
  fc.string({ maxLength: 200 }),
  frameLike.map((v) => JSON.stringify(v)).chain((s) => fc.nat({ max: s.length }).map((n) => s.slice(0, n))),
);

function onlyBadInput(fn: () => unknown): void {
  try {
    fn();
  } catch (e) {
    if (!(e instanceof BadInputError)) throw e;
  }
}

describe('fuzz: the parsers', () => {
  it('parseClientFrame throws nothing but BadInputError', () => {
    fc.assert(
      fc.property(text, (t) => onlyBadInput(() => parseClientFrame(t))),
      { numRuns: 3000 },
    );
  });
  it('parseResetData throws nothing but BadInputError', () => {
    fc.assert(
      fc.property(jsonish, (v) => {
        onlyBadInput(() => parseResetData(v));
      }),
      { numRuns: 3000 },
    );
  });
});

describe('fuzz: a running server', () => {
  let s: ProcessServer;
  let ws: WsClient;
  beforeAll(async () => {
    s = await startProcessServer({ maxConcurrentEnvs: 2, maxWaiting: 0, resetTimeout: 5 });
    ws = await WsClient.open(s.url);
  });
  afterAll(async () => {
    await ws?.close();
    await s?.stop();
  });

  it('/ws frames: exactly one reply each, never a crash, never an internal error', async () => {
    await fc.assert(
      fc.asyncProperty(text, async (t) => {
        // a well-formed close frame is answered by closing, not by a frame
        let isClose = false;
        onlyBadInput(() => (isClose = parseClientFrame(t).type === 'close'));
        fc.pre(!isClose);
        const reply = ws.next(20_000);
        ws.sendRaw(t);
        const r = await reply;
        expect(['observation', 'state', 'error', 'mcp']).toContain(r.type);
        if (r.type === 'error') expect(r.data.message).not.toMatch(/internal error/);
        if (r.type === 'mcp') expect(r.data.error?.code).not.toBe(-32603);
      }),
      { numRuns: 300 },
    );
    expect(ws.closeInfo).toBeNull();
  });

  it('/episodes and /mcp bodies: never a 5xx but the documented 502/503 refusals, never an internal error', async () => {
    const epId = (await http(s.url, 'POST', '/episodes', { task_id: 'fx-echo-0' })).body.episode_id as string;
    await fc.assert(
      fc.asyncProperty(text, fc.constantFrom('/episodes', `/episodes/${epId}/step`, '/mcp'), async (body, path) => {
        const r = await http(s.url, 'POST', path, body);
        if (path === '/mcp') {
          expect([200, 202]).toContain(r.status);
          if (r.status === 200) expect(r.body?.error?.code).not.toBe(-32603);
        } else {
          // capacity (503) and a deploy refused (502) are answers, not faults
          expect(r.status === 500 || r.status > 503, `${r.status} ${JSON.stringify(r.body)}`).toBe(false);
          if (r.status >= 400) expect(Object.keys(r.body)).toEqual(expect.arrayContaining(['error', 'message']));
        }
      }),
      { numRuns: 300 },
    );
    // the server still serves
    expect((await http(s.url, 'GET', '/health')).status).toBe(200);
    await http(s.url, 'DELETE', `/episodes/${epId}`);
    // nothing a client sent was logged as the server's fault
    expect(s.logs()).not.toMatch(/"level":(50|60)/);
  });

  it('McpService.handle on arbitrary values answers JSON-RPC, never -32603', async () => {
    const mcp: McpService = s.app.openenv.sessions.mcp;
    await fc.assert(
      fc.asyncProperty(fc.oneof(jsonish, frameLike), async (v) => {
        const r = await mcp.handle(v);
        expect(r.jsonrpc).toBe('2.0');
        if ('error' in r) expect(r.error.code).not.toBe(-32603);
      }),
      { numRuns: 500 },
    );
  });
});
