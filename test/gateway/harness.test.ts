/**
 * The shipped harness (harness/openenv_harness.py) as an env runs it: python3 as a child process,
 * given only the variables the gateway issued, talking to the real gateway on a loopback door in
 * front of a scripted model. It runs the model's bash calls, hands their output back, and stops
 * when the model stops; streamed and not; and it ends with its documented status when the
 * gateway refuses it or the turns run out.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ModelGateway, type BudgetsInput, type Issued } from '../../src/gateway/index.js';
import { chatChunks, chatCompletion, startFakeUpstream, type Received, type Reply } from './support/fake-upstream.js';
import { LOOPBACK_DOOR, Observed } from './support/harness-client.js';

const HARNESS = join(import.meta.dirname, '../../harness/openenv_harness.py');

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
  events: any[];
}

function runHarness(issued: Issued, args: string[], workdir: string, extraEnv: Record<string, string> = {}): Promise<Run> {
  return new Promise((resolve, reject) => {
    // only what an env would have: its PATH and the gateway's variables
    const child = spawn('python3', [HARNESS, '--workdir', workdir, ...args], {
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', ...issued.env, ...extraEnv },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      const events = stderr
        .split('\n')
        .filter((l) => l.startsWith('{'))
        .map((l) => JSON.parse(l) as unknown);
      resolve({ code, stdout, stderr, events });
    });
  });
}

/** the model's messages as the upstream got them */
const lastTool = (r: Received): string | undefined => [...r.body.messages].reverse().find((m: any) => m.role === 'tool')?.content;

const toolCall = (command: unknown, id = 'call_1') => ({ id, name: 'bash', arguments: typeof command === 'string' ? command : JSON.stringify(command) });

async function setup(policy: (r: Received, n: number) => Reply, budgets: BudgetsInput = {}) {
  let n = 0;
  const up = await startFakeUpstream((r) => policy(r, n++));
  const seen = new Observed();
  const gw = new ModelGateway({ observer: seen.observer, defaultUpstream: { base_url: up.baseUrl, model: 'policy' }, limits: { port: 0 } });
  const issued = await gw.issue('ep', { door: LOOPBACK_DOOR, budgets });
  const workdir = mkdtempSync(join(tmpdir(), 'harness-'));
  cleanups.push(async () => {
    await gw.close();
    await up.close();
    rmSync(workdir, { recursive: true, force: true });
  });
  return { up, gw, seen, issued, workdir };
}

describe('the shipped harness', () => {
  for (const stream of [false, true]) {
    it(`${stream ? 'streamed' : 'whole'} replies: runs the bash calls in its workdir, gives their output back, stops when the model stops`, async () => {
      const { up, seen, issued, workdir } = await setup((r, n) => {
        const reply = (content: string | null, calls?: ReturnType<typeof toolCall>[]): Reply =>
          stream
            ? { kind: 'sse', events: chatChunks(content ? [content] : [], { toolCalls: calls }) }
            : { kind: 'json', body: chatCompletion(content, { toolCalls: calls }) };
        if (n === 0) return reply(null, [toolCall({ command: 'echo hello > out.txt && cat out.txt' })]);
        if (n === 1) return reply('checking', [toolCall({ command: 'ls; exit 3' }, 'call_2')]);
        return reply(`done: ${lastTool(r)!.split('\n')[0]}`);
      });
      const run = await runHarness(issued, [...(stream ? ['--stream'] : []), '--instruction', 'write hello into out.txt'], workdir);
      expect(run.code, run.stderr).toBe(0);
      expect(readFileSync(join(workdir, 'out.txt'), 'utf8')).toBe('hello\n');
      expect(run.stdout.trim()).toBe('done: exit code: 3');
      expect(up.received).toHaveLength(3);
      const first = up.received[0]!.body;
      expect(first.model).toBe('policy');
      expect(first.messages.map((m: any) => m.role)).toEqual(['system', 'user']);
      expect(first.messages[1].content).toBe('write hello into out.txt');
      expect(first.tools[0].function.name).toBe('bash');
      expect(!!first.stream).toBe(stream);
      const second = up.received[1]!.body.messages;
      expect(second.map((m: any) => m.role)).toEqual(['system', 'user', 'assistant', 'tool']);
      expect(second[2].tool_calls[0].id).toBe('call_1');
      expect(second[3]).toEqual({ role: 'tool', tool_call_id: 'call_1', content: 'exit code: 0\nhello\n' });
      expect(lastTool(up.received[2]!)).toBe('exit code: 3\nout.txt\n');
      // its model's name first (GET /models: the server named one), then the three turns
      expect(seen.of('ep').map((c) => `${c.api} ${c.outcome}`)).toEqual(['openai.models ok', ...Array(3).fill('openai.chat ok')]);
      expect(run.events.map((e) => e.event)).toEqual(['model', 'tool', 'model', 'tool', 'model', 'stopped']);
    });
  }

  it('arguments that are not JSON, an unknown tool, and a command past --tool-timeout are answered to the model, and the loop goes on', async () => {
    const { up, issued, workdir } = await setup((_r, n) => {
      const calls = [[toolCall('{"command": "ec')], [{ id: 'c2', name: 'python', arguments: '{}' }], [toolCall({ command: 'sleep 30; echo never' }, 'c3')]][n];
      return { kind: 'json', body: chatCompletion(calls ? null : 'giving up', { toolCalls: calls }) };
    });
    const t0 = Date.now();
    const run = await runHarness(issued, ['--instruction', 'x', '--tool-timeout', '0.5'], workdir);
    expect(run.code, run.stderr).toBe(0);
    expect(Date.now() - t0).toBeLessThan(20_000);
    expect(lastTool(up.received[1]!)).toMatch(/^the arguments are not JSON/);
    expect(lastTool(up.received[2]!)).toMatch(/^unknown tool 'python'/);
    expect(lastTool(up.received[3]!)).toMatch(/^timed out after 0.5 s/);
    expect(lastTool(up.received[3]!)).not.toContain('never');
  });

  it("a long output is cut to --output-limit, head and tail kept; the model's name comes from GET /models when none is given", async () => {
    const { up, issued, workdir } = await setup((_r, n) =>
      n === 0
        ? { kind: 'json', body: chatCompletion(null, { toolCalls: [toolCall({ command: 'seq 1 20000' })] }) }
        : { kind: 'json', body: chatCompletion('ok') },
    );
    const run = await runHarness(issued, ['--instruction', 'x', '--output-limit', '200'], workdir);
    expect(run.code, run.stderr).toBe(0);
    const out = lastTool(up.received[1]!)!;
    expect(out.length).toBeLessThan(300);
    expect(out).toMatch(/^exit code: 0\n1\n2\n/);
    expect(out).toMatch(/characters left out/);
    expect(out.trimEnd().endsWith('20000')).toBe(true);
    expect(up.received[0]!.body.model).toBe('policy');
  });

  it('a gateway that refuses (the call budget spent) ends the harness with status 3 and the reason; --max-turns ends it with 2', async () => {
    const always = (): Reply => ({ kind: 'json', body: chatCompletion(null, { toolCalls: [toolCall({ command: 'true' })] }) });
    const a = await setup(always, { calls: 2 });
    const refused = await runHarness(a.issued, ['--instruction', 'x'], a.workdir);
    expect(refused.code).toBe(3);
    expect(refused.events.at(-1)).toMatchObject({ event: 'model_failed', message: expect.stringContaining('429') });
    expect(refused.events.at(-1).message).toContain('budget of 2');
    expect(a.seen.endsOf('ep').map((e) => e.reason)).toEqual(['model_calls_exhausted']);
    const b = await setup(always);
    const capped = await runHarness(b.issued, ['--instruction', 'x', '--max-turns', '3'], b.workdir);
    expect(capped.code).toBe(2);
    expect(b.up.received).toHaveLength(3);
  });

  it('without OPENAI_BASE_URL or an instruction: status 4, saying which', async () => {
    const { issued, workdir } = await setup(() => ({ kind: 'json', body: chatCompletion('x') }));
    const noUrl = await runHarness(issued, ['--instruction', 'x'], workdir, { OPENAI_BASE_URL: '' });
    expect(noUrl.code).toBe(4);
    expect(noUrl.stderr).toContain('OPENAI_BASE_URL');
    const noTask = await runHarness(issued, [], workdir);
    expect(noTask.code).toBe(4);
    expect(noTask.stderr).toContain('no instruction');
    expect(existsSync(join(workdir, 'out.txt'))).toBe(false);
  });
});
