/**
 * Verified tasks served through episodes, where they go wrong or end on their own, on real
 * containers (a bundle written here: one shell env of the local Debian base, its image as it is):
 * a verifier that writes no reward ends the episode invalid_scores with its output's tail; one
 * that hangs, verifier_timeout; what the agent left running is killed before the verifier (a
 * background writer of reward.txt, escaped into a session of its own, does not outlive the
 * agent's part); the task's time budget ends and scores the episode with no call from the
 * client; a turn whose setup fails refuses the reset with setup_failed.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { ServerSession, clientFrames } from '../../src/client/session.js';
import { describeDocker, labelledResources } from '../support/docker.js';
import { INSTANCE_LABEL, startServer, type TestServer } from '../support/docker-server.js';
import { LOCAL_DEBIAN_IMAGE, ensureDebianBase } from './helpers.js';
import { playOverWs } from './ws-play.js';

/** subnets of this file's server (no other test file uses them) */
const SUBNET_POOL = '10.238.16.0/20';

const task = (id: string, extra: Record<string, unknown>) => ({
  task_id: id,
  toolset: 'shell',
  system_prompt: 'You are tested.',
  turns: ['Do it.'],
  verifier: { tests: `verifiers/${id}`, timeout_s: 30 },
  ...extra,
});

const TESTS: Record<string, string> = {
  'writes-nothing': 'echo "checking the answer"\necho "nothing to see" >&2\nexit 3\n',
  hangs: 'echo "started, now waiting"\nsleep 300\n',
  // the agent's writer, if alive, turns the 0 into 1 within the second
  background: 'echo 0 > /logs/verifier/reward.txt\nsleep 1.5\ncat /logs/verifier/reward.txt\n',
  budget: 'if [ -f /app/done ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt\n',
  'setup-fails': 'echo 1 > /logs/verifier/reward.txt\n',
};

function writeBundle(dir: string): void {
  const files: Record<string, string> = {
    'bundle.json': JSON.stringify({
      name: 'verified-episodes',
      version: '1.0.0',
      description: 'Verified tasks that go wrong.',
      default_split: 'train',
      splits: { train: 'tasks/train.jsonl' },
      envs: { box: { kind: 'shell', image: LOCAL_DEBIAN_IMAGE, workdir: '/app' } },
      toolsets: { shell: { builtin: ['shell'] } },
      reward: 'mean',
      scores: { reward: { min: 0, max: 1 } },
    }),
    'tasks/train.jsonl':
      [
        task('writes-nothing', {}),
        task('hangs', { verifier: { tests: 'verifiers/hangs', timeout_s: 2 } }),
        task('background', {}),
        task('budget', { time_budget_s: 4 }),
        task('setup-fails', { per_turn: [{ upload: 'uploads/setup-fails' }] }),
      ]
        .map((r) => JSON.stringify({ ...r, env: 'box' }))
        .join('\n') + '\n',
    'uploads/setup-fails/setup.sh': 'echo "setting up"\nexit 7\n',
  };
  for (const [id, sh] of Object.entries(TESTS)) files[`verifiers/${id}/test.sh`] = sh;
  for (const [rel, content] of Object.entries(files)) {
    mkdirSync(path.dirname(path.join(dir, rel)), { recursive: true });
    writeFileSync(path.join(dir, rel), content);
  }
}

describeDocker('verified tasks through episodes: failures, the agent stopped, time budgets', () => {
  let dir: string;
  let s: TestServer;

  beforeAll(async () => {
    ensureDebianBase();
    dir = mkdtempSync(path.join(os.tmpdir(), 'verified-episodes-'));
    writeBundle(dir);
    s = await startServer({ subnetPool: SUBNET_POOL, maxConcurrentEnvs: 2, networkStock: 0 }, dir);
  }, 120_000);

  afterAll(async () => {
    if (s?.app) {
      await s.stop();
      expect(labelledResources(`${INSTANCE_LABEL}=${s.instance}`)).toEqual({ containers: [], networks: [] });
    }
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('a verifier that writes no reward ends the episode invalid_scores, with its output tail', async () => {
    const p = await playOverWs(s.url, 'writes-nothing', [{ tool: 'end_turn' }]);
    expect(p.last).toMatchObject({
      done: true,
      reward: null,
      observation: {
        end_reason: 'env_failed',
        failure: { reason: 'invalid_scores', phase: 'finish', retryable: false, message: expect.stringMatching(/exit code 3\) wrote no reward/) },
      },
    });
    expect(p.last.observation.failure.log_tail).toMatch(/checking the answer[\s\S]*nothing to see/);
    await p.close();
  });

  it('a verifier that hangs is killed at its timeout: verifier_timeout', async () => {
    const started = Date.now();
    const p = await playOverWs(s.url, 'hangs', [{ tool: 'end_turn' }]);
    expect(p.last.observation).toMatchObject({
      end_reason: 'env_failed',
      failure: { reason: 'verifier_timeout', message: expect.stringMatching(/after 2 s/) },
    });
    expect(p.last.observation.failure.log_tail).toContain('started, now waiting');
    expect(Date.now() - started).toBeLessThan(60_000);
    await p.close();
  });

  it('what the agent left running is killed before the verifier, even a writer in a session of its own', async () => {
    const writer = "setsid nohup bash -c 'while true; do echo 1 > /logs/verifier/reward.txt 2>/dev/null; sleep 0.1; done' >/dev/null 2>&1 &";
    const p = await playOverWs(s.url, 'background', [
      { tool: 'bash', arguments: { command: `mkdir -p /logs/verifier && ${writer} sleep 0.5; cat /logs/verifier/reward.txt` } },
      // still running after the call that started it
      { tool: 'bash', arguments: { command: 'sleep 0.5; cat /proc/[0-9]*/cmdline 2>/dev/null | tr "\\0" " " | grep -c "while [t]rue"' } },
      { tool: 'end_turn' },
    ]);
    expect(p.steps[0]!.observation.result.content[0].text).toMatch(/^1\n/);
    expect(p.steps[1]!.observation.result.content[0].text).toMatch(/^[1-9]/);
    expect(p.last).toMatchObject({ done: true, reward: 0, observation: { end_reason: 'turns_ended', scores: { reward: 0 } } });
    const t = (await (await fetch(`${s.url}/console/episodes/${p.episodeId}`)).json()) as { events: { kind: string; agent_processes_killed?: number }[] };
    expect(t.events.find((e) => e.kind === 'verifier')?.agent_processes_killed).toBeGreaterThanOrEqual(1);
    await p.close();
  });

  it("the task's time budget ends and scores the episode with no call from the client", async () => {
    const session = await ServerSession.open(`${s.url.replace(/^http/, 'ws')}/ws`);
    try {
      const reset = await session.request(clientFrames.reset({ task_id: 'budget' }), { timeoutMs: 120_000 });
      expect(reset.type).toBe('observation');
      const done = await session.request(clientFrames.call('bash', { command: 'touch /app/done' }), { timeoutMs: 60_000 });
      expect(done).toMatchObject({ type: 'observation', data: { done: false } });
      // no call until the budget (4 s) has passed: the verifier runs on its own
      await new Promise((r) => setTimeout(r, 6_000));
      const late = await session.request(clientFrames.call('bash', { command: 'echo late' }), { timeoutMs: 60_000 });
      expect(late).toMatchObject({ type: 'observation', data: { done: true, reward: 1, observation: { end_reason: 'turns_ended', scores: { reward: 1 } } } });
    } finally {
      session.ws.close();
    }
  });

  it('a turn whose setup fails refuses the reset with setup_failed and its output', async () => {
    const session = await ServerSession.open(`${s.url.replace(/^http/, 'ws')}/ws`);
    try {
      const f = await session.request(clientFrames.reset({ task_id: 'setup-fails' }), { timeoutMs: 120_000 });
      expect(f).toMatchObject({
        type: 'error',
        data: { failure: { reason: 'setup_failed', phase: 'reset', message: expect.stringMatching(/setup\.sh failed with exit code 7/) } },
      });
      expect(JSON.stringify(f)).toContain('setting up');
    } finally {
      session.ws.close();
    }
  });
});
