/**
 * The model gateway with the warm pool, on real Docker: the built server with `--warm-pool 2` and
 * the scripted model as its upstream serves a task of the shipped Harbor dataset (fix-median,
 * imported with the shipped harness). Each pooled env has its door and credential from its deploy:
 * a call made with it from inside a pooled env before any episode took it is refused (403
 * not_in_episode) and goes nowhere; an episode that takes a pooled env runs its harness through
 * that env's door, its calls in its own transcript and usage, scored 1; SIGTERM leaves nothing.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect, it } from 'vitest';
import { WsClient } from '../../scripts/lib/ws-client.js';
import { HARNESS } from '../../src/defaults.js';
import { LABELS } from '../../src/sandbox/sandbox.js';
import { BASE_IMAGE_RULE, DATASET, ensureDebianBase } from '../harbor/helpers.js';
import { describeDocker, labelledResources, uniqueInstance, waitFor } from '../support/docker.js';
import { INSTANCE_LABEL } from '../support/docker-server.js';
import { spawnServer, type ServerProcess } from '../support/serve-process.js';
import { chatCompletion, startFakeUpstream, type FakeUpstream, type Received } from './support/fake-upstream.js';

const CLI = fileURLToPath(new URL('../../dist/cli/openenv-bundle.js', import.meta.url));
const TASK = 'fix-median';
const ORACLE = readFileSync(join(DATASET, TASK, 'solution/solve.sh'), 'utf8');

/** the policy: the oracle as one bash call, then (once its result came back) a stop */
function script(r: Received) {
  const messages: any[] = r.body?.messages ?? [];
  const toolResult = messages.some((m) => m.role === 'tool');
  const call = { id: 'call_1', name: 'bash', arguments: JSON.stringify({ command: ORACLE }) };
  return { kind: 'json' as const, body: toolResult ? chatCompletion('Fixed.') : chatCompletion(null, { toolCalls: [call] }) };
}

/** a model call from inside an env's container, with the credential and door its env was given */
const PREMATURE = `
import json, os, urllib.error, urllib.request
req = urllib.request.Request(os.environ["OPENAI_BASE_URL"] + "/chat/completions", method="POST",
    data=json.dumps({"model": "m", "messages": [{"role": "user", "content": "too early"}]}).encode(),
    headers={"Authorization": "Bearer " + os.environ["OPENAI_API_KEY"], "content-type": "application/json"})
try:
    print(json.dumps({"status": urllib.request.urlopen(req, timeout=5).status}))
except urllib.error.HTTPError as e:
    print(json.dumps({"status": e.code, "body": json.loads(e.read())}))
`;

/** the pooled env containers of this instance: their env ids (pool-…) and container ids */
function pooledContainers(instance: string): { envId: string; container: string }[] {
  const out = execFileSync('docker', ['ps', '--filter', `label=${INSTANCE_LABEL}=${instance}`, '--format', `{{.ID}} {{.Label "${LABELS.episode}"}}`], {
    encoding: 'utf8',
  });
  return out
    .split('\n')
    .filter(Boolean)
    .map((l) => l.split(' '))
    .filter(([, envId]) => envId!.startsWith('pool-'))
    .map(([container, envId]) => ({ envId: envId!, container: container! }));
}

/** the server's flags, from name → value */
const flags = (o: Record<string, string>): string[] => Object.entries(o).flatMap(([k, v]) => [`--${k}`, v]);

describeDocker('the model gateway with the warm pool', () => {
  it("a pooled env's call before any episode took it is refused; the episode that takes it has its harness's calls in its own transcript", async () => {
    ensureDebianBase();
    const instance = uniqueInstance('gw-pool');
    const dir = mkdtempSync(join(tmpdir(), 'gw-pool-'));
    const bundle = join(dir, 'bundle');
    const upstream = await startFakeUpstream(script);
    let srv: ServerProcess | null = null;
    try {
      execFileSync(
        process.execPath,
        [CLI, 'import', 'harbor', join(DATASET, TASK), '--out', bundle, '--base-image', BASE_IMAGE_RULE, '--agent', `python3 ${HARNESS.shippedPath}`],
        { stdio: 'pipe' },
      );
      const args = flags({
        port: '0',
        instance,
        'subnet-pool': `10.225.${Math.floor(Math.random() * 250)}.0/24`,
        'max-concurrent-envs': '3',
        'warm-pool': '2',
        'model-url': upstream.baseUrl,
        model: 'policy',
        'gateway-port': '0',
      });
      const s = (srv = await spawnServer([bundle, ...args], {}, 300_000));
      await waitFor(async () => ((await (await fetch(`${s.url}/health`)).json()) as any).pool?.ready === 2, 180_000, 'two pooled envs ready');
      await playFromThePool(s, instance, upstream);
      s.child.kill('SIGTERM');
      expect((await s.exited).code).toBe(0);
    } finally {
      if (srv && srv.child.exitCode === null) {
        srv.child.kill('SIGKILL');
        await srv.exited;
      }
      await upstream.close();
      rmSync(dir, { recursive: true, force: true });
    }
    // nothing of the run is left: pooled envs, the episode's, their doors' networks
    expect(labelledResources(`${INSTANCE_LABEL}=${instance}`)).toEqual({ containers: [], networks: [] });
  }, 600_000);
});

/** the premature calls from inside both pooled envs, then an episode on one of them */
async function playFromThePool(srv: ServerProcess, instance: string, upstream: FakeUpstream): Promise<void> {
  const pooled = pooledContainers(instance);
  expect(pooled).toHaveLength(2);
  // from inside each pooled env, with the credential its deploy gave it: refused, and nothing goes upstream
  for (const p of pooled) {
    const out = execFileSync('docker', ['exec', p.container, 'python3', '-c', PREMATURE], { encoding: 'utf8' });
    const answer = JSON.parse(out.trim().split('\n').pop()!);
    expect(answer.status, out).toBe(403);
    expect(answer.body.error.code).toBe('not_in_episode');
    expect(answer.body.error.message).toMatch(/bound to no episode yet/);
  }
  expect(upstream.received).toHaveLength(0);

  const c = await WsClient.open(srv.url);
  const reset = await c.reset({ task_id: TASK }, 120_000);
  expect(reset.type, JSON.stringify(reset)).toBe('observation');
  expect(reset.data.observation.timings.pooled).toBe(true);
  const id = reset.data.observation.episode_id as string;
  let r = await c.call('wait', { timeout_s: 5 });
  for (let i = 0; i < 200 && !r.data?.done; i++) r = await c.call('wait', { timeout_s: 5 });
  expect(r.data, JSON.stringify(r.data)).toMatchObject({
    done: true,
    reward: 1,
    observation: { harness: { ended: 'exited', exit_code: 0, model_calls: 2 } },
  });
  expect(upstream.received.filter((x) => x.path === '/v1/chat/completions')).toHaveLength(2);
  // the episode's transcript has its two calls, and none of the refused ones made before the hand-over
  const t = (await (await fetch(`${srv.url}/console/episodes/${id}`)).json()) as any;
  const calls = t.events.filter((e: any) => e.kind === 'model_call');
  expect(calls.filter((e: any) => e.api === 'openai.chat').map((e: any) => e.outcome)).toEqual(['ok', 'ok']);
  expect(calls.filter((e: any) => e.outcome !== 'ok')).toEqual([]);
  await c.close();
}
