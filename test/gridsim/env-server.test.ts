/**
 * The env server as the image runs it: `node bundles/gridsim-v1/envs/gridsim/app/server.mjs`
 * in a child process, driven over HTTP as the env contract (docs/bundle-format.md) says.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createHmac } from 'node:crypto';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createEnvServer } from '../../bundles/gridsim-v1/envs/gridsim/src/env-server.js';
import { situationText, parseTaskData, type TaskData } from '../../bundles/gridsim-v1/envs/gridsim/src/task.js';

const DIR = join(import.meta.dirname, '../../bundles/gridsim-v1');
const rows = readFileSync(join(DIR, 'tasks/wiring.jsonl'), 'utf8')
  .split('\n')
  .filter((l) => l !== '')
  .map((l) => JSON.parse(l) as { task_id: string; data: TaskData; meta: { wiring: string } });
const row = rows[0] as (typeof rows)[number];
const zeros = () => new Array<number>(24).fill(0);

let child: ChildProcess;
let base = '';
let logs = '';

beforeAll(async () => {
  child = spawn(process.execPath, [join(DIR, 'envs/gridsim/app/server.mjs')], {
    env: { PATH: process.env.PATH ?? '', PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'info' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  base = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`env did not start: ${logs}`)), 10_000);
    child.stdout?.on('data', (chunk: Buffer) => {
      logs += chunk.toString();
      const m = /"msg":"gridsim env listening".*"port":(\d+)/.exec(logs);
      if (m) {
        clearTimeout(timer);
        resolve(`http://127.0.0.1:${m[1]}`);
      }
    });
    child.stderr?.on('data', (chunk: Buffer) => (logs += chunk.toString()));
    child.on('exit', (code) => reject(new Error(`env exited with ${code}: ${logs}`)));
  });
});

afterAll(async () => {
  if (child.exitCode === null) {
    const exited = new Promise((r) => child.once('exit', r));
    child.kill('SIGTERM');
    await exited;
  }
});

async function http(method: string, path: string, body?: unknown): Promise<{ status: number; json: Record<string, unknown> }> {
  const res = await fetch(base + path, {
    method,
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
    body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
  });
  return { status: res.status, json: (await res.json()) as Record<string, unknown> };
}

interface Reply {
  result: Record<string, unknown>;
  text: string;
  is_error: boolean;
  done: boolean;
  scores?: Record<string, number>;
}

async function call(name: string, args?: unknown): Promise<Reply> {
  const r = await http('POST', '/tools/call', { name, arguments: args });
  expect(r.status).toBe(200);
  return r.json as unknown as Reply;
}

const reset = (r = row) => http('POST', '/reset', { task_id: r.task_id, data: r.data, seed: 7 });

describe('GridSim env server (child process)', () => {
  it('answers /health with 200', async () => {
    const r = await http('GET', '/health');
    expect(r.status).toBe(200);
  });

  it('refuses tools before a reset, and bad requests with 4xx', async () => {
    expect((await http('POST', '/tools/call', { name: 'get_situation' })).status).toBe(409);
    expect((await http('POST', '/reset', '{not json')).status).toBe(400);
    expect((await http('GET', '/nowhere')).status).toBe(404);
    const bad = await http('POST', '/reset', { task_id: 'x', data: { ...row.data, optimum_profit: row.data.optimum_profit + 1 } });
    expect(bad.status).toBe(400);
    expect(bad.json).toMatchObject({ error: 'invalid_data' });
    expect(String(bad.json.message)).toMatch(/optimum_profit/);
  });

  describe('an episode', () => {
    beforeEach(async () => {
      const r = await reset();
      expect(r.status).toBe(200);
      expect(r.json).toEqual({});
    });

    it("refuses arguments its schema does not declare, as the model's error", async () => {
      const extra = await call('get_situation', { verbose: true });
      expect(extra).toMatchObject({ is_error: true, done: false });
      expect(extra.text).toBe('unknown argument(s) "verbose": get_situation takes no arguments');
      const typo = await call('check_schedule', { schedule: new Array(24).fill(0), hours: 24 });
      expect(typo.text).toBe('unknown argument(s) "hours": check_schedule takes only "schedule"');
    });

    it('get_situation returns the situation of the first prompt', async () => {
      const r = await call('get_situation', {});
      expect(r.is_error).toBe(false);
      expect(r.done).toBe(false);
      expect(r.text).toBe(situationText(parseTaskData(row.data)));
      expect(r.text).toContain('HE24:');
    });

    it('check_schedule: trace, cash flow, profit, first violation; never the optimum or a score', async () => {
      const r = await call('check_schedule', { schedule: row.data.optimal_schedule });
      expect(r.is_error).toBe(false);
      expect(r.done).toBe(false);
      expect(r.result.feasible).toBe(true);
      expect(r.result.violation).toBeNull();
      expect(r.result.total_profit).toBe(row.data.optimum_profit);
      expect(r.result.hours).toHaveLength(24);
      expect(r.result.checks_left).toBe(2);
      expect(r.text).toMatch(/Check 1 of 3 \(2 left\)/);
      expect(r.text).toMatch(/Total profit: \$/);
      expect(JSON.stringify(r.result)).not.toMatch(/score|optim/i);
      expect(r.text).not.toMatch(/score \d|optim/i);

      const bad = await call('check_schedule', { schedule: new Array<number>(24).fill(-1) });
      expect(bad.is_error).toBe(false);
      expect(bad.result.feasible).toBe(false);
      expect(bad.result.violation).toMatchObject({ kind: 'soc_below_zero' });
      expect(bad.text).toMatch(/First rule broken: hour \d+/);
    });

    it('refuses the 4th check_schedule; malformed schedules do not use one up', async () => {
      const malformed = await call('check_schedule', { schedule: [1, 2, 3] });
      expect(malformed.is_error).toBe(true);
      expect(malformed.text).toMatch(/exactly 24 entries.*got 3/);
      for (let i = 1; i <= 3; i++) {
        const r = await call('check_schedule', { schedule: zeros() });
        expect(r.is_error).toBe(false);
        expect(r.result.check).toBe(i);
      }
      const fourth = await call('check_schedule', { schedule: zeros() });
      expect(fourth.is_error).toBe(true);
      expect(fourth.done).toBe(false);
      expect(fourth.text).toMatch(/at most 3 times/);
      // the episode goes on: a submit still grades
      const s = await call('submit_schedule', { schedule: zeros() });
      expect(s).toMatchObject({ is_error: false, done: true, scores: { schedule: 0.2 } });
    });

    it("a malformed submit is the model's error and the episode goes on; a JSON string is accepted", async () => {
      const outOfBounds = zeros();
      outOfBounds[5] = 9;
      const bad = await call('submit_schedule', { schedule: outOfBounds });
      expect(bad).toMatchObject({ is_error: true, done: false });
      expect(bad.scores).toBeUndefined();
      expect(bad.text).toMatch(/hour 6: 9 is out of bounds/);
      expect((await call('submit_schedule', { schedule: 'nope' })).is_error).toBe(true);
      expect((await call('submit_schedule', {})).text).toMatch(/missing argument "schedule"/);
      expect((await call('submit_schedule', [1, 2])).text).toMatch(/arguments must be a JSON object/);
      const ok = await call('submit_schedule', { schedule: JSON.stringify(row.data.optimal_schedule) });
      expect(ok).toMatchObject({ is_error: false, done: true, scores: { schedule: 1 } });
    });

    it('submit grades once and ends the episode; a second submit is refused; /finish keeps the score', async () => {
      const first = await call('submit_schedule', { schedule: row.data.optimal_schedule });
      expect(first).toMatchObject({ is_error: false, done: true, scores: { schedule: 1 } });
      const second = await call('submit_schedule', { schedule: zeros() });
      // refused: an error, the episode stays done, and the score that stands is not changed
      expect(second).toMatchObject({ is_error: true, done: true, scores: { schedule: 1 } });
      expect(second.text).toMatch(/already submitted/);
      expect((await call('check_schedule', { schedule: zeros() })).is_error).toBe(true);
      expect((await http('POST', '/finish')).json).toEqual({ scores: { schedule: 1 } });
      expect((await http('GET', '/state')).json).toMatchObject({ task_id: row.task_id, submitted: true, score: 1, done: true, seed: 7 });
    });

    it('an infeasible submission scores 0 and ends the episode', async () => {
      const r = await call('submit_schedule', { schedule: new Array<number>(24).fill(-1) });
      expect(r).toMatchObject({ is_error: false, done: true, scores: { schedule: 0 } });
      expect(r.result.violation).toMatchObject({ kind: 'soc_below_zero' });
    });

    it('/finish without a submission scores 0, and no tool works after it', async () => {
      await call('check_schedule', { schedule: zeros() });
      expect((await http('POST', '/finish', {})).json).toEqual({ scores: { schedule: 0 } });
      const after = await call('submit_schedule', { schedule: row.data.optimal_schedule });
      expect(after).toMatchObject({ is_error: true, done: true, scores: { schedule: 0 } });
      expect((await http('POST', '/finish', {})).json).toEqual({ scores: { schedule: 0 } });
    });

    it('an unknown tool is an error and the episode goes on', async () => {
      const r = await call('buy_everything', {});
      expect(r).toMatchObject({ is_error: true, done: false });
      expect(r.text).toMatch(/unknown tool/);
      expect((await call('get_situation')).is_error).toBe(false);
    });

    it('a new /reset starts a fresh episode, whatever the server played before (bundle.json says clean_reset)', async () => {
      await reset(rows[1]);
      const clean = (await http('GET', '/state')).json;
      const situation = (await call('get_situation')).text;
      // another task played to its end on the same server: every check used, a submission
      await reset(row);
      for (let i = 0; i < 3; i++) await call('check_schedule', { schedule: zeros() });
      await call('submit_schedule', { schedule: zeros() });
      await reset(rows[1]);
      expect((await http('GET', '/state')).json).toEqual(clean);
      expect(clean).toMatchObject({ task_id: rows[1]?.task_id, submitted: false, checks_left: 3 });
      expect((await call('get_situation')).text).toBe(situation);
      expect((await http('POST', '/finish')).json).toEqual({ scores: { schedule: 0 } });
    });
  });

  it('stops on SIGTERM', async () => {
    const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
    child.kill('SIGTERM');
    expect(await exited).toBe(0);
  });
});

describe('GridSim env server: the identity proof (docs/bundle-format.md)', () => {
  const secret = 'a'.repeat(64);
  let server: Server;
  let base = '';
  const mac = (key: string, direction: string, nonce: string) => createHmac('sha256', key).update(`${direction}:${nonce}`).digest('hex');
  beforeAll(async () => {
    server = createEnvServer({ logLevel: 'silent', secret });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise<void>((r) => server.close(() => r())));

  it("proves itself to its own episode, refuses another's with 421, serves a request that asks nothing", async () => {
    const nonce = 'b'.repeat(32);
    const ours = await fetch(`${base}/health`, { headers: { 'x-openenv-nonce': nonce, 'x-openenv-auth': mac(secret, 'request', nonce) } });
    expect(ours.status).toBe(200);
    expect(ours.headers.get('x-openenv-proof')).toBe(mac(secret, 'response', nonce));
    const theirs = await fetch(`${base}/health`, { headers: { 'x-openenv-nonce': nonce, 'x-openenv-auth': mac('c'.repeat(64), 'request', nonce) } });
    expect(theirs.status).toBe(421);
    expect(theirs.headers.get('x-openenv-proof')).toBeNull();
    const plain = await fetch(`${base}/health`);
    expect(plain.status).toBe(200);
    expect(plain.headers.get('x-openenv-proof')).toBeNull();
  });
});
