/**
 * The server's logs as an operator reads them, from real `node dist/serve.js` processes on real
 * Docker: one JSON line per lifecycle event of an episode with its ids and durations, the token in
 * none of them whatever a client does with it, LOG_LEVEL honoured, and readable lines on a terminal.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { connect } from 'node:net';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { describeDocker, LOCAL_NODE_IMAGE, uniqueInstance, waitFor } from './support/docker.js';
import { spawnServer, SERVE_JS, type ServerProcess } from './support/serve-process.js';
import { FIXTURE_BUNDLE } from './support/docker-server.js';
import { WsClient } from '../scripts/lib/ws-client.js';
import { freePort } from '../scripts/lib/free-port.js';

// long and unlike anything else in a log, so a leak cannot hide
const TOKEN = 'tok-9f8e7d6c5b4a39281706f5e4d3c2b1a0-logging';
const EVENTS = ['queued', 'deployed', 'reset', 'ended', 'torn_down'] as const;

function args(instance: string, extra: string[] = []): string[] {
  return [FIXTURE_BUNDLE, '--port', '0', '--instance', instance, '--build-arg', `NODE_IMAGE=${LOCAL_NODE_IMAGE}`, ...extra];
}

function rawRequest(port: number, text: string): Promise<string> {
  return new Promise((resolve, reject) => {
    let got = '';
    const sock = connect(port, '127.0.0.1', () => sock.write(text));
    sock.on('data', (d) => {
      got += d.toString();
      sock.end();
    });
    sock.on('close', () => resolve(got));
    sock.on('error', reject);
  });
}

describeDocker('logs of a real server process', () => {
  let srv: ServerProcess;
  const episodes: Record<string, string> = {};

  beforeAll(async () => {
    srv = await spawnServer(args(uniqueInstance('logging'), ['--token-in-path']), { AGENTENV_TOKEN: TOKEN, LOG_LEVEL: 'trace' });
    const port = Number(new URL(srv.url).port);
    const auth = { authorization: `Bearer ${TOKEN}` };
    // everything a client might do with the token, right or wrong
    await fetch(`${srv.url}/health`);
    await fetch(`${srv.url}/metrics`, { headers: auth });
    await fetch(`${srv.url}/bundle`, { headers: auth });
    await fetch(`${srv.url}/bundle`, { headers: { authorization: `Bearer ${TOKEN}x` } });
    await fetch(`${srv.url}/bundle`, { headers: { authorization: `Basic ${Buffer.from(`u:${TOKEN}`).toString('base64')}`, 'x-api-key': TOKEN } });
    await fetch(`${srv.url}/tasks?split=train&token=${TOKEN}`, { headers: auth });
    await fetch(`${srv.url}/t/${TOKEN}/tasks/fx-echo-0`);
    await fetch(`${srv.url}/t/${TOKEN}x/bundle`);
    await fetch(`${srv.url}/no-such-route/${TOKEN}`, { headers: auth });
    await fetch(`${srv.url}/episodes`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: `{"task_id": "${TOKEN}"` });
    await rawRequest(port, `GET /t/${TOKEN}/bundle HTTP/1.1\r\nHost: x\r\nBroken Header ${TOKEN}\r\n\r\n`);

    // a scored episode (header auth) and a crashed one (token in the path)
    const a = await WsClient.open(srv.url, TOKEN);
    const ra = await a.reset({ task_id: 'fx-echo-0' });
    episodes.scored = ra.data.observation.episode_id;
    await a.call('echo', { text: TOKEN });
    expect((await a.call('end_turn', {})).data.reward).toBe(0.5);
    await a.close();
    const b = await WsClient.open(`${srv.url}/t/${TOKEN}`);
    const rb = await b.reset({ task_id: 'fx-echo-1', episode_id: TOKEN });
    episodes.crashed = rb.data.observation.episode_id;
    expect((await b.call('crash', {})).data.observation.end_reason).toBe('env_failed');
    await b.close();
    await waitFor(() => srv.lines().filter((l) => l.event === 'torn_down').length === 2, 30_000, 'both episodes torn down');
    srv.child.kill('SIGTERM');
    expect(await srv.exited).toEqual({ code: 0, signal: null });
  });

  afterAll(() => {
    if (srv && srv.child.exitCode === null) srv.child.kill('SIGKILL');
  });

  it('every line is JSON, and the token is in none of them', () => {
    const out = srv.output();
    const lines = out.split('\n').filter(Boolean);
    expect(lines.length).toBeGreaterThan(20);
    for (const l of lines) expect(() => JSON.parse(l), l).not.toThrow();
    expect(out).not.toContain(TOKEN);
    expect(out).not.toContain(Buffer.from(`u:${TOKEN}`).toString('base64'));
    // trace level really logged the requests that carried it
    expect(out).toContain('[redacted]');
    expect(srv.lines().some((l) => l.level === 10)).toBe(true);
  });

  it('polled routes (/health, /metrics) do not log their requests; others do, even at info', () => {
    const urls = srv
      .lines()
      .map((l) => (l.req as { url?: string } | undefined)?.url)
      .filter(Boolean);
    expect(urls).toContain('/bundle');
    expect(urls).not.toContain('/health');
    expect(urls).not.toContain('/metrics');
  });

  it('one line per lifecycle event of each episode, with its ids and durations, in order', () => {
    for (const [kind, id] of Object.entries(episodes)) {
      // by time (a stable sort: lines of one millisecond keep their order)
      const mine = srv
        .lines()
        .filter((l) => l.episode_id === id && typeof l.event === 'string' && (EVENTS as readonly string[]).includes(l.event as string))
        .sort((x, y) => (x.time as number) - (y.time as number));
      expect(
        mine.map((l) => l.event),
        kind,
      ).toEqual([...EVENTS]);
      for (const l of mine) expect(l.task_id).toBe(kind === 'scored' ? 'fx-echo-0' : 'fx-echo-1');
      const by = Object.fromEntries(mine.map((l) => [l.event, l]));
      expect(by.deployed!.deploy_s).toEqual(expect.any(Number));
      expect(by.reset).toMatchObject({ queued_s: expect.any(Number), deploy_s: expect.any(Number) });
      expect(by.ended).toMatchObject({ queued_s: expect.any(Number), deploy_s: expect.any(Number), running_s: expect.any(Number), steps: expect.any(Number) });
      expect(by.torn_down!.teardown_s).toEqual(expect.any(Number));
    }
    const ended = srv.lines().filter((l) => l.event === 'ended');
    expect(ended.find((l) => l.episode_id === episodes.scored)).toMatchObject({ end_reason: 'turns_ended', reward: 0.5, steps: 2 });
    expect(ended.find((l) => l.episode_id === episodes.crashed)).toMatchObject({
      end_reason: 'env_failed',
      reward: null,
      failure_reason: expect.stringMatching(/^env_(crashed|unreachable)$/),
    });
    // the failure has its own line saying why
    expect(srv.lines().some((l) => l.event === 'env_failed' && l.episode_id === episodes.crashed && typeof l.message === 'string')).toBe(true);
  });
});

/**
 * runs serve.js on a fixed port until /health answers, then SIGTERM; returns all it printed.
 * `wrapped`: cmd is a wrapper (script(1)) whose one child is the server: the SIGTERM goes to the
 * server itself, as a person's shell sends it, and the wrapper ends when the server has drained.
 */
async function runUntilHealthy(
  cmd: string,
  argv: string[],
  env: NodeJS.ProcessEnv,
  port: number,
  wrapped = false,
): Promise<{ out: string; code: number | null }> {
  const child: ChildProcess = spawn(cmd, argv, { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout!.on('data', (d) => (out += d.toString()));
  child.stderr!.on('data', (d) => (out += d.toString()));
  const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
  try {
    await waitFor(
      async () =>
        (await fetch(`http://127.0.0.1:${port}/health`).then(
          (r) => r.status,
          () => 0,
        )) === 200,
      60_000,
      `the server on ${port} healthy:\n${out}`,
    );
    // the ready line follows /health by a moment
    await new Promise((r) => setTimeout(r, 300));
  } finally {
    const server = wrapped
      ? Number(
          execFileSync('pgrep', ['-P', String(child.pid)], { encoding: 'utf8' })
            .trim()
            .split('\n')[0],
        )
      : NaN;
    if (wrapped && Number.isInteger(server) && server > 0) process.kill(server, 'SIGTERM');
    else child.kill('SIGTERM');
  }
  return { out, code: await exited };
}

describeDocker('LOG_LEVEL and a terminal', () => {
  it('LOG_LEVEL=warn: nothing below warn; unset: info lines', async () => {
    const port = await freePort();
    const quiet = await runUntilHealthy(
      process.execPath,
      [SERVE_JS, ...args(uniqueInstance('quiet')), '--port', String(port)],
      { AGENTENV_TOKEN: TOKEN, LOG_LEVEL: 'warn' },
      port,
    );
    expect(quiet.code).toBe(0);
    const levels = quiet.out
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l).level as number);
    expect(
      levels.every((l) => l >= 40),
      quiet.out,
    ).toBe(true);

    const port2 = await freePort();
    const env: NodeJS.ProcessEnv = { AGENTENV_TOKEN: TOKEN };
    const normal = await runUntilHealthy(
      process.execPath,
      [SERVE_JS, ...args(uniqueInstance('normal')), '--port', String(port2)],
      { ...env, LOG_LEVEL: '' },
      port2,
    );
    expect(normal.code).toBe(0);
    const lines = normal.out
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l));
    expect(lines.some((l) => l.level === 30 && /^listening on /.test(l.msg))).toBe(true);
    expect(lines.some((l) => l.level < 30)).toBe(false);
  });

  it('on a terminal: readable lines instead of JSON, still without the token', async () => {
    const port = await freePort();
    const cmd = [process.execPath, SERVE_JS, ...args(uniqueInstance('tty')), '--port', String(port)].map((a) => `'${a}'`).join(' ');
    // script(1) gives the server a pseudo-terminal for stdout, as a person's shell would
    const run = await runUntilHealthy('script', ['-q', '-e', '-c', `exec ${cmd}`, '/dev/null'], { AGENTENV_TOKEN: TOKEN, LOG_LEVEL: 'info' }, port, true);
    // the server drained and gave its instance name back (script -e passes its exit code on)
    expect(run.code).toBe(0);
    const text = run.out.replace(new RegExp(`${String.fromCharCode(27)}\\[[0-9;]*m`, 'g'), '');
    expect(text).toMatch(/INFO.*listening on 127\.0\.0\.1:\d+/);
    expect(text.split('\n').some((l) => l.trim().startsWith('{"level"'))).toBe(false);
    expect(text).not.toContain(TOKEN);
  });
});
