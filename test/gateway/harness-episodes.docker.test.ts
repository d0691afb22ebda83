/**
 * Harness episodes run by the server, on real Docker: a task of the shipped Harbor dataset
 * (fix-median) imported with `--agent` (the shipped harness), served by the built server with the
 * scripted model as its upstream. The server runs the harness in the task's shell env, whose
 * network has the gateway's door; the scripted policy answers with the task's oracle (its
 * solve.sh as one bash call), then stops; the verifier scores 1, whole (over /ws) and streamed
 * (over /episodes). A harness that probes finds only its own door open (MCP). The client cancels
 * one mid-run and nothing of it is left; a harness's time budget ends one with its reason; SIGTERM
 * mid-harness drains the server and leaves nothing. `eval` plays a harness task by waiting.
 */
import { execFile, execFileSync } from 'node:child_process';
import { promisify } from 'node:util';
import { appendFileSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { freePort } from '../../scripts/lib/free-port.js';
import { WsClient } from '../../scripts/lib/ws-client.js';
import { HARNESS } from '../../src/defaults.js';
import { BASE_IMAGE_RULE, DATASET, ensureDebianBase } from '../harbor/helpers.js';
import { describeDocker, labelledResources, uniqueInstance, waitFor } from '../support/docker.js';
import { INSTANCE_LABEL } from '../support/docker-server.js';
import { spawnServer, type ServerProcess } from '../support/serve-process.js';
import { chatChunks, chatCompletion, startFakeUpstream, type FakeUpstream, type Received } from './support/fake-upstream.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const CLI = join(ROOT, 'dist/cli/openenv-bundle.js');
const POOL = `10.224.${Math.floor(Math.random() * 250)}.0/24`;
const TASK = 'fix-median';
const ORACLE = readFileSync(join(DATASET, TASK, 'solution/solve.sh'), 'utf8');
const EPISODE_LABEL = 'io.openenv.bundle-server.episode';

/** the policy: the oracle as one bash call, then (once its result came back) a stop; an instruction starting HANG gets no answer */
function script(r: Received) {
  const messages: any[] = r.body?.messages ?? [];
  if (messages.some((m) => m.role === 'user' && String(m.content).startsWith('HANG'))) return { kind: 'hang' as const };
  const toolResult = messages.some((m) => m.role === 'tool');
  const call = { id: 'call_1', name: 'bash', arguments: JSON.stringify({ command: ORACLE }) };
  if (r.body?.stream) return { kind: 'sse' as const, events: toolResult ? chatChunks(['Fixed', '.']) : chatChunks([], { toolCalls: [call] }) };
  return { kind: 'json' as const, body: toolResult ? chatCompletion('Fixed.') : chatCompletion(null, { toolCalls: [call] }) };
}

/** run as a harness: tries the door (own key, none), the server's API, the upstream and the engine at the door's host, the internet, a raw socket */
const PROBE = `
import json, os, socket, urllib.error, urllib.parse, urllib.request
base = os.environ["OPENAI_BASE_URL"]; key = os.environ["OPENAI_API_KEY"]; host = urllib.parse.urlparse(base).hostname
def get(url, key=None):
    try:
        return urllib.request.urlopen(urllib.request.Request(url, headers={"Authorization": "Bearer " + key} if key else {}), timeout=3).status
    except urllib.error.HTTPError as e:
        return e.code
    except Exception as e:
        return type(e).__name__
def tcp(h, p):
    try:
        socket.create_connection((h, int(p)), timeout=3).close(); return "open"
    except Exception as e:
        return type(e).__name__
def raw():
    try:
        socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP).close(); return "open"
    except Exception as e:
        return type(e).__name__
print("PROBE " + json.dumps({"own": get(base + "/models", key), "none": get(base + "/models"), "api": tcp(host, os.environ["API_PORT"]),
    "upstream": tcp(host, os.environ["UPSTREAM_PORT"]), "engine": tcp(host, 2375), "internet": tcp("1.1.1.1", 80), "raw": raw()}))
`;

async function waitOverWs(c: WsClient, first: any): Promise<any> {
  let r = first;
  for (let i = 0; i < 200 && !r.data?.done; i++) r = await c.call('wait', { timeout_s: 5 });
  return r.data;
}

describeDocker('harness episodes: the server runs the harness in the env, through the gateway', () => {
  let upstream: FakeUpstream;
  let srv: ServerProcess;
  let apiPort: number;
  const instance = uniqueInstance('harness-ep');
  const bundle = join(mkdtempSync(join(tmpdir(), 'harness-ep-')), 'bundle');
  const post = async (path: string, body: unknown) => {
    const res = await fetch(`${srv.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    return { status: res.status, body: (await res.json()) as any };
  };
  const envsOf = (episodeId: string) => labelledResources(`${EPISODE_LABEL}=${episodeId}`);

  beforeAll(async () => {
    ensureDebianBase();
    upstream = await startFakeUpstream(script);
    apiPort = await freePort();
    execFileSync(
      process.execPath,
      [CLI, 'import', 'harbor', join(DATASET, TASK), '--out', bundle, '--base-image', BASE_IMAGE_RULE, '--agent', `python3 ${HARNESS.shippedPath}`],
      { stdio: 'pipe' },
    );
    // the same task (its env, its verifier) with harnesses of its own: streamed, hung, with a short budget, a probe
    const row = JSON.parse(readFileSync(join(bundle, 'tasks/train.jsonl'), 'utf8').trim().split('\n')[0]!);
    const hang = { turns: [`HANG ${row.turns[0]}`] };
    const variants = [
      { task_id: `${TASK}-stream`, harness: { command: ['python3', HARNESS.shippedPath, '--stream'] } },
      { task_id: `${TASK}-hang`, ...hang },
      { task_id: `${TASK}-budget`, ...hang, harness: { command: ['python3', HARNESS.shippedPath], timeout_s: 3 } },
      {
        task_id: `${TASK}-probe`,
        harness: { command: ['python3', '-c', PROBE], env: { API_PORT: String(apiPort), UPSTREAM_PORT: new URL(upstream.baseUrl).port } },
      },
    ];
    appendFileSync(join(bundle, 'tasks/train.jsonl'), variants.map((v) => JSON.stringify({ ...row, golden: undefined, ...v })).join('\n') + '\n');
    srv = await spawnServer(
      [
        bundle,
        '--port',
        String(apiPort),
        '--instance',
        instance,
        '--subnet-pool',
        POOL,
        '--max-concurrent-envs',
        '2',
        '--network-stock',
        '0',
        '--model-url',
        upstream.baseUrl,
        '--model',
        'policy',
        '--gateway-port',
        '0',
      ],
      {},
      300_000,
    );
  }, 360_000);

  afterAll(async () => {
    if (srv && srv.child.exitCode === null) {
      srv.child.kill('SIGTERM');
      expect((await srv.exited).code).toBe(0);
    }
    await upstream?.close();
    rmSync(join(bundle, '..'), { recursive: true, force: true });
    expect(labelledResources(`${INSTANCE_LABEL}=${instance}`)).toEqual({ containers: [], networks: [] });
  });

  it('the imported task, whole replies over /ws: the server runs the harness, the oracle scores 1, every call in the transcript', async () => {
    const c = await WsClient.open(srv.url);
    const reset = await c.reset({ task_id: TASK }, 120_000);
    expect(reset.type, JSON.stringify(reset)).toBe('observation');
    expect(reset.data.observation).toMatchObject({ harness: true, tools: [{ name: 'wait' }] });
    const id = reset.data.observation.episode_id as string;
    const before = upstream.received.length;
    const end = await waitOverWs(c, await c.call('wait', { timeout_s: 5 }));
    expect(end, JSON.stringify(end)).toMatchObject({
      done: true,
      reward: 1,
      observation: { end_reason: 'turns_ended', scores: { reward: 1 }, harness: { ended: 'exited', exit_code: 0, model_calls: 2, running: false } },
    });
    expect(end.observation.harness.output_tail).toContain('Fixed.');
    // the ending reply of a harness episode says what its env cost, as every ending does
    expect(end.observation.metadata.cost.wall_s).toBeGreaterThan(0);
    expect(end.observation.metadata.cost.cpu_s).toBeGreaterThan(0);
    const got = upstream.received.slice(before).filter((x) => x.path === '/v1/chat/completions');
    expect(got.map((x) => [x.body.model, Boolean(x.body.stream)])).toEqual([
      ['policy', false],
      ['policy', false],
    ]);
    const t = (await (await fetch(`${srv.url}/console/episodes/${id}`)).json()) as any;
    expect(t.events.filter((e: any) => e.kind === 'model_call' && e.api === 'openai.chat').map((e: any) => [e.stream, e.outcome])).toEqual([
      [false, 'ok'],
      [false, 'ok'],
    ]);
    expect(t.events.find((e: any) => e.kind === 'harness')).toMatchObject({ turn: 1, ended: 'exited', exit_code: 0 });
    expect(t.events.find((e: any) => e.kind === 'verifier')).toMatchObject({ status: 'scored', scores: { reward: 1 } });
    // the next step after the ending is refused
    expect((await c.call('wait', {})).data).toMatchObject({ reason: 'episode_done' });
    await c.close();
  });

  it('a harness of its own with streamed replies, over /episodes: scored 1, the streamed calls reassembled', async () => {
    const started = await post('/episodes', { task_id: `${TASK}-stream` });
    expect(started.status, JSON.stringify(started.body)).toBe(201);
    const id = started.body.episode_id as string;
    expect(started.body.observation.harness).toBe(true);
    let r = await post(`/episodes/${id}/step`, { type: 'call_tool', tool_name: 'wait', arguments: { timeout_s: 5 } });
    for (let i = 0; i < 200 && !r.body.done; i++) {
      expect(r.body.observation.result.data).toMatchObject({ turn: 1 });
      r = await post(`/episodes/${id}/step`, { type: 'call_tool', tool_name: 'wait', arguments: { timeout_s: 5 } });
    }
    expect(r.body, JSON.stringify(r.body)).toMatchObject({
      done: true,
      reward: 1,
      observation: { harness: { ended: 'exited', exit_code: 0, model_calls: 2 } },
    });
    const t = (await (await fetch(`${srv.url}/console/episodes/${id}`)).json()) as any;
    const calls = t.events.filter((e: any) => e.kind === 'model_call' && e.api === 'openai.chat');
    expect(calls.map((e: any) => [e.stream, e.outcome])).toEqual([
      [true, 'ok'],
      [true, 'ok'],
    ]);
    expect(JSON.stringify(calls[0].response)).toContain('stats.py');
  });

  it('a harness in a shell env finds only its own door open: no key is refused, the API, the upstream, the engine, the internet and raw sockets are closed (over MCP)', async () => {
    const created = await post('/mcp', { jsonrpc: '2.0', id: 1, method: 'openenv/session/create', params: { task_id: `${TASK}-probe` } });
    const sid = created.body.result?.session_id as string;
    expect(sid, JSON.stringify(created.body)).toBeTruthy();
    let r: any;
    for (let i = 0; i < 100; i++) {
      r = (await post('/mcp', { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { session_id: sid, name: 'wait', arguments: { timeout_s: 5 } } })).body
        .result;
      if (r.done) break;
    }
    expect(r).toMatchObject({ done: true, harness: { ended: 'exited', exit_code: 0 } });
    const line = /PROBE (.*)/.exec(r.harness.output_tail as string)?.[1];
    expect(line, r.harness.output_tail).toBeTruthy();
    const probe = JSON.parse(line!);
    expect(probe.own).toBe(200);
    expect(probe.none).toBe(401);
    for (const k of ['api', 'upstream', 'engine', 'internet']) expect(probe[k], k).toMatch(/ConnectionRefusedError|TimeoutError|OSError|ConnectionResetError/);
    expect(probe.raw).toBe('PermissionError');
  });

  it('the client cancels a harness mid-run (close): the model call is cut short, nothing of the episode is left', async () => {
    const c = await WsClient.open(srv.url);
    const seen = upstream.received.length;
    const reset = await c.reset({ task_id: `${TASK}-hang` }, 120_000);
    const id = reset.data.observation.episode_id as string;
    await upstream.receivedN(seen + 1);
    const mid = await c.call('wait', { timeout_s: 1 });
    expect(mid.data).toMatchObject({ done: false, observation: { result: { data: { running: true, turn: 1 } } } });
    expect(envsOf(id).containers).toHaveLength(1);
    await c.close();
    await waitFor(() => envsOf(id).containers.length === 0 && envsOf(id).networks.length === 0, 60_000, 'the episode torn down', 500);
    await waitFor(() => upstream.openResponses() === 0, 30_000, 'the hung model call closed', 200);
    const t = (await (await fetch(`${srv.url}/console/episodes/${id}`)).json()) as any;
    expect(t.events.find((e: any) => e.kind === 'end')).toMatchObject({ end_reason: 'closed', reward: null });
    expect(t.events.find((e: any) => e.kind === 'model_call' && e.api === 'openai.chat')).toMatchObject({ outcome: 'cut_short' });
  });

  it("the harness's time budget ends the episode: the harness is killed (exit 137), the verifier scores what it left, the ending says why", async () => {
    const c = await WsClient.open(srv.url);
    const reset = await c.reset({ task_id: `${TASK}-budget` }, 120_000);
    const end = await waitOverWs(c, await c.call('wait', { timeout_s: 5 }));
    expect(end, JSON.stringify(end)).toMatchObject({
      done: true,
      reward: 0,
      observation: { end_reason: 'turns_ended', harness: { ended: 'time_budget', exit_code: 137, model_calls: 1 } },
    });
    expect(end.observation.harness.elapsed_s).toBeGreaterThanOrEqual(3);
    await waitFor(() => envsOf(reset.data.observation.episode_id).containers.length === 0, 60_000, 'the episode torn down', 500);
    await c.close();
  });

  it('eval plays a harness task by waiting, with no --model-url: the harness scores 1, eval itself makes no model turn, the harness calls are recorded', async () => {
    const out = join(bundle, '..', 'eval-out');
    const seen = upstream.received.length;
    await promisify(execFile)(process.execPath, [CLI, 'eval', srv.url, '--split', 'train', '--tasks', '1', '--out', out], { timeout: 300_000 });
    const [rec] = readFileSync(join(out, 'episodes.jsonl'), 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(rec).toMatchObject({ task_id: TASK, reward: 1, end_reason: 'turns_ended', failure: null, model_turns: 0, tool_calls: [] });
    // the harness's calls went through the gateway to the server's upstream, and the record has them
    const calls = upstream.received.length - seen;
    expect(calls).toBeGreaterThan(0);
    expect(rec.harness).toMatchObject({ model_calls: calls, ended: 'exited' });
    expect(rec.harness.model_tokens).toBeGreaterThan(0);
  });

  it('SIGTERM to the server mid-harness drains it: the harness episode ends, nothing is left', async () => {
    const c = await WsClient.open(srv.url);
    const seen = upstream.received.length;
    const reset = await c.reset({ task_id: `${TASK}-hang` }, 120_000);
    const id = reset.data.observation.episode_id as string;
    await upstream.receivedN(seen + 1);
    expect(envsOf(id).containers).toHaveLength(1);
    srv.child.kill('SIGTERM');
    expect((await srv.exited).code).toBe(0);
    expect(labelledResources(`${INSTANCE_LABEL}=${instance}`)).toEqual({ containers: [], networks: [] });
    await waitFor(() => upstream.openResponses() === 0, 30_000, 'the hung model call closed', 200);
    await c.close().catch(() => undefined);
  });
});
