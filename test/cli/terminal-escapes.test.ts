/**
 * What `openenv-bundle play` prints of an env, a task's text and the server never drives the
 * terminal: the built binary, a child process, plays a task whose prompt carries escapes against
 * a hostile env (test/security/hostile-env.mjs, HOSTILE_ESCAPES) whose tool results carry an OSC
 * retitle, a clear, a cursor move, a carriage return hiding text and an 8-bit CSI; every one is
 * printed as `\xNN`, and nothing of stdout or stderr is a control but newline.
 * The same function (src/cli/terminal-text.ts) is checked on its own, --json's too.
 */
import { spawn } from 'node:child_process';
import { copyFileSync, cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { jsonLine, visible } from '../../src/cli/terminal-text.js';
import { FIXTURE_BUNDLE, startProcessServer, type ProcessServer } from '../support/process-server.js';

const CLI = fileURLToPath(new URL('../../dist/cli/openenv-bundle.js', import.meta.url));
/** what hostile-env.mjs says under HOSTILE_ESCAPES */
const ESCAPE_TEXT = '\u001b]0;pwned\u0007\u001b[2J\u001b[Hclean\rhidden\u009b31mred\u007f';
const SHOWN = '\\x1b]0;pwned\\x07\\x1b[2J\\x1b[Hclean\\x0dhidden\\x9b31mred\\x7f';
/** whether `s` holds a control a terminal acts on: C0 but newline and tab, DEL, C1 */
const rawControl = (s: string) =>
  [...s].some((ch) => {
    const c = ch.codePointAt(0)!;
    return (c < 0x20 && c !== 0x0a && c !== 0x09) || (c >= 0x7f && c <= 0x9f);
  });

function play(url: string, input: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLI, 'play', url, '--task', 'fx-echo-0'], { env: { PATH: process.env.PATH }, stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
    child.on('error', reject);
    child.on('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
    child.stdin.end(input);
  });
}

describe('play against an env that answers with terminal escapes', () => {
  let dir: string;
  let s: ProcessServer;
  beforeAll(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'openenv-escapes-'));
    cpSync(FIXTURE_BUNDLE, dir, { recursive: true });
    copyFileSync(fileURLToPath(new URL('../security/hostile-env.mjs', import.meta.url)), path.join(dir, 'envs/echo/hostile.mjs'));
    // the task's own text carries escapes too
    const train = path.join(dir, 'tasks/train.jsonl');
    const rows = readFileSync(train, 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { turns: string[] });
    rows[0]!.turns[0] = `Echo the word hello.${ESCAPE_TEXT}`;
    writeFileSync(train, `${rows.map((r) => JSON.stringify(r)).join('\n')}\n`);
    s = await startProcessServer({ maxConcurrentEnvs: 2 }, { bundle: dir, sandbox: { entry: 'hostile.mjs' } });
  });
  afterAll(async () => {
    await s?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it("prints the task's prompt and the tool's result with every control made visible", async () => {
    s.sandbox.overrideNextDeploy({ HOSTILE_ESCAPES: '1' });
    const r = await play(s.url, 'echo {"text": "hi"}\nend\n');
    expect(r.stdout).toContain(`user:\n  Echo the word hello.${SHOWN}\n`);
    // the tool's result, on a line of its own
    expect(r.stdout.split('\n')).toContain(SHOWN);
    expect(r.stdout).toMatch(/episode over \(turns_ended\): reward 1/);
    expect(r.code).toBe(0);
    expect(rawControl(r.stdout)).toBe(false);
    expect(rawControl(r.stderr)).toBe(false);
  }, 60_000);
});

describe('the one function every printer uses', () => {
  it('shows C0 (but newline and tab), DEL and C1 as \\xNN, keeps a CRLF line end a line end, and leaves other text as it is', () => {
    expect(visible(ESCAPE_TEXT)).toBe(SHOWN);
    expect(visible('a\tb\nc\r\nd\u0000é→ 日本')).toBe('a\tb\nc\nd\\x00é→ 日本');
  });

  it("--json's printer: JSON that parses to the same text, with no raw control in it (JSON.stringify leaves DEL and C1 raw)", () => {
    const value = { message: ESCAPE_TEXT, nested: [{ tail: 'x\u009by' }] };
    expect(rawControl(JSON.stringify(value))).toBe(true);
    const line = jsonLine(value);
    expect(rawControl(line)).toBe(false);
    expect(JSON.parse(line)).toEqual(value);
  });
});
