/**
 * The shipped harness in an env on real Docker, through the gateway the server serves: an env
 * built FROM the offline Debian base (python3) runs harness/openenv_harness.py on its task's
 * instruction (the env's own tool starts it, as a harness episode would once the server runs it
 * itself: docs/gateway.md), with the credential and door it was given; the scripted upstream on
 * 127.0.0.1 answers with a bash call, then stops; the episode is scored by what the harness left,
 * whole and streamed, and every model call is in the transcript.
 */
import { cpSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { WsClient } from '../../scripts/lib/ws-client.js';
import { describeDocker, labelledResources, LOCAL_NODE_IMAGE, uniqueInstance } from '../support/docker.js';
import { INSTANCE_LABEL } from '../support/docker-server.js';
import { spawnServer, type ServerProcess } from '../support/serve-process.js';
import { chatChunks, chatCompletion, startFakeUpstream, type FakeUpstream, type Received } from './support/fake-upstream.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const DEBIAN_IMAGE = process.env.OPENENV_TEST_DEBIAN_IMAGE ?? 'openenv-local/debian:bookworm';
const POOL = `10.223.${Math.floor(Math.random() * 250)}.0/24`;

/** the policy: a bash call that writes the answer, then (once a tool result came back) a stop */
function script(r: Received) {
  const toolResult = (r.body?.messages ?? []).some((m: any) => m.role === 'tool');
  const call = { id: 'call_1', name: 'bash', arguments: JSON.stringify({ command: 'echo 42 > answer.txt' }) };
  if (r.body?.stream) return { kind: 'sse' as const, events: toolResult ? chatChunks(['Done', '.']) : chatChunks([], { toolCalls: [call] }) };
  return { kind: 'json' as const, body: toolResult ? chatCompletion('Done.') : chatCompletion(null, { toolCalls: [call] }) };
}

describeDocker('the shipped harness in an env, through the served gateway', () => {
  let upstream: FakeUpstream;
  let srv: ServerProcess;
  const instance = uniqueInstance('gw-harness');
  const bundle = join(mkdtempSync(join(tmpdir(), 'gw-harness-')), 'harness-v1');

  beforeAll(async () => {
    cpSync(join(ROOT, 'test/fixtures/harness-v1'), bundle, { recursive: true });
    cpSync(join(ROOT, 'harness/openenv_harness.py'), join(bundle, 'envs/harness/openenv_harness.py'));
    upstream = await startFakeUpstream(script);
    srv = await spawnServer([
      bundle,
      '--port',
      '0',
      '--instance',
      instance,
      '--build-arg',
      `DEBIAN_IMAGE=${DEBIAN_IMAGE}`,
      '--build-arg',
      `NODE_IMAGE=${LOCAL_NODE_IMAGE}`,
      '--subnet-pool',
      POOL,
      '--max-concurrent-envs',
      '2',
      '--model-url',
      upstream.baseUrl,
      '--model',
      'policy',
    ]);
  }, 300_000);
  afterAll(async () => {
    if (srv && srv.child.exitCode === null) {
      srv.child.kill('SIGTERM');
      expect((await srv.exited).code).toBe(0);
    }
    await upstream?.close();
    rmSync(join(bundle, '..'), { recursive: true, force: true });
    expect(labelledResources(`${INSTANCE_LABEL}=${instance}`)).toEqual({ containers: [], networks: [] });
  });

  for (const stream of [false, true]) {
    it(`scores the harness's work end to end (${stream ? 'streamed' : 'whole'} replies), every call in the transcript`, async () => {
      const c = await WsClient.open(srv.url);
      const reset = await c.reset({ task_id: 'answer-0' }, 60_000);
      expect(reset.type, JSON.stringify(reset)).toBe('observation');
      const id = reset.data.observation.episode_id as string;
      const before = upstream.received.length;
      const r = await c.call('run_harness', { stream });
      const ran = r.data.observation.result?.data;
      expect(ran?.exit_code, JSON.stringify(ran)).toBe(0);
      expect(r.data).toMatchObject({ done: true, reward: 1 });
      // the harness named the server's model, streamed or not as asked, through the gateway
      const got = upstream.received.slice(before).filter((x) => x.path === '/v1/chat/completions');
      expect(got).toHaveLength(2);
      for (const x of got) expect([x.body.model, Boolean(x.body.stream)]).toEqual(['policy', stream]);
      const t = (await (await fetch(`${srv.url}/console/episodes/${id}`)).json()) as any;
      const calls = t.events.filter((e: any) => e.kind === 'model_call' && e.api === 'openai.chat');
      expect(calls.map((e: any) => [e.stream, e.status, e.outcome])).toEqual([
        [stream, 200, 'ok'],
        [stream, 200, 'ok'],
      ]);
      expect(JSON.stringify(calls[0].response)).toContain('echo 42 > answer.txt');
      await c.close();
    });
  }
});
