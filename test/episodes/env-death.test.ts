/**
 * An env that dies during a call: whichever notices first, the engine's death signal (`gone`) or
 * the call's own failure, the call stays in the transcript and --record's final transcript, with
 * the failure the call's path decides. A death with no step in flight ends the episode at once.
 *
 * The process sandbox reports no `gone`; RaceSandbox adds one (aborted when the env process exits,
 * as the Docker events watcher does) and can hold the call's diagnosis back until the death signal
 * has been heard, which is the order that once lost the call.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Transcript } from '../../src/protocol/console.js';
import type { DeployRequest, EnvHandle } from '../../src/sandbox/sandbox.js';
import { DelegatingSandbox } from '../support/delegating-sandbox.js';
import type { ProcessSandbox } from '../support/process-sandbox.js';
import { startProcessServer, type ProcessServer } from '../support/process-server.js';
import { waitFor } from '../../scripts/lib/wait.js';
import { WsClient } from '../../scripts/lib/ws-client.js';

class RaceSandbox extends DelegatingSandbox<ProcessSandbox> {
  /** hold the first diagnosis of a dead env until its death signal has fired, and a while after */
  holdDiagnosis = false;
  private readonly gone = new Map<string, AbortController>();
  constructor(inner: ProcessSandbox) {
    super(inner);
    inner.events.on('exit', (episodeId: string) => this.gone.get(episodeId)?.abort(new Error('the env container died')));
  }
  override async deploy(req: DeployRequest): Promise<EnvHandle> {
    const handle = await this.inner.deploy(req);
    const gone = new AbortController();
    this.gone.set(req.envId, gone);
    return { ...handle, gone: gone.signal };
  }
  override async diagnose(h: EnvHandle) {
    const gone = this.gone.get(h.envId);
    if (this.holdDiagnosis && gone) {
      this.holdDiagnosis = false;
      if (!gone.signal.aborted) await new Promise((r) => gone.signal.addEventListener('abort', r, { once: true }));
      // long enough for a competing path to end the episode and tear it down
      await new Promise((r) => setTimeout(r, 300));
    }
    return this.inner.diagnose(h);
  }
}

describe('an env dying during a call', () => {
  let s: ProcessServer;
  let race: RaceSandbox;
  beforeAll(async () => {
    s = await startProcessServer({ maxConcurrentEnvs: 2 }, { wrap: (sandbox) => (race = new RaceSandbox(sandbox)) });
  });
  afterAll(async () => {
    await s?.stop();
  });

  /** the episode's transcript once it is torn down (what --record writes) */
  async function finalTranscript(id: string): Promise<Transcript> {
    await waitFor(() => s.app.openenv.manager.list().every((e) => e.id !== id), 30_000, 'the teardown');
    const t = s.app.openenv.history.transcript(id);
    if (!t) throw new Error(`no transcript of ${id}`);
    return t;
  }

  it.each([
    ['the call fails first, then the death signal', false],
    ['the death signal is heard while the call is being diagnosed', true],
  ])('keeps the call when %s', async (_order, hold) => {
    race.holdDiagnosis = hold;
    const c = await WsClient.open(s.url);
    const reset = await c.reset({ task_id: 'fx-echo-0' });
    const id = reset.data.observation.episode_id as string;
    const r = await c.call('crash', { code: 7 });
    expect(r.data.observation).toMatchObject({ tool_name: 'crash', end_reason: 'env_failed', failure: { reason: 'env_crashed', phase: 'tool', exit_code: 7 } });
    expect(r.data.observation.failure.message).toContain('tool `crash` failed');
    expect(r.data.observation.error.error_type).toBe('transport_error');
    const t = await finalTranscript(id);
    expect(t.events.map((e) => e.kind)).toEqual(['reset', 'tool_call', 'end']);
    expect(t.events[1]).toMatchObject({ tool_name: 'crash', arguments: { code: 7 }, error: { error_type: 'transport_error' } });
    expect(t.failure).toMatchObject({ reason: 'env_crashed', phase: 'tool', exit_code: 7 });
    await c.close();
  });

  it('a death with no step in flight ends the episode at once, as a death between calls', async () => {
    const c = await WsClient.open(s.url);
    const reset = await c.reset({ task_id: 'fx-echo-0' });
    const id = reset.data.observation.episode_id as string;
    const ep = s.app.openenv.manager.list().find((e) => e.id === id)!;
    // kill the env from outside, as an OOM killer or `docker kill` would
    await race.inner.killBehindBack(id);
    await waitFor(() => ep.done, 30_000, 'the episode to end');
    expect(ep.failure).toMatchObject({ reason: 'env_crashed', phase: 'tool' });
    expect(ep.failure!.message).toContain('the env died between calls');
    const next = await c.call('echo', { text: 'hi' });
    expect(next.data.observation).toMatchObject({ end_reason: 'env_failed', failure: { reason: 'env_crashed' } });
    await c.close();
  });
});
