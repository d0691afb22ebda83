/**
 * The server as its users run it beside slime: the image built offline from the Dockerfile,
 * `docker-compose up` with the `tls` profile (nginx in front, a self-signed certificate), episodes
 * played through the published ports (ws:// and wss://), and `docker-compose down` draining the
 * server to exit 0 with nothing left on the engine.
 *
 * Needs Debian's `docker-compose` and `nginx` (the offline proxy image is made from the host's
 * nginx binary by docker/make-local-nginx-base.sh) and `openssl`.
 */
import { execFile, execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { containerNetworkIds, describeDocker, IN_CI, LOCAL_NODE_IMAGE, labelledResources, uniqueInstance } from '../support/docker.js';
import { WsClient } from '../../scripts/lib/ws-client.js';
import { get, playEchoEpisode } from './helpers.js';
import { parsePrometheusText, valueOf } from '../../scripts/lib/prom-text.js';
import { freePort } from '../../scripts/lib/free-port.js';
import { waitFor } from '../../scripts/lib/wait.js';
import { chromium } from 'playwright-core';
import { fixtureGolden } from '../support/fixture-policy.js';
import { startScriptedModel } from '../support/scripted-model.js';

const ROOT = process.cwd();
const LOCAL_NGINX_IMAGE = process.env.OPENENV_TEST_NGINX_IMAGE ?? 'openenv-local/nginx:1';
const IMAGE = 'openenv-bundle-server:compose-test';
const LABEL_INSTANCE = 'io.openenv.bundle-server.instance';
/** the proxy's public name, as a browser reaches it (Chromium maps it to 127.0.0.1) */
const PUBLIC_NAME = 'envs.test';
const CHROMIUM = process.env.OPENENV_TEST_CHROMIUM ?? '/usr/bin/chromium';

function hasCommand(cmd: string): boolean {
  try {
    execFileSync('sh', ['-c', `command -v ${cmd}`], { stdio: 'pipe' });
    return true;
  } catch {
    return false;
  }
}

function run(cmd: string, args: string[], env: NodeJS.ProcessEnv, timeoutMs = 300_000): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(cmd, args, { cwd: ROOT, env, timeout: timeoutMs, maxBuffer: 64 * 1024 * 1024 }, (err, stdout, stderr) => {
      if (err) reject(new Error(`${cmd} ${args.join(' ')} failed: ${err.message}\n${stdout}\n${stderr}`));
      else resolve(stdout + stderr);
    });
  });
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * waits until the server's network stock is full (no network being made) and says its size; `out`
 * stocked networks are out with live episodes (they count as the stock's: it makes none for them)
 */
async function waitForStock(url: string, token: string, out = 0): Promise<number> {
  let size: number | undefined;
  await waitFor(
    async () => {
      const fams = parsePrometheusText((await get(`${url}/metrics`, { token })).body);
      size = valueOf(fams, 'openenv_network_stock_size');
      return size !== undefined && size > 0 && valueOf(fams, 'openenv_network_stock_ready') === size - out;
    },
    30_000,
    'the network stock full',
    200,
  );
  return size!;
}

function imageExists(ref: string): boolean {
  try {
    execFileSync('docker', ['image', 'inspect', ref], { stdio: 'pipe' });
    return true;
  } catch {
    return false;
  }
}

/** what this machine lacks for these tests (Debian packages) */
function missingTools(): string[] {
  const missing: string[] = [];
  if (!hasCommand('docker-compose')) missing.push('docker-compose');
  if (!hasCommand('openssl')) missing.push('openssl');
  // the offline proxy image is made from the host's nginx, unless it already exists
  if (!existsSync('/usr/sbin/nginx') && !imageExists(LOCAL_NGINX_IMAGE)) missing.push('nginx');
  return missing;
}

describeDocker('docker-compose: the server image beside slime, with the TLS proxy', () => {
  const missing = missingTools();
  if (missing.length) {
    const what = `apt-get install -y ${missing.join(' ')}`;
    if (IN_CI) {
      it('needs docker-compose, nginx and openssl', () => {
        throw new Error(`CI is set but this machine lacks them: ${what}`);
      });
    } else {
      console.warn(`\n!!! skipping the compose and TLS tests: ${what} !!!\n`);
      it.skip(`[SKIPPED: ${what}]`, () => {});
    }
    return;
  }

  const project = `openenv-test-${randomBytes(4).toString('hex')}`;
  const instance = uniqueInstance('compose');
  const token = randomBytes(24).toString('hex');
  const certDir = mkdtempSync(join(tmpdir(), 'openenv-certs-'));
  let env: NodeJS.ProcessEnv;
  let plain = '';
  let tls = '';
  let ca: Buffer;
  let serverId = '';
  const measured: Record<string, string> = {};

  const compose = (args: string[], timeoutMs?: number) =>
    run('docker-compose', ['-p', project, '-f', 'compose.yaml', '--profile', 'tls', ...args], env, timeoutMs);
  const serverLogs = () => run('docker', ['logs', serverId], env);

  beforeAll(async () => {
    execFileSync('bash', ['docker/make-local-nginx-base.sh', LOCAL_NGINX_IMAGE], { stdio: 'inherit' });
    execFileSync('bash', ['docker/prepare-prebuilt.sh'], { stdio: 'inherit' });
    // valid for envs.test too: the proxy's public name in the console's test
    execFileSync('bash', ['deploy/make-self-signed-cert.sh', certDir, PUBLIC_NAME], { stdio: 'inherit' });
    ca = readFileSync(join(certDir, 'tls.crt'));
    const [port, tlsPort] = [await freePort(), await freePort()];
    plain = `http://127.0.0.1:${port}`;
    tls = `https://127.0.0.1:${tlsPort}`;
    env = {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      DOCKER_HOST: process.env.DOCKER_HOST,
      COMPOSE_PROJECT_NAME: project,
      OPENENV_IMAGE: IMAGE,
      OPENENV_BUILD_TARGET: 'runtime-prebuilt',
      NODE_IMAGE: LOCAL_NODE_IMAGE,
      PROXY_IMAGE: LOCAL_NGINX_IMAGE,
      BUNDLES_DIR: './test/fixtures',
      BUNDLE: 'fixture-v1',
      AGENTENV_TOKEN: token,
      OPENENV_INSTANCE: instance,
      OPENENV_BUILD_ARG: `NODE_IMAGE=${LOCAL_NODE_IMAGE}`,
      // the server runs as uid 1000 in the socket's group
      DOCKER_GID: String(statSync((process.env.DOCKER_HOST ?? 'unix:///var/run/docker.sock').replace(/^unix:\/\//, '')).gid),
      OPENENV_PUBLISH_ADDR: '127.0.0.1',
      OPENENV_PORT: String(port),
      TLS_PUBLISH_ADDR: '127.0.0.1',
      TLS_PORT: String(tlsPort),
      TLS_CERT_DIR: certDir,
      OPENENV_EDGE_SUBNET: `10.212.${Math.floor(Math.random() * 250)}.0/29`,
      OPENENV_ALLOWED_HOSTS: PUBLIC_NAME,
      OPENENV_SHUTDOWN_TIMEOUT: '20',
      OPENENV_STOP_GRACE_PERIOD: '40s',
    };
    for (const k of Object.keys(env)) if (env[k] === undefined) delete env[k];

    let t = Date.now();
    await compose(['build', 'server'], 600_000);
    measured.build_s = ((Date.now() - t) / 1000).toFixed(1);
    measured.image_mb = (Number(execFileSync('docker', ['image', 'inspect', '-f', '{{.Size}}', IMAGE], { encoding: 'utf8' }).trim()) / 1e6).toFixed(0);

    t = Date.now();
    await compose(['up', '-d', '--no-build']);
    serverId = (await compose(['ps', '-q', 'server'])).trim().split('\n').pop()!.trim();
    expect(serverId).toMatch(/^[0-9a-f]{64}$/);
    for (;;) {
      const health = execFileSync('docker', ['inspect', '-f', '{{.State.Health.Status}} {{.State.Status}}', serverId], { encoding: 'utf8' }).trim();
      if (health.startsWith('healthy')) break;
      if (!health.endsWith('running') || Date.now() - t > 180_000) {
        throw new Error(`the server did not become healthy (${health}):\n${await serverLogs().catch((e) => String(e))}`);
      }
      await sleep(250);
    }
    measured.up_to_healthy_s = ((Date.now() - t) / 1000).toFixed(1);
    console.log(`[compose] image build ${measured.build_s} s, image ${measured.image_mb} MB, up to healthy ${measured.up_to_healthy_s} s`);
  }, 900_000);

  afterAll(async () => {
    if (env) {
      await compose(['down', '--remove-orphans', '--timeout', '40']).catch((e) => console.error(String(e)));
      // whatever a failed test left: the episodes' containers and networks, by the instance label
      const left = labelledResources(`${LABEL_INSTANCE}=${instance}`);
      if (left.containers.length) execFileSync('docker', ['rm', '-f', ...left.containers], { stdio: 'pipe' });
      if (left.networks.length) execFileSync('docker', ['network', 'rm', ...left.networks], { stdio: 'pipe' });
      execFileSync('docker', ['image', 'rm', '-f', IMAGE], { stdio: 'pipe' });
    }
    rmSync(certDir, { recursive: true, force: true });
  }, 120_000);

  it('the image is the offline target: node as PID 1 on dist/serve.js, a healthcheck, port 8200, no token baked in', () => {
    const cfg = JSON.parse(execFileSync('docker', ['image', 'inspect', '-f', '{{json .Config}}', IMAGE], { encoding: 'utf8' }));
    expect(cfg.Entrypoint).toEqual(['node', 'dist/serve.js']);
    expect(Object.keys(cfg.ExposedPorts)).toEqual(['8200/tcp']);
    expect(cfg.Healthcheck.Test[0]).toBe('CMD');
    expect(JSON.stringify(cfg.Env)).not.toMatch(/TOKEN/);
    // production dependencies only
    const ls = execFileSync(
      'docker',
      ['run', '--rm', '--entrypoint', 'node', IMAGE, '-e', "console.log(require('fs').readdirSync('node_modules').join(' '))"],
      { encoding: 'utf8' },
    );
    expect(ls).toMatch(/\bfastify\b/);
    expect(ls).not.toMatch(/\b(vitest|typescript|tsx|supertest)\b/);
    // not root: the image's user, and the running server is uid 1000 in the socket's group
    expect(cfg.User).toBe('1000:1000');
    const ids = execFileSync('docker', ['exec', serverId, 'node', '-e', 'console.log(process.getuid(), process.getgroups().join(","))'], { encoding: 'utf8' })
      .trim()
      .split(' ');
    expect(ids[0]).toBe('1000');
    expect(ids[1]!.split(',')).toContain(env.DOCKER_GID);
  });

  it('logs JSON, not a crash, when started on a terminal without the dev-only pretty printer', async () => {
    // `docker run -it` gives the server a TTY; pino-pretty is a dev dependency, absent here
    const out = await new Promise<{ code: number | null; text: string }>((resolve) => {
      const p = spawn('docker', ['run', '--rm', '-t', '-e', 'AGENTENV_TOKEN=a-token-long-enough-to-pass', IMAGE, '/bundles/none', '--host', '0.0.0.0'], {
        env,
      });
      let text = '';
      p.stdout.on('data', (d) => (text += d));
      p.stderr.on('data', (d) => (text += d));
      p.on('close', (code) => resolve({ code, text }));
    });
    expect(out.text).toContain('cannot serve /bundles/none');
    expect(out.text).not.toMatch(/transport|pino-pretty|at .*node_modules/);
    expect(out.code).toBe(1);
  });

  it('answers /health openly and refuses other routes without the token, on the published port', async () => {
    expect((await get(`${plain}/health`)).status).toBe(200);
    expect((await get(`${plain}/bundle`)).status).toBe(401);
    await expect(WsClient.open(plain)).rejects.toMatchObject({ statusCode: 401 });
    const b = await get(`${plain}/bundle`, { token });
    expect(b.status).toBe(200);
    expect(JSON.parse(b.body).name).toBe('fixture-v1');
  });

  it('plays a full episode through the published port: the server joins the episode network to reach the env', async () => {
    const c = await WsClient.open(plain, token);
    try {
      const reset = await c.reset({ task_id: 'fx-echo-0' });
      expect(reset.type).toBe('observation');
      const episodeId = reset.data.observation.episode_id as string;
      // the env's network (made at reset, or ahead of it by the network stock) holds the env and
      // the server's own container
      const envs = labelledResources(`io.openenv.bundle-server.episode=${episodeId}`).containers;
      expect(envs).toHaveLength(1);
      const nets = containerNetworkIds(envs[0]!);
      expect(nets).toHaveLength(1);
      const members = JSON.parse(execFileSync('docker', ['network', 'inspect', '-f', '{{json .Containers}}', nets[0]!], { encoding: 'utf8' }));
      expect(Object.keys(members)).toContain(serverId);
      expect(Object.keys(members)).toHaveLength(2);

      const echo = await c.call('echo', { text: 'through compose' });
      expect(echo.data.observation.result.data).toEqual({ text: 'through compose' });
      const end = await c.call('end_turn', { answer: 'done' });
      expect(end.data).toMatchObject({ done: true, reward: 0.5 });
      expect(end.data.observation.end_reason).toBe('turns_ended');
      // torn down: the env is gone, and its network with it, or (a stocked one) back in the stock
      // holding nothing but the server's own container
      const settled = () => {
        if (!execFileSync('docker', ['network', 'ls', '-q', '--no-trunc'], { encoding: 'utf8' }).includes(nets[0]!)) return true;
        const left = JSON.parse(execFileSync('docker', ['network', 'inspect', '-f', '{{json .Containers}}', nets[0]!], { encoding: 'utf8' }));
        return Object.keys(left).length === 1 && Object.keys(left)[0] === serverId;
      };
      await waitFor(settled, 10_000, "the episode's network removed or back in the stock, empty", 250);
      expect(labelledResources(`${LABEL_INSTANCE}=${instance}`).containers).toEqual([]);
    } finally {
      await c.close();
    }
  });

  it('through the TLS proxy: /health open, 401 without the token, a full episode over wss://', async () => {
    const health = await get(`${tls}/health`, { ca });
    expect(health.status).toBe(200);
    expect(JSON.parse(health.body)).toEqual({ status: 'healthy' });
    const refused = await get(`${tls}/tasks?split=train`, { ca });
    expect(refused.status).toBe(401);
    expect(refused.headers['www-authenticate']).toBe('Bearer');
    await expect(WsClient.open(tls, undefined, { ca })).rejects.toMatchObject({ statusCode: 401 });
    // a client that does not trust the certificate is refused by TLS itself
    await expect(get(`${tls}/health`)).rejects.toThrow(/self[- ]signed|certificate/i);

    const c = await WsClient.open(tls, token, { ca, headers: { 'x-forwarded-for': '203.0.113.77' } });
    try {
      const { reset, echo, end } = await playEchoEpisode(c, 'fx-echo-1');
      expect(reset.data.observation.task_id).toBe('fx-echo-1');
      expect(echo.data.observation.error).toBeNull();
      expect(end.data).toMatchObject({ done: true, reward: 1 });
    } finally {
      await c.close();
    }
  });

  it("the server logs the client's address the proxy forwarded (not a spoofed one, not the proxy's), and never the token", async () => {
    const proxyId = (await compose(['ps', '-q', 'proxy'])).trim();
    const proxyLog = await run('docker', ['logs', proxyId], env);
    // what nginx saw as the client of the wss:// upgrade
    const seen = /^(\S+) "GET \/ws HTTP\/1\.1" 101/m.exec(proxyLog);
    expect(seen, proxyLog).not.toBeNull();
    const clientAddr = seen![1]!;
    const proxyEdgeAddr = JSON.parse(execFileSync('docker', ['inspect', '-f', '{{json .NetworkSettings.Networks}}', proxyId], { encoding: 'utf8' }))[
      `${project}_edge`
    ].IPAddress as string;
    expect(clientAddr).not.toBe(proxyEdgeAddr);

    const lines = (await serverLogs())
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l));
    const upgrades = lines.filter((l) => l.req?.url === '/ws');
    // the upgrades through the proxy (Host names its port): the refused one and the episode's
    const viaProxy = upgrades.filter((l) => l.req.host === new URL(tls).host);
    expect(viaProxy.length, JSON.stringify(upgrades)).toBe(2);
    for (const l of viaProxy) expect(l.req.remoteAddress).toBe(clientAddr);
    // neither the proxy's own address nor what a client wrote into X-Forwarded-For
    expect(upgrades.some((l) => l.req.remoteAddress === proxyEdgeAddr)).toBe(false);
    expect(upgrades.some((l) => l.req.remoteAddress === '203.0.113.77')).toBe(false);

    const all = (await serverLogs()) + proxyLog + (await compose(['logs', '--no-color']));
    expect(all).not.toContain(token);
    // lifecycle lines of the episodes, with ids and durations
    const ended = lines.filter((l) => l.event === 'ended');
    expect(ended.length).toBeGreaterThanOrEqual(2);
    for (const l of ended) expect(l).toMatchObject({ episode_id: expect.any(String), task_id: expect.any(String), running_s: expect.any(Number) });
  });

  it('/metrics through the proxy counts the episodes played', async () => {
    const m = await get(`${tls}/metrics`, { ca, token });
    expect(m.status).toBe(200);
    const fams = parsePrometheusText(m.body);
    expect(valueOf(fams, 'openenv_resets_total', { outcome: 'started' })).toBe(2);
    expect(valueOf(fams, 'openenv_episode_reward_count', { split: 'train' })).toBe(2);
    expect(valueOf(fams, 'openenv_episode_reward_sum', { split: 'train' })).toBe(1.5);
    expect(valueOf(fams, 'openenv_episode_networks')).toBe(0);
  });

  it('the console in a browser and `eval` through the TLS proxy: the public name and its own page pass the cross-site checks; a foreign name gets 403', async () => {
    if (!existsSync(CHROMIUM) && !IN_CI) {
      console.warn(`\n!!! no Chromium at ${CHROMIUM}: the console part of this test is skipped (apt-get install -y chromium) !!!\n`);
    } else {
      const profile = mkdtempSync(join(tmpdir(), 'openenv-chromium-'));
      const ctx = await chromium.launchPersistentContext(profile, {
        executablePath: CHROMIUM,
        headless: true,
        ignoreHTTPSErrors: true,
        args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', `--host-resolver-rules=MAP ${PUBLIC_NAME} 127.0.0.1, MAP evil.test 127.0.0.1`],
      });
      try {
        const page = await ctx.newPage();
        const site = `https://${PUBLIC_NAME}:${new URL(tls).port}`;
        await page.goto(`${site}/web/#/playground/fx-echo-0`);
        await page.getByTestId('token-input').fill(token);
        await page.getByTestId('token-submit').click();
        // a POST from the page (Origin https://envs.test:<port>, the server speaks http behind the proxy): its own page
        await expect.poll(() => page.getByTestId('chosen-task').textContent(), { timeout: 30_000 }).toBe('fx-echo-0');
        await page.getByTestId('start').click();
        await page.getByTestId('playground').waitFor({ timeout: 60_000 });
        await page.close();
        // a name the server does not answer to, through the same proxy: refused before the page loads
        const foreign = await ctx.newPage();
        const answer = await foreign.goto(`https://evil.test:${new URL(tls).port}/web/`);
        expect(answer?.status()).toBe(403);
        expect(await foreign.textContent('body')).toContain('forbidden_host');
        await foreign.close();
      } finally {
        await ctx.close();
        rmSync(profile, { recursive: true, force: true });
      }
      // the playground's episode ended with its page
      await waitFor(() => labelledResources(`${LABEL_INSTANCE}=${instance}`).containers.length === 0, 30_000, "the playground's env torn down", 250);
    }

    // eval through the proxy (NODE_EXTRA_CA_CERTS trusts its certificate), the model a scripted one on this host
    const model = await startScriptedModel(fixtureGolden);
    const out = mkdtempSync(join(tmpdir(), 'openenv-compose-eval-'));
    try {
      const r = await run(
        process.execPath,
        [
          'dist/cli/openenv-bundle.js',
          'eval',
          tls,
          '--model-url',
          model.url,
          '--model',
          'scripted',
          '--split',
          'eval',
          '--token-var',
          'EVAL_TOKEN',
          '--out',
          join(out, 'run'),
        ],
        { PATH: process.env.PATH, EVAL_TOKEN: token, NODE_EXTRA_CA_CERTS: join(certDir, 'tls.crt') },
      );
      expect(r).toContain('wrote');
      const summary = JSON.parse(readFileSync(join(out, 'run', 'summary.json'), 'utf8'));
      expect(summary).toMatchObject({ tasks: 2, played: 2, failures: { total: 0 } });
      expect(summary.scored.mean).toBeCloseTo(0.5, 12);
    } finally {
      await model.close();
      rmSync(out, { recursive: true, force: true });
    }
    await waitFor(() => labelledResources(`${LABEL_INSTANCE}=${instance}`).containers.length === 0, 30_000, "eval's envs torn down", 250);
  }, 180_000);

  it('a server killed mid-episode comes back, and its startup sweep removes the env and network it left (leaving them itself)', async () => {
    const c = await WsClient.open(plain, token);
    const reset = await c.reset({ task_id: 'fx-echo-0' });
    const episodeId = reset.data.observation.episode_id as string;
    // the stock full again (none being made), so that what the kill leaves is known exactly: the
    // episode's env and network, and the stock (of which the episode's network is one, when it
    // took a stocked one)
    const [envId] = labelledResources(`io.openenv.bundle-server.episode=${episodeId}`).containers;
    const [netId] = containerNetworkIds(envId!);
    const netLabel = execFileSync('docker', ['network', 'inspect', '-f', '{{index .Labels "io.openenv.bundle-server.episode"}}', netId!], {
      encoding: 'utf8',
    }).trim();
    const stockedNet = netLabel.startsWith('net-') ? 1 : 0;
    const stock = await waitForStock(plain, token, stockedNet);
    const left = labelledResources(`${LABEL_INSTANCE}=${instance}`);
    expect([left.containers.length, left.networks.length]).toEqual([1, 1 - stockedNet + stock]);

    execFileSync('docker', ['kill', '-s', 'KILL', serverId], { stdio: 'pipe' });
    await c.closed;
    // the restart policy brings it back; `up` does if it has not yet (a no-op otherwise)
    await sleep(1000);
    await compose(['up', '-d', '--no-build']);
    expect((await compose(['ps', '-q', 'server'])).trim()).toBe(serverId);
    const t = Date.now();
    while (!execFileSync('docker', ['inspect', '-f', '{{.State.Health.Status}}', serverId], { encoding: 'utf8' }).startsWith('healthy')) {
      if (Date.now() - t > 60_000) throw new Error(`not healthy again:\n${await serverLogs()}`);
      await sleep(250);
    }
    const lines = (await serverLogs())
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l));
    const sweep = lines.filter((l) => l.event === 'startup_sweep').at(-1);
    expect(sweep).toMatchObject({
      level: 40,
      containers: left.containers.map(() => expect.any(String)),
      networks: left.networks.map(() => expect.any(String)),
    });
    // nothing the killed server left is there; what is, is the new server's own stock
    const now = labelledResources(`${LABEL_INSTANCE}=${instance}`);
    expect(now.containers).toEqual([]);
    for (const n of left.networks) expect(now.networks).not.toContain(n);
    expect(labelledResources(`io.openenv.bundle-server.episode=${episodeId}`)).toEqual({ containers: [], networks: [] });

    // and it serves again
    const again = await WsClient.open(plain, token);
    try {
      const { end } = await playEchoEpisode(again);
      expect(end.data).toMatchObject({ done: true, reward: 0.5 });
    } finally {
      await again.close();
    }
  }, 120_000);

  it('docker-compose stop/down drains the server, direct and through the TLS proxy alike: both sessions are told why and closed 1001, the server exits 0, nothing is left', async () => {
    const c = await WsClient.open(plain, token);
    const reset = await c.reset({ task_id: 'fx-echo-2' });
    expect(reset.data.done).toBe(false);
    // a wss:// session behind the proxy sees the same drain (it got 1006 before)
    const viaProxy = await WsClient.open(tls, token, { ca });
    expect((await viaProxy.reset({ task_id: 'fx-echo-1' })).data.done).toBe(false);
    expect(labelledResources(`${LABEL_INSTANCE}=${instance}`).containers).toHaveLength(2);

    // `down` is `stop` then removal: stop first, so the stopped server's log and exit code can be read
    const t = Date.now();
    const stop = compose(['stop']);
    // each client is told why, then closed with 1001
    for (const client of [c, viaProxy]) {
      const told = await client.next(60_000);
      expect(told).toMatchObject({ type: 'error', data: { code: 'SESSION_ERROR', reason: 'shutting_down' } });
      expect((await client.closed).code).toBe(1001);
    }
    await stop;
    const stopS = (Date.now() - t) / 1000;
    console.log(`[compose] stop (drain + exit) took ${stopS.toFixed(1)} s`);
    // well inside the grace period: it drained, it was not killed
    expect(stopS).toBeLessThan(30);

    const state = JSON.parse(execFileSync('docker', ['inspect', '-f', '{{json .State}}', serverId], { encoding: 'utf8' }));
    expect(state).toMatchObject({ Status: 'exited', ExitCode: 0, OOMKilled: false });
    const lines = (await serverLogs())
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l));
    const sigterm = lines.findIndex((l) => l.signal === 'SIGTERM' && l.msg?.startsWith('draining'));
    expect(sigterm, 'the server logged no SIGTERM drain').toBeGreaterThan(-1);
    const after = lines.slice(sigterm);
    expect(after.some((l) => l.event === 'torn_down' && l.task_id === 'fx-echo-2')).toBe(true);
    expect(after.some((l) => l.event === 'torn_down' && l.task_id === 'fx-echo-1')).toBe(true);
    // its last word (by time: pino's buffered lines may reach the log out of order at exit)
    const drained = after.find((l) => l.msg === 'drained; exiting');
    expect(drained, JSON.stringify(after.slice(-4), null, 1)).toMatchObject({ episodes: 2 });
    expect(Math.max(...after.map((l) => l.time as number))).toBe(drained.time);
    expect(labelledResources(`${LABEL_INSTANCE}=${instance}`)).toEqual({ containers: [], networks: [] });

    await compose(['down', '--remove-orphans']);
    expect(labelledResources(`com.docker.compose.project=${project}`)).toEqual({ containers: [], networks: [] });
  }, 180_000);
});
