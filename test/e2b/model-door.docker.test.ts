/**
 * The model gateway as a sandbox's door to a model API (--e2b-model-door, docs/e2b.md), proven
 * from inside sandboxes the real SDK created, with a Python client run by `commands.run` as a
 * harness would be, against a scripted upstream model:
 *
 * - each sandbox has the four variables the OpenAI and Anthropic SDKs read; its calls through
 *   them are answered by the upstream, recorded in its transcript and counted against the
 *   server's budgets (the call past --model-calls refused, the sandbox told why); its credential
 *   never goes upstream, no key or another sandbox's is refused; another sandbox's door, the
 *   server's API and any other listener of the host are closed to it (the rules of its own), and
 *   the rules go with it;
 * - with --e2b-model-door-host, a harness configured outside the sandbox as slime's is (a host
 *   name and a port computed on the trainer, the session id as its key) reaches the door by that
 *   name, and its key goes upstream as its bearer.
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { connect, createServer, type Server } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Sandbox } from 'e2b';
import { freePort } from '../../scripts/lib/free-port.js';
import { describeDocker, labelledResources } from '../support/docker.js';
import { startScriptedModel, type ScriptedModel } from '../support/scripted-model.js';
import { INSTANCE_LABEL, startE2bServer, TEMPLATE, type E2bServer } from './helpers.js';

/** a harness's model call: POST {base}/chat/completions with the key as its bearer; prints `status content-or-error-code`, or ERR */
const CLIENT = `import json, sys, urllib.request, urllib.error
base, key, prompt = sys.argv[1], sys.argv[2], sys.argv[3]
headers = {"content-type": "application/json"}
if key:
    headers["authorization"] = "Bearer " + key
body = json.dumps({"model": "any", "messages": [{"role": "user", "content": prompt}]}).encode()
try:
    with urllib.request.urlopen(urllib.request.Request(base + "/chat/completions", data=body, headers=headers), timeout=20) as r:
        print(r.status, json.loads(r.read())["choices"][0]["message"]["content"])
except urllib.error.HTTPError as e:
    print(e.code, json.loads(e.read())["error"].get("code"))
except Exception as e:
    print("ERR", type(e).__name__)
`;

async function withClient(sb: Sandbox): Promise<void> {
  await sb.files.write('/tmp/client.py', CLIENT);
}

/** from inside the sandbox: the client's one line for a call to `base` with `key` ('' for none); shell words are expanded */
async function callModel(sb: Sandbox, base: string, key: string, prompt: string, envs: Record<string, string> = {}): Promise<string> {
  const r = await sb.commands.run(`python3 /tmp/client.py ${base} ${key || "''"} ${prompt}`, { user: 'root', envs, timeoutMs: 60_000 });
  return r.stdout.trim();
}

/** from inside the sandbox: whether a TCP connection to ip:port opens, and how long finding out took */
async function reach(sb: Sandbox, ip: string, port: number): Promise<{ ok: boolean; ms: number }> {
  const started = Date.now();
  const ok = await sb.commands.run(`timeout 10 bash -c 'exec 3<>/dev/tcp/${ip}/${port}'`, { user: 'root', timeoutMs: 30_000 }).then(
    () => true,
    () => false,
  );
  return { ok, ms: Date.now() - started };
}

/** the sandbox's egress chains of a server instance on this host (egress-rules.ts's names) */
function ourChains(instance: string): string[] {
  const tag = createHash('sha256').update(instance).digest('hex').slice(0, 6);
  const out = execFileSync('iptables', ['-w', '-S'], { encoding: 'utf8' });
  return out.split('\n').flatMap((l) => (/^-N (OE[FI]\S+)$/.exec(l)?.[1]?.includes(tag) ? [l] : []));
}

async function transcript(s: E2bServer, id: string): Promise<any> {
  return (await fetch(`${s.url}/console/episodes/${id}`, { headers: { authorization: `Bearer ${s.token}` } })).json();
}

async function stop(s: E2bServer | undefined): Promise<void> {
  if (!s) return;
  s.proc.child.kill('SIGTERM');
  expect((await s.proc.exited).code).toBe(0);
  expect(labelledResources(`${INSTANCE_LABEL}=${s.instance}`)).toEqual({ containers: [], networks: [] });
  expect(ourChains(s.instance)).toEqual([]);
}

describeDocker('the model gateway as the door of a sandbox', () => {
  let model: ScriptedModel;
  beforeAll(async () => {
    model = await startScriptedModel((req) => ({ content: `re: ${req.messages.at(-1)?.content}` }));
  });
  afterAll(async () => {
    await model?.close();
  });

  describe('--e2b-model-door: a door with a credential of its own', () => {
    let s: E2bServer;
    let greeter: Server;
    let greeterPort: number;
    const sdk = () => ({ apiKey: s.token, apiUrl: s.env.E2B_API_URL, sandboxUrl: s.env.E2B_SANDBOX_URL });
    beforeAll(async () => {
      // a service of the host on every address: without the sandbox's rules it would answer at its bridge's address
      greeter = createServer((c) => c.end('hello\n'));
      await new Promise<void>((r) => greeter.listen(0, '0.0.0.0', r));
      greeterPort = (greeter.address() as { port: number }).port;
      s = await startE2bServer(['--host', '0.0.0.0', '--model-url', model.url, '--e2b-model-door', '--gateway-port', '0', '--model-calls', '2']);
    });
    afterAll(async () => {
      greeter?.close();
      await stop(s);
    });

    it('answers the calls of a harness in the sandbox, records them in its transcript, counts them against the budget, and opens nothing else', async () => {
      const a = await Sandbox.create(TEMPLATE, { ...sdk(), timeoutMs: 300_000 });
      const b = await Sandbox.create(TEMPLATE, { ...sdk(), timeoutMs: 300_000 });
      try {
        const vars = async (sb: Sandbox) =>
          Object.fromEntries(
            (await sb.commands.run('env | grep -E "^(OPENAI|ANTHROPIC)_"', { user: 'root' })).stdout
              .trim()
              .split('\n')
              .map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]),
          ) as Record<string, string>;
        const va = await vars(a);
        const vb = await vars(b);
        const door = new URL(va.OPENAI_BASE_URL!);
        expect(va).toEqual({
          OPENAI_BASE_URL: `${door.origin}/v1`,
          OPENAI_API_KEY: expect.stringMatching(/^oeg-/),
          ANTHROPIC_BASE_URL: door.origin,
          ANTHROPIC_API_KEY: va.OPENAI_API_KEY,
        });
        expect(vb.OPENAI_API_KEY).not.toBe(va.OPENAI_API_KEY);
        expect(new URL(vb.OPENAI_BASE_URL!).hostname).not.toBe(door.hostname);
        await withClient(a);

        // the harness's call, through the variables of its own sandbox
        expect(await callModel(a, '"$OPENAI_BASE_URL"', '"$OPENAI_API_KEY"', 'first')).toBe('200 re: first');
        expect(model.authorizations.at(-1)).toBeNull();
        expect(JSON.stringify(model.requests)).not.toContain(va.OPENAI_API_KEY);
        // no key, another sandbox's key: refused at the door, nothing upstream
        const sent = model.requests.length;
        expect(await callModel(a, '"$OPENAI_BASE_URL"', '', 'nokey')).toBe('401 unauthorized');
        expect(await callModel(a, '"$OPENAI_BASE_URL"', vb.OPENAI_API_KEY!, 'bkey')).toBe('401 unauthorized');
        expect(model.requests.length).toBe(sent);

        // closed to it: b's door, the server's API, a service of the host, each refused at once
        const closed = {
          "b's door": await reach(a, new URL(vb.OPENAI_BASE_URL!).hostname, Number(new URL(vb.OPENAI_BASE_URL!).port)),
          "the server's API at the door's address": await reach(a, door.hostname, Number(new URL(s.url).port)),
          'a service of the host at the door address': await reach(a, door.hostname, greeterPort),
        };
        for (const [what, r] of Object.entries(closed)) {
          expect(r.ok, what).toBe(false);
          expect(r.ms, `${what} is refused at once`).toBeLessThan(5000);
        }
        expect(await readFrom('127.0.0.1', greeterPort)).toBe('hello');
        expect((await reach(a, door.hostname, Number(door.port))).ok).toBe(true);

        // the budget (--model-calls 2): the second call goes, the third is refused, and the sandbox is told why
        expect(await callModel(a, '"$OPENAI_BASE_URL"', '"$OPENAI_API_KEY"', 'second')).toBe('200 re: second');
        expect(await callModel(a, '"$OPENAI_BASE_URL"', '"$OPENAI_API_KEY"', 'third')).toBe('429 model_calls_exhausted');
        // b's budget is its own
        await withClient(b);
        expect(await callModel(b, '"$OPENAI_BASE_URL"', '"$OPENAI_API_KEY"', 'from-b')).toBe('200 re: from-b');
        expect(await a.isRunning()).toBe(true);
      } finally {
        await a.kill();
        await b.kill();
      }
      const t = await transcript(s, a.sandboxId);
      const calls = t.events.filter((e: any) => e.kind === 'model_call');
      expect(calls.map((e: any) => [e.outcome, e.status])).toEqual([
        ['ok', 200],
        ['refused', 401],
        ['refused', 401],
        ['ok', 200],
        ['refused', 429],
      ]);
      expect(calls[0]).toMatchObject({ api: 'openai.chat', usage: { input_tokens: 10, output_tokens: 7, total_tokens: 17 } });
      expect(calls[0].response.choices[0].message.content).toBe('re: first');
      const ended = t.events.find((e: any) => e.kind === 'tool_call' && e.tool_name === 'model.access_ended');
      expect(ended).toMatchObject({ result: { reason: 'model_calls_exhausted' } });
      expect(ourChains(s.instance)).toEqual([]);
      const metrics = await (await fetch(`${s.url}/metrics`, { headers: { authorization: `Bearer ${s.token}` } })).text();
      expect(metrics).toMatch(/openenv_model_calls_total\{outcome="ok"\} 3/);
    });
  });

  describe("--e2b-model-door-host: a harness configured outside the sandbox, as slime's", () => {
    let s: E2bServer;
    let port: number;
    const sdk = () => ({ apiKey: s.token, apiUrl: s.env.E2B_API_URL, sandboxUrl: s.env.E2B_SANDBOX_URL });
    beforeAll(async () => {
      // slime's SHIM_PORT: the port its harness is given, the doors' port here
      port = await freePort();
      s = await startE2bServer(['--model-url', model.url, '--e2b-model-door-host', 'slime-head', '--gateway-port', String(port)]);
    });
    afterAll(async () => {
      await stop(s);
    });

    it("reaches its door by the name, with the session id as its key, which goes upstream as the bearer (the sandbox's credential never)", async () => {
      const sb = await Sandbox.create(TEMPLATE, { ...sdk(), timeoutMs: 300_000, metadata: { run: 'slime' } });
      try {
        await withClient(sb);
        const door = new URL((await sb.commands.run('echo $OPENAI_BASE_URL', { user: 'root' })).stdout.trim());
        expect(Number(door.port)).toBe(port);
        expect((await sb.commands.run('getent hosts slime-head', { user: 'root' })).stdout.split(/\s+/)[0]).toBe(door.hostname);
        // what slime's harness is given: its adapter URL from SLIME_HEAD_HOST and SHIM_PORT, the session id as its key
        const slime = { OPENAI_BASE_URL: `http://slime-head:${port}/v1`, OPENAI_API_KEY: 'cagent-task-7-0' };
        expect(await callModel(sb, '"$OPENAI_BASE_URL"', '"$OPENAI_API_KEY"', 'as-slime', slime)).toBe('200 re: as-slime');
        expect(model.authorizations.at(-1)).toBe('Bearer cagent-task-7-0');
        // the sandbox's own credential admits too, and stays at the door
        expect(await callModel(sb, '"$OPENAI_BASE_URL"', '"$OPENAI_API_KEY"', 'own-key')).toBe('200 re: own-key');
        expect(model.authorizations.at(-1)).toBeNull();
      } finally {
        await sb.kill();
      }
      const calls = (await transcript(s, sb.sandboxId)).events.filter((e: any) => e.kind === 'model_call');
      expect(calls.map((e: any) => e.outcome)).toEqual(['ok', 'ok']);
    });
  });
});

/** the first line a TCP listener greets a connection with, from this host */
function readFrom(host: string, port: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const c = connect({ host, port });
    let got = '';
    c.on('data', (d) => (got += d.toString()));
    c.on('end', () => resolve(got.trim()));
    c.on('error', reject);
  });
}
