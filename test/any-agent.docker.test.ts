/**
 * Any agent, any model, once on real env containers (the fast layer covers both with the envs as
 * processes): the official MCP SDK plays a task to its reward over a standard session, and
 * `openenv-bundle eval` plays the fixture's eval split with a scripted chat-completions model.
 */
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { cli } from '../src/cli/openenv-bundle.js';
import type { EvalSummary } from '../src/eval/summary.js';
import { LABELS } from '../src/sandbox/sandbox.js';
import { describeDocker, labelledResources, waitFor } from './support/docker.js';
import { suiteServer } from './support/docker-server.js';
import { fixtureGolden } from './support/fixture-policy.js';
import { startScriptedModel, type ScriptedModel } from './support/scripted-model.js';

describeDocker('standard MCP and eval on real Docker', () => {
  const s = suiteServer({ maxConcurrentEnvs: 2 });
  let model: ScriptedModel;
  let tmp: string;
  beforeAll(async () => {
    model = await startScriptedModel(fixtureGolden);
    tmp = await mkdtemp(join(tmpdir(), 'openenv-any-agent-'));
  });
  afterAll(async () => {
    await model?.close();
    await rm(tmp, { recursive: true, force: true });
  });

  it('the official SDK plays a task in a container to its reward; DELETE removes the container', async () => {
    const transport = new StreamableHTTPClientTransport(new URL(`${s.url}/mcp?task_id=fx-echo-1`));
    const client = new Client({ name: 'docker-test', version: '1.0.0' });
    await client.connect(transport);
    expect(client.getInstructions()).toContain('Echo the word world');
    expect((await client.callTool({ name: 'echo', arguments: { text: 'world' } })).content).toEqual([{ type: 'text', text: 'world' }]);
    const ended = await client.callTool({ name: 'end_turn', arguments: {} });
    const { episode_id: id, reward } = ended.structuredContent as { episode_id: string; reward: number };
    expect(reward).toBe(1);
    await transport.terminateSession();
    await client.close();
    await waitFor(() => labelledResources(`${LABELS.episode}=${id}`).containers.length === 0, 30_000, 'the container removed');
  });

  it('eval plays the eval split in containers: the golden mean', async () => {
    const out = join(tmp, 'eval');
    const io = { stdout: { write: () => true }, stderr: { write: () => true }, env: {} };
    expect(await cli(['eval', s.url, '--model-url', model.url, '--model', 'scripted', '--out', out], io)).toBe(0);
    const summary = JSON.parse(await readFile(join(out, 'summary.json'), 'utf8')) as EvalSummary;
    expect(summary).toMatchObject({ played: 2, failures: { total: 0 } });
    expect(summary.scored.mean).toBeCloseTo(0.5, 12);
  });
});
