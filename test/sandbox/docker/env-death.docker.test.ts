/**
 * An env whose container dies is noticed at once: between calls or during
 * one, the episode ends env_failed with env_crashed, the exit code and the log tail, well within
 * the tool timeout, never as a tool_timeout.
 */
import { execFileSync } from 'node:child_process';
import { expect, it } from 'vitest';
import { describeDocker, labelledResources, waitFor } from '../../support/docker.js';
import { suiteServer } from '../../support/docker-server.js';
import { WsClient } from '../../../scripts/lib/ws-client.js';

const EPISODE_LABEL = 'io.openenv.bundle-server.episode';
/** long enough that reaching it is a failure of the test, not a race */
const TOOL_TIMEOUT_S = 45;

function episodeContainer(episodeId: string): string {
  const ids = labelledResources(`${EPISODE_LABEL}=${episodeId}`).containers;
  expect(ids).toHaveLength(1);
  return ids[0]!;
}

describeDocker('an env killed on the engine', () => {
  const s = suiteServer({ toolTimeout: TOOL_TIMEOUT_S, maxConcurrentEnvs: 2 });
  const idle = () => waitFor(() => s.app.openenv.admission.activeCount === 0 && s.app.openenv.manager.list().length === 0, 30_000, 'all slots free');

  it('between calls: the episode ends env_crashed with exit code 137 and a log tail, at once, and is torn down', async () => {
    const c = await WsClient.open(s.url);
    const reset = await c.reset({ task_id: 'fx-echo-0' });
    const episodeId = reset.data.observation.episode_id as string;
    const ok = await c.call('echo', { text: 'alive' });
    expect(ok.data.observation.result.content[0].text).toBe('alive');
    execFileSync('docker', ['kill', '--signal', 'KILL', episodeContainer(episodeId)], { stdio: 'pipe' });
    // nobody calls: the server notices the death by itself and removes the env and its network
    await waitFor(() => labelledResources(`${EPISODE_LABEL}=${episodeId}`).containers.length === 0, (TOOL_TIMEOUT_S - 15) * 1000, 'the dead env torn down');
    const started = Date.now();
    const r = await c.call('echo', { text: 'are you there?' });
    expect(r.data).toMatchObject({ done: true, reward: null });
    expect(r.data.observation.end_reason).toBe('env_failed');
    expect(r.data.observation.failure).toMatchObject({ reason: 'env_crashed', exit_code: 137 });
    expect(r.data.observation.failure.log_tail).toMatch(/listening on 0\.0\.0\.0:8000/);
    expect(r.data.observation.error.error_type).toBe('transport_error');
    expect(Date.now() - started).toBeLessThan(TOOL_TIMEOUT_S * 1000);
    await c.close();
    await idle();
  });

  it('during a call: the call is cut short as env_crashed with exit code 137 and a log tail, not a tool_timeout', async () => {
    const c = await WsClient.open(s.url);
    const reset = await c.reset({ task_id: 'fx-echo-1' });
    const episodeId = reset.data.observation.episode_id as string;
    const started = Date.now();
    const pending = c.call('sleep', { seconds: TOOL_TIMEOUT_S - 5 });
    const container = episodeContainer(episodeId);
    // most likely in the env by now; either way the kill lands while the call is pending
    await new Promise((r) => setTimeout(r, 500));
    execFileSync('docker', ['kill', '--signal', 'KILL', container], { stdio: 'pipe' });
    const r = await pending;
    expect(r.data).toMatchObject({ done: true, reward: null });
    expect(r.data.observation.failure).toMatchObject({ reason: 'env_crashed', exit_code: 137 });
    expect(r.data.observation.failure.log_tail).toMatch(/listening on 0\.0\.0\.0:8000/);
    expect(Date.now() - started).toBeLessThan((TOOL_TIMEOUT_S - 5) * 1000);
    await c.close();
    await idle();
  });
});
