/**
 * Env failures end the episode as env_failed (never a reward) and free the slot; injected deploy,
 * tool-call and teardown failures never leak a slot or hurt another episode.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SandboxError, type DeployRequest, type EnvHandle, type TeardownOptions } from '../../src/sandbox/sandbox.js';
import { DelegatingSandbox } from '../support/delegating-sandbox.js';
import { startProcessServer, type ProcessServer } from '../support/process-server.js';
import { waitFor } from '../../scripts/lib/wait.js';
import { WsClient } from '../../scripts/lib/ws-client.js';

/** a real sandbox whose deploy or teardown fails on demand */
class FaultySandbox extends DelegatingSandbox {
  failNextDeploy = false;
  failTeardowns = 0;
  override async deploy(req: DeployRequest): Promise<EnvHandle> {
    if (this.failNextDeploy) {
      this.failNextDeploy = false;
      throw new SandboxError('engine_failed', 'injected deploy failure');
    }
    return this.inner.deploy(req);
  }
  override async teardown(id: string, opts?: TeardownOptions) {
    if (this.failTeardowns > 0) {
      this.failTeardowns--;
      throw new Error('injected teardown failure');
    }
    return this.inner.teardown(id, opts);
  }
}

describe('env failures', () => {
  let s: ProcessServer;
  let faulty: FaultySandbox;
  beforeAll(async () => {
    s = await startProcessServer(
      { maxConcurrentEnvs: 2, toolTimeout: 2, reconcileIntervalMs: 500 },
      { wrap: (sandbox) => (faulty = new FaultySandbox(sandbox)) },
    );
  });
  afterAll(async () => {
    // fails if an env process outlived the app
    await s?.stop();
  });

  const idle = () => waitFor(() => s.app.openenv.admission.activeCount === 0 && s.app.openenv.manager.list().length === 0, 30_000, 'all slots free');

  it('a tool call past the tool timeout ends the episode as env_failed/tool_timeout and frees the slot', async () => {
    const c = await WsClient.open(s.url);
    await c.reset({ task_id: 'fx-echo-0' });
    const r = await c.call('sleep', { seconds: 10 });
    expect(r.data).toMatchObject({ done: true, reward: null });
    expect(r.data.observation).toMatchObject({
      end_reason: 'env_failed',
      failure: { reason: 'tool_timeout', phase: 'tool', retryable: true, task_id: 'fx-echo-0' },
    });
    expect(r.data.observation.failure.message).toMatch(/`sleep` did not answer within tool_timeout \(2 s\)/);
    expect(r.data.observation.reward).toBeNull();
    expect(r.data.observation.error.error_type).toBe('timeout');
    await idle();
    await c.close();
  });

  it('a crashed env ends the episode as env_failed/env_crashed with its exit code and log tail', async () => {
    const c = await WsClient.open(s.url);
    await c.reset({ task_id: 'fx-echo-1' });
    const r = await c.call('crash', { code: 7 });
    expect(r.data).toMatchObject({ done: true, reward: null });
    expect(r.data.observation.end_reason).toBe('env_failed');
    expect(r.data.observation.failure).toMatchObject({ reason: 'env_crashed', exit_code: 7, retryable: true });
    expect(r.data.observation.error.error_type).toBe('transport_error');
    expect(typeof r.data.observation.failure.log_tail).toBe('string');
    await idle();
    // the session goes on: a new episode plays normally
    const again = await c.reset({ task_id: 'fx-echo-1' });
    expect(again.type).toBe('observation');
    await c.close();
    await idle();
  });

  it('an injected deploy failure answers EXECUTION_ERROR with a failure and frees the slot', async () => {
    faulty.failNextDeploy = true;
    const c = await WsClient.open(s.url);
    const r = await c.reset({ task_id: 'fx-echo-0' });
    expect(r).toMatchObject({ type: 'error', data: { code: 'EXECUTION_ERROR', failure: { reason: 'engine_error', phase: 'deploy' } } });
    await idle();
    const ok = await c.reset({ task_id: 'fx-echo-0' });
    expect(ok.type).toBe('observation');
    await c.close();
    await idle();
  });

  it('an injected teardown failure frees the slot anyway, and the reconciler removes the stray env', async () => {
    faulty.failTeardowns = 1;
    const c = await WsClient.open(s.url);
    await c.reset({ task_id: 'fx-echo-0' });
    await c.close();
    await idle();
    expect(s.sandbox.held()).toHaveLength(1);
    // the env process is still there until the reconciler (every 500 ms here) removes it
    await waitFor(() => s.app.openenv.manager.straysRemoved >= 1, 20_000, 'stray removed');
    expect(s.sandbox.held()).toEqual([]);
    expect(s.logs()).toMatch(/"event":"stray_removed"/);
  });

  it('one episode failing never hurts another running beside it', async () => {
    const a = await WsClient.open(s.url);
    const b = await WsClient.open(s.url);
    await Promise.all([a.reset({ task_id: 'fx-echo-0' }), b.reset({ task_id: 'fx-echo-1' })]);
    const [crash, echo] = await Promise.all([a.call('crash', {}), b.call('echo', { text: 'still here' })]);
    expect(crash.data.observation.failure.reason).toBe('env_crashed');
    expect(echo.data.observation.result.content[0].text).toBe('still here');
    const end = await b.call('end_turn', {});
    expect(end.data.reward).toBe(1); // fx-echo-1 scores quality 1
    await Promise.all([a.close(), b.close()]);
    await idle();
  });
});
