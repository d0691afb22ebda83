/**
 * Rewards the policy cannot forge, through a real server's episodes (a bundle written here, of
 * the local Debian base): an in-place verifier refuses a toolchain the agent changed
 * (toolchain_tampered, not retryable, no reward) and trusts what the task allows; a clean verifier
 * runs in a fresh container given only the agent's outputs (what the agent deleted stays deleted,
 * nothing it planted elsewhere is there); a turn's tests and reward files are gone before the next
 * turn; the agent's user (agent_user) is who the file tools act as, also in an image whose USER is
 * a name; `check` says a task whose golden solution changes the toolchain cannot be verified in
 * place, and what to do.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { describeDocker, labelledResources } from '../support/docker.js';
import { INSTANCE_LABEL, startServer, type TestServer } from '../support/docker-server.js';
import { LOCAL_DEBIAN_IMAGE, ensureDebianBase } from './helpers.js';
import { playOverWs } from './ws-play.js';

/** subnets of this file's server (no other test file uses them) */
const SUBNET_POOL = '10.239.16.0/20';
const CLI = path.resolve(import.meta.dirname, '../../dist/cli/openenv-bundle.js');

/** the answer only the tests know: the agent is told to write `42` to /app/answer.txt */
const ANSWER_TEST = 'if [ "$(cat /app/answer.txt 2>/dev/null)" = 42 ] && [ ! -e /app/stale.txt ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt\n';

const task = (id: string, extra: Record<string, unknown> = {}) => ({
  task_id: id,
  toolset: 'shell',
  env: 'box',
  system_prompt: 'You are tested.',
  turns: ['Write 42 to /app/answer.txt.'],
  verifier: { tests: 'verifiers/answer', timeout_s: 60 },
  ...extra,
});

function writeBundle(dir: string, withChecks: boolean): void {
  const files: Record<string, string> = {
    'bundle.json': JSON.stringify({
      name: withChecks ? 'modes-check' : 'verification-modes',
      version: '1.0.0',
      description: 'Verification modes.',
      default_split: 'train',
      splits: { train: 'tasks/train.jsonl' },
      envs: {
        box: { kind: 'shell', build: 'envs/box', workdir: '/app' },
        asuser: { kind: 'shell', build: 'envs/box', workdir: '/app', agent_user: '1000:1000' },
        named: { kind: 'shell', build: 'envs/named', workdir: '/home/agent' },
      },
      toolsets: { shell: { builtin: ['shell'] } },
      reward: 'mean',
      scores: { reward: { min: 0, max: 1 } },
    }),
    'envs/box/Dockerfile': `FROM ${LOCAL_DEBIAN_IMAGE}\nRUN mkdir -p /app && echo old > /app/stale.txt && chmod 0777 /app\n`,
    'envs/named/Dockerfile': `FROM ${LOCAL_DEBIAN_IMAGE}\nRUN useradd -m -u 1001 agent\nUSER agent\n`,
    'verifiers/answer/test.sh': ANSWER_TEST,
    'verifiers/turn-one/test.sh': 'echo secret-one > /tests/marker; echo 1 > /logs/verifier/reward.txt\n',
    'verifiers/turn-two/test.sh': 'echo 1 > /logs/verifier/reward.txt\n',
  };
  const solve = (cmd: string) => [{ tool: 'bash', arguments: { command: cmd } }, { tool: 'end_turn' }];
  const rows = withChecks
    ? [
        // the golden solution installs a tool into /usr/local/bin: in place, the check refuses it
        task('installs', {
          golden: solve(
            'printf "#!/bin/sh\\necho 42\\n" > /usr/local/bin/answer && chmod +x /usr/local/bin/answer && answer > /app/answer.txt && rm -f /app/stale.txt',
          ),
        }),
        task('installs-allowed', {
          verifier: { tests: 'verifiers/answer', timeout_s: 60, allow_changes: ['/usr/local/bin'] },
          golden: solve(
            'printf "#!/bin/sh\\necho 42\\n" > /usr/local/bin/answer && chmod +x /usr/local/bin/answer && answer > /app/answer.txt && rm -f /app/stale.txt',
          ),
        }),
      ]
    : [
        task('in-place'),
        task('in-place-allowed', { verifier: { tests: 'verifiers/answer', timeout_s: 60, allow_changes: ['/usr/local/bin'] } }),
        task('clean', { verifier: { tests: 'verifiers/answer', timeout_s: 60, mode: 'clean' } }),
        task('two-turns', {
          turns: ['First.', 'Second.'],
          verifier: undefined,
          per_turn: [{ verifier: { tests: 'verifiers/turn-one', timeout_s: 60 } }, { verifier: { tests: 'verifiers/turn-two', timeout_s: 60 } }],
        }),
        task('as-user', { env: 'asuser' }),
        task('named-user', { env: 'named' }),
      ];
  files['tasks/train.jsonl'] = rows.map((r) => JSON.stringify(r)).join('\n') + '\n';
  for (const [rel, content] of Object.entries(files)) {
    mkdirSync(path.dirname(path.join(dir, rel)), { recursive: true });
    writeFileSync(path.join(dir, rel), content);
  }
}

const text = (r: { observation: { result: { content: { text: string }[] } } }) => r.observation.result.content[0]!.text;

/** a bash wrapper planted first on PATH: it writes reward 1 whenever test.sh is what it runs */
const PLANT_BASH = `printf '#!/bin/bash\\n[ "$1" = /tests/test.sh ] && { echo 1 > /logs/verifier/reward.txt; exit 0; }\\nexec /bin/bash "$@"\\n' > /usr/local/bin/bash && chmod +x /usr/local/bin/bash`;

describeDocker('verification modes, the agent user, turns: rewards the policy cannot forge', () => {
  let dir: string;
  let s: TestServer;

  beforeAll(async () => {
    ensureDebianBase();
    dir = mkdtempSync(path.join(os.tmpdir(), 'verification-modes-'));
    writeBundle(dir, false);
    s = await startServer({ subnetPool: SUBNET_POOL, maxConcurrentEnvs: 2, networkStock: 0 }, dir);
  }, 300_000);

  afterAll(async () => {
    if (s?.app) {
      await s.stop();
      expect(labelledResources(`${INSTANCE_LABEL}=${s.instance}`)).toEqual({ containers: [], networks: [] });
    }
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('in place: a bash planted on PATH ends the episode toolchain_tampered, with no reward and not retryable; allowed, it is trusted', async () => {
    const p = await playOverWs(s.url, 'in-place', [{ tool: 'bash', arguments: { command: PLANT_BASH } }, { tool: 'end_turn' }]);
    expect(p.last).toMatchObject({
      done: true,
      reward: null,
      observation: {
        end_reason: 'env_failed',
        failure: { reason: 'toolchain_tampered', retryable: false, message: expect.stringContaining('/usr/local/bin/bash') },
      },
    });
    const t = (await (await fetch(`${s.url}/console/episodes/${p.episodeId}`)).json()) as { events: { kind: string; status?: string; tampered?: string[] }[] };
    expect(t.events.find((e) => e.kind === 'verifier')).toMatchObject({ status: 'tampered', tampered: ['/usr/local/bin/bash'] });
    await p.close();
    // a task that allows /usr/local/bin trusts it: the forgery goes through there, as the task chose
    const allowed = await playOverWs(s.url, 'in-place-allowed', [{ tool: 'bash', arguments: { command: PLANT_BASH } }, { tool: 'end_turn' }]);
    expect(allowed.last).toMatchObject({ done: true, reward: 1 });
    await allowed.close();
  });

  it('clean: the tests run in a fresh container given only the outputs; the planted bash is not there, what the agent deleted stays deleted', async () => {
    const forged = await playOverWs(s.url, 'clean', [{ tool: 'bash', arguments: { command: PLANT_BASH } }, { tool: 'end_turn' }]);
    expect(forged.last).toMatchObject({ done: true, reward: 0, observation: { end_reason: 'turns_ended' } });
    await forged.close();
    const honest = await playOverWs(s.url, 'clean', [
      { tool: 'write_file', arguments: { path: '/app/answer.txt', content: '42' } },
      { tool: 'bash', arguments: { command: 'rm /app/stale.txt' } },
      { tool: 'end_turn' },
    ]);
    expect(honest.last).toMatchObject({ done: true, reward: 1 });
    const t = (await (await fetch(`${s.url}/console/episodes/${honest.episodeId}`)).json()) as { events: { kind: string; mode?: string }[] };
    expect(t.events.find((e) => e.kind === 'verifier')).toMatchObject({ mode: 'clean', status: 'scored' });
    await honest.close();
    // the verifier's container is removed with its verification
    await expect.poll(() => labelledResources(`${INSTANCE_LABEL}=${s.instance}`).containers.length, { timeout: 30_000 }).toBe(0);
  });

  it("a turn's tests and reward files are gone before the next turn starts", async () => {
    const p = await playOverWs(s.url, 'two-turns', [{ tool: 'end_turn' }]);
    expect(p.last.done).toBe(false);
    const seen = await p.call('bash', { command: 'ls -d /tests /logs/verifier 2>&1 | sed "s/.*: //"; cat /tests/marker 2>&1 | sed "s/.*: //"' });
    expect(text(seen)).toBe('No such file or directory\nNo such file or directory\nNo such file or directory\n[exit code 0]');
    const end = await p.call('end_turn', {});
    expect(end).toMatchObject({ done: true, reward: 1 });
    await p.close();
  });

  it('the file tools act as the agent user: a uid-1000 agent reads no root-only file and writes nothing into root-owned folders', async () => {
    const p = await playOverWs(s.url, 'as-user', [{ tool: 'bash', arguments: { command: 'id -u; id -g' } }]);
    expect(text(p.last)).toBe('1000\n1000\n[exit code 0]');
    const shadow = await p.call('read_file', { path: '/etc/shadow' });
    expect(shadow.observation.result).toMatchObject({ is_error: true });
    expect(text(shadow)).toBe('cannot read /etc/shadow: permission denied');
    const planted = await p.call('write_file', { path: '/usr/local/bin/bash', content: '#!/bin/sh\necho 1\n' });
    expect(planted.observation.result).toMatchObject({ is_error: true });
    expect(text(planted)).toMatch(/^cannot write \/usr\/local\/bin\/bash/);
    const own = await p.call('write_file', { path: '/app/answer.txt', content: '42' });
    expect(own.observation.result.is_error).toBe(false);
    expect(text(await p.call('bash', { command: 'stat -c "%u:%g %a" /app/answer.txt' }))).toBe('1000:1000 644\n[exit code 0]');
    await p.close();
  });

  it('an image whose USER is a name: the file tools work, as that user', async () => {
    const p = await playOverWs(s.url, 'named-user', [{ tool: 'write_file', arguments: { path: 'notes.txt', content: 'mine' } }]);
    expect(p.last.observation.result).toMatchObject({ is_error: false });
    expect(text(await p.call('bash', { command: 'id -un; stat -c %U notes.txt; cat notes.txt' }))).toBe('agent\nagent\nmine\n[exit code 0]');
    expect(text(await p.call('read_file', { path: '/home/agent/notes.txt' }))).toBe('mine');
    await p.close();
  });

  it('check: a golden solution that changes the toolchain cannot be verified in place, and check says what to do; allowed, it passes', () => {
    const checkDir = mkdtempSync(path.join(os.tmpdir(), 'modes-check-'));
    try {
      writeBundle(checkDir, true);
      let out = '';
      let code = 0;
      try {
        out = execFileSync(process.execPath, [CLI, 'check', checkDir, '--json'], { encoding: 'utf8', env: { ...process.env, NO_COLOR: '1' } });
      } catch (e) {
        code = (e as { status: number }).status;
        out = (e as { stdout: string }).stdout;
      }
      expect(code).toBe(1);
      const report = JSON.parse(out) as { problems: { where: string; message: string }[] };
      const problems = report.problems;
      expect(problems, JSON.stringify(problems)).toHaveLength(1);
      expect(problems[0]!.where).toContain('installs');
      expect(problems[0]!.message).toMatch(/cannot be verified in place .*\/usr\/local\/bin\/answer.*"mode": "clean".*"allow_changes"/);
    } finally {
      rmSync(checkDir, { recursive: true, force: true });
    }
  });
});
