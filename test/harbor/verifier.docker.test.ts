/**
 * Task verifiers on real containers: the tests reach /tests only when the verifier runs (and what
 * the agent left there, or in /logs/verifier, counts for nothing), reward.txt and reward.json
 * become scores, a verifier that writes no reward or a malformed one is said so with its output,
 * one that hangs is killed at its timeout with what it started, and a turn's upload, setup.sh and
 * ready check run before it.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { runToEnd } from '../../src/container/index.js';
import { clearVerifierFiles, outputTail, prepareTurn, prepareVerifierDirs, runVerifier } from '../../src/verifier/index.js';
import { describeDocker } from '../support/docker.js';
import { shellBox } from './helpers.js';

const dirs: string[] = [];
/** a tests folder holding test.sh (and more files) */
function tests(script: string, files: Record<string, string> = {}): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'verifier-test-'));
  dirs.push(dir);
  for (const [rel, content] of Object.entries({ 'test.sh': script, ...files })) {
    mkdirSync(path.dirname(path.join(dir, rel)), { recursive: true });
    writeFileSync(path.join(dir, rel), content);
  }
  return dir;
}

describeDocker('a task verifier in the env container', () => {
  const held = shellBox();
  const sh = async (command: string) => {
    const o = await held.shell.call('bash', { command });
    if (o.kind !== 'reply') throw new Error(o.message);
    return o.reply.text;
  };

  afterAll(() => {
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  it('copies the tests to /tests only when it runs: absent during the episode, stale files and planted rewards removed', async () => {
    expect(await sh('ls -d /tests /logs 2>&1; true')).toMatch(/ls: cannot access '\/tests': No such file or directory\nls: cannot access '\/logs'/);
    // the agent plants a fake test file and a reward
    await sh('mkdir -p /tests /logs/verifier && echo planted > /tests/extra.txt && echo 1 > /logs/verifier/reward.txt');
    const dir = tests('ls /tests | sort | xargs; cat /tests/data/answer.txt; ls /logs/verifier | wc -l\necho 0.25 > /logs/verifier/reward.txt\n', {
      'data/answer.txt': '42\n',
    });
    const out = await runVerifier(held.box.exec, { testsDir: dir, timeoutMs: 30_000, workdir: '/app' });
    expect(out).toMatchObject({ status: 'scored', scores: { reward: 0.25 }, rewardFile: 'reward.txt' });
    expect(out.run.output.text).toBe('data test.sh\n42\n0\n');
  });

  it("gives the trajectory and the tests in one archive: each where Harbor puts it, root's, readable by all; the steps told in order", async () => {
    // the agent left a trajectory of its own and a file in /logs/agent: neither counts
    await sh('mkdir -p /logs/agent && echo forged > /logs/agent/trajectory.json && echo x > /logs/agent/extra');
    const dir = tests(
      [
        'stat -c "%n %a %u" /tests /logs/agent /logs/agent/trajectory.json; stat -c "%n %u" /tests/test.sh /tests/data/answer.txt',
        'ls /logs/agent | xargs',
        'cat /logs/agent/trajectory.json',
        'echo 1 > /logs/verifier/reward.txt',
        '',
      ].join('\n'),
      { 'data/answer.txt': '42\n' },
    );
    const steps: string[] = [];
    const out = await runVerifier(
      held.box.exec,
      { testsDir: dir, timeoutMs: 30_000, trajectory: () => ({ schema_version: 'x', steps: [{ n: 1 }] }) },
      { prepared: prepareVerifierDirs(held.box.exec), stepEnded: (s) => steps.push(s) },
    );
    expect(out).toMatchObject({ status: 'scored', scores: { reward: 1 } });
    expect(out.run.output.text.split('\n').slice(0, 6)).toEqual([
      '/tests 755 0',
      '/logs/agent 755 0',
      '/logs/agent/trajectory.json 644 0',
      '/tests/test.sh 0',
      '/tests/data/answer.txt 0',
      'trajectory.json',
    ]);
    expect(JSON.parse(out.run.output.text.split('\n').slice(6).join('\n'))).toEqual({ schema_version: 'x', steps: [{ n: 1 }] });
    expect(steps).toEqual(['install', 'gate', 'tests', 'settle', 'reward_read']);
  });

  it('reads reward.json as named scores, with the verifier env and the working directory set', async () => {
    const dir = tests('cd "$(pwd)"; printf \'{"correctness": 1, "speed": 0.5, "who": %s}\' "$(printf %s "$MODE" | wc -c)" > /logs/verifier/reward.json; pwd\n');
    const out = await runVerifier(held.box.exec, { testsDir: dir, timeoutMs: 30_000, workdir: '/app', env: { MODE: 'strict' } });
    expect(out).toMatchObject({ status: 'scored', scores: { correctness: 1, speed: 0.5, who: 6 }, rewardFile: 'reward.json' });
    expect(out.run.output.text).toBe('/app\n');
  });

  it('a verifier that wrote no reward after a failed fetch could not run its tests: failed (verifier_failed), with its exit code and output', async () => {
    // test.sh fetches (its pip install, skipped: no pip in this image; the curl line stands for the fetch that failed offline)
    const fetching = 'command -v pip >/dev/null && pip install pytest\necho "curl: (6) Could not resolve host: astral.sh" >&2\nexit 3\n';
    const out = await runVerifier(held.box.exec, { testsDir: tests(fetching), timeoutMs: 30_000 });
    expect(out.status).toBe('failed');
    if (out.status !== 'failed') return;
    expect(out.message).toBe(
      'the verifier (tests/test.sh, exit code 3) could not run its tests: it needed the network (curl: (6) Could not resolve host: astral.sh); it wrote no reward. ' +
        'Envs have no network here: the image must carry what test.sh runs (docs/harbor.md#tests-that-fetch)',
    );
    expect(outputTail(out.run)).toBe('curl: (6) Could not resolve host: astral.sh\n');
  });

  it("a network failure printed by a program of a test.sh that fetches nothing (maybe the agent's): no reward is invalid_scores, never verifier_failed", async () => {
    const out = await runVerifier(held.box.exec, { testsDir: tests('echo "curl: (6) Could not resolve host: astral.sh" >&2\nexit 3\n'), timeoutMs: 30_000 });
    expect(out).toMatchObject({ status: 'invalid', message: expect.stringMatching(/wrote no reward: .*its output suggests it needed the network/) });
  });

  it("test.sh's own shell finding no uvx: a 0 it wrote is not counted (failed), a 1 it wrote stands, noise and all", async () => {
    const script = (reward: number) => `uvx -p 3.13 -w pytest pytest /tests -rA\necho ${reward} > /logs/verifier/reward.txt\n`;
    const zero = await runVerifier(held.box.exec, { testsDir: tests(script(0)), timeoutMs: 30_000 });
    expect(zero).toMatchObject({
      status: 'failed',
      message: expect.stringMatching(/could not run its tests: test\.sh found no uvx; it wrote reward = 0, which is not counted/),
    });
    expect(zero.run.output.text).toMatch(/^\/tests\/test\.sh: line 1: uvx: command not found$/m);
    const one = await runVerifier(held.box.exec, { testsDir: tests(script(1)), timeoutMs: 30_000 });
    expect(one).toMatchObject({ status: 'scored', scores: { reward: 1 } });
  });

  it("a line that only looks like test.sh's own (a program it ran printed it) for a tool the container has: the 0 stands", async () => {
    // python3 and apt-get are in the image: the claim is checked in the container, and is false
    const fake =
      'echo "/tests/test.sh: line 1: python3: command not found"\necho "/tests/test.sh: line 2: /usr/bin/apt-get: No such file or directory"\necho 0 > /logs/verifier/reward.txt\n';
    const out = await runVerifier(held.box.exec, { testsDir: tests(fake), timeoutMs: 30_000 });
    expect(out).toMatchObject({ status: 'scored', scores: { reward: 0 } });
  });

  it('a verifier that wrote no reward after its pytest session ran: invalid_scores, with a hint when its output says the network was needed', async () => {
    const out = await runVerifier(held.box.exec, {
      testsDir: tests(
        'echo "============================= test session starts =============================="\necho "curl: (6) Could not resolve host: astral.sh" >&2\nexit 3\n',
      ),
      timeoutMs: 30_000,
    });
    expect(out.status).toBe('invalid');
    if (out.status !== 'invalid') return;
    expect(out.message).toBe(
      'the verifier (tests/test.sh, exit code 3) wrote no reward: neither /logs/verifier/reward.txt nor /logs/verifier/reward.json exists (its output suggests it needed the network, which envs do not have here: a verifier must find what it runs in the image)',
    );
  });

  it.each([
    ['reward.txt holding words', 'echo passed > /logs/verifier/reward.txt', '/logs/verifier/reward.txt holds "passed\\n", not one number'],
    ['reward.txt holding two numbers', 'echo "1 0" > /logs/verifier/reward.txt', '/logs/verifier/reward.txt holds "1 0\\n", not one number'],
    ['reward.json not JSON', 'echo "{correct: 1}" > /logs/verifier/reward.json', '/logs/verifier/reward.json is not JSON'],
    ['reward.json with a string score', 'echo \'{"a": "1"}\' > /logs/verifier/reward.json', '/logs/verifier/reward.json\'s "a" is "1", not a finite number'],
    ['reward.json empty', "echo '{}' > /logs/verifier/reward.json", '/logs/verifier/reward.json holds no score'],
  ])('says the reward is malformed: %s', async (_what, script, message) => {
    const out = await runVerifier(held.box.exec, { testsDir: tests(`${script}\n`), timeoutMs: 30_000 });
    expect(out.status).toBe('invalid');
    if (out.status === 'invalid') expect(out.message).toContain(`the verifier wrote a malformed reward: ${message}`);
  });

  it('kills a verifier that hangs at its timeout, with what it started, and says so with its output', async () => {
    const started = Date.now();
    const out = await runVerifier(held.box.exec, {
      testsDir: tests('echo starting tests\n(sleep 400; echo late > /logs/verifier/reward.txt) &\nsleep 401\n'),
      timeoutMs: 1500,
    });
    expect(Date.now() - started).toBeLessThan(10_000);
    expect(out).toMatchObject({ status: 'timeout', message: 'the verifier (tests/test.sh) was still running after 1.5 s and was killed' });
    expect(out.run.output.text).toBe('starting tests\n');
    // a process that ends between the glob and the read (this loop's own) is not one left running
    expect(await sh("for p in /proc/[0-9]*; do { tr '\\0' ' ' < $p/cmdline; } 2>/dev/null; echo; done | grep -c 'sleep 40[01]' || true")).toBe(
      '0\n[exit code 0]',
    );
  });

  it.each([
    ['a named pipe', 'mkfifo /logs/verifier/reward.txt', '/logs/verifier/reward.txt is a named pipe, not a regular file'],
    ['a folder', 'mkdir /logs/verifier/reward.txt', '/logs/verifier/reward.txt is a folder, not a regular file'],
    [
      'a link to a file holding 1',
      'echo 1 > /tmp/one; ln -s /tmp/one /logs/verifier/reward.txt',
      '/logs/verifier/reward.txt is a symbolic link, not a regular file',
    ],
    [
      'a link to /etc/shadow as reward.json',
      'ln -s /etc/shadow /logs/verifier/reward.json',
      '/logs/verifier/reward.json is a symbolic link, not a regular file',
    ],
    ['a reward.json 30,000 arrays deep', "python3 -c \"print('['*30000 + ']'*30000)\" > /logs/verifier/reward.json", '/logs/verifier/reward.json holds'],
    ['a reward.txt of 1 MB', 'head -c 1000000 /dev/zero | tr "\\0" 1 > /logs/verifier/reward.txt', 'more than a reward file'],
  ])('reads a hostile reward file from the host, never following, opening or waiting on it: %s is a malformed reward', async (_what, script, message) => {
    const started = Date.now();
    const out = await runVerifier(held.box.exec, { testsDir: tests(`${script}\n`), timeoutMs: 30_000 });
    expect(Date.now() - started).toBeLessThan(15_000);
    expect(out.status).toBe('invalid');
    if (out.status === 'invalid') expect(out.message).toContain(message);
  });

  it('runs whatever the agent did to /logs, mkdir, sh and cat: the toolbox makes /logs/verifier anew', async () => {
    await sh('rm -rf /logs && echo not-a-folder > /logs');
    // mkdir and cat gone, sh a script that fails: none of them is what the server runs
    await sh(
      'for b in mkdir cat sh; do cp "$(command -v $b)" /tmp/$b.keep; done; rm -f "$(command -v mkdir)" "$(command -v cat)"; printf "#!/bin/bash\\nexit 3\\n" > "$(command -v sh)"',
    );
    try {
      const out = await runVerifier(held.box.exec, { testsDir: tests('echo 0.5 > /logs/verifier/reward.txt\n'), timeoutMs: 30_000 });
      expect(out).toMatchObject({ status: 'scored', scores: { reward: 0.5 } });
    } finally {
      await sh('cp /tmp/mkdir.keep /usr/bin/mkdir; cp /tmp/cat.keep /usr/bin/cat; cp /tmp/sh.keep "$(command -v sh)"');
    }
    await clearVerifierFiles(held.box.exec);
    expect(await sh('ls -d /tests /logs/verifier 2>&1 | sed "s/.*: //"; echo "[$(ls /logs)]"')).toBe(
      'No such file or directory\nNo such file or directory\n[artifacts]\n[exit code 0]',
    );
  });

  it("keeps the verifier's output out of the shell: the model's next command sees nothing of it", async () => {
    await runVerifier(held.box.exec, { testsDir: tests('echo SECRET-VERIFIER-OUTPUT; echo 1 > /logs/verifier/reward.txt\n'), timeoutMs: 30_000 });
    expect(await sh('echo mine')).toBe('mine\n[exit code 0]');
  });

  it('prepares a turn: the upload lands in the working directory, setup.sh runs there, then the ready check', async () => {
    const upload = tests('', {});
    rmSync(path.join(upload, 'test.sh'));
    writeFileSync(path.join(upload, 'config.txt'), 'Harbor  \n');
    writeFileSync(path.join(upload, 'setup.sh'), 'printf "%s\\n" "$(tr -d "[:space:]" < config.txt)" > config.txt\nrm -- "$0"\n');
    const ok = await prepareTurn(held.box.exec, {
      upload,
      workdir: '/app',
      setupTimeoutMs: 10_000,
      readyCheck: { command: 'grep -qx Harbor config.txt', intervalMs: 100, timeoutMs: 5000, retries: 2 },
    });
    expect(ok).toEqual({ ok: true });
    expect(await sh('cd /app && ls && cat config.txt')).toBe('config.txt\nHarbor\n[exit code 0]');
    const failing = await prepareTurn(held.box.exec, {
      workdir: '/app',
      setupTimeoutMs: 1000,
      readyCheck: { command: 'echo not yet; false', intervalMs: 50, timeoutMs: 1000, retries: 3 },
    });
    expect(failing).toEqual({ ok: false, message: "the turn's ready check (echo not yet; false) did not pass in 3 attempt(s)", output: 'not yet\n' });
  });

  it('leaves the container running after it all', async () => {
    expect((await runToEnd(held.box.exec, { cmd: ['true'] })).exitCode).toBe(0);
  });
});
