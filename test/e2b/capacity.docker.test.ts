/**
 * Sandboxes share the episodes' guarantees: 16 creates at once against --max-concurrent-envs 8
 * (slime's example boots 16 at once) run 8 while 8 wait in the queue, and every one of them
 * starts, runs, ends and leaves nothing; SIGTERM in the middle of a run tears every sandbox down
 * (and refuses the creates still waiting) and the server exits 0 with nothing left on the engine.
 */
import { expect, it } from 'vitest';
import { Sandbox } from 'e2b';
import { parsePrometheusText, valueOf } from '../../scripts/lib/prom-text.js';
import { describeDocker, labelledResources, waitFor } from '../support/docker.js';
import { INSTANCE_LABEL, startE2bServer, TEMPLATE, type E2bServer } from './helpers.js';

/** the server's sandboxes by state, and the episodes it counts running (sandboxes are not episodes), from its /metrics */
async function sandboxStates(s: E2bServer): Promise<Record<string, number>> {
  const text = await (await fetch(`${s.url}/metrics`, { headers: { authorization: `Bearer ${s.token}` } })).text();
  const f = parsePrometheusText(text);
  return {
    ...Object.fromEntries(['waiting', 'deploying', 'running', 'paused'].map((state) => [state, valueOf(f, 'openenv_e2b_sandboxes', { state }) ?? 0])),
    episodes: valueOf(f, 'openenv_episodes_running') ?? NaN,
  };
}

const sdk = (s: E2bServer) => ({ apiKey: s.token, apiUrl: s.env.E2B_API_URL, sandboxUrl: s.env.E2B_SANDBOX_URL });

describeDocker('E2B sandboxes under the cap', () => {
  it('16 creates at once against --max-concurrent-envs 8: 8 run while 8 wait, none fails, none leaks', async () => {
    const s = await startE2bServer(['--max-concurrent-envs', '8']);
    try {
      let maxWaiting = 0;
      let maxHolding = 0;
      const episodesSeen = new Set<number>();
      let sampling = true;
      const sampler = (async () => {
        while (sampling) {
          const st = await sandboxStates(s);
          maxWaiting = Math.max(maxWaiting, st.waiting!);
          maxHolding = Math.max(maxHolding, st.deploying! + st.running! + st.paused!);
          episodesSeen.add(st.episodes!);
          await new Promise((r) => setTimeout(r, 100));
        }
      })();
      const results = await Promise.allSettled(
        Array.from({ length: 16 }, async (_x, i) => {
          const sb = await Sandbox.create(TEMPLATE, { ...sdk(s), timeoutMs: 300_000, metadata: { n: String(i) } });
          const r = await sb.commands.run(`echo ${i}; sleep 3`, { user: 'root' });
          await sb.kill();
          return r.stdout;
        }),
      );
      sampling = false;
      await sampler;
      expect(results.filter((r) => r.status === 'rejected')).toEqual([]);
      expect(results.map((r) => (r as PromiseFulfilledResult<string>).value).sort()).toEqual(Array.from({ length: 16 }, (_x, i) => `${i}\n`).sort());
      expect(maxHolding).toBe(8);
      expect(maxWaiting).toBe(8);
      // the slots sandboxes hold are no episodes', at no moment (neither counted nor subtracted twice)
      expect([...episodesSeen]).toEqual([0]);
      await waitFor(async () => Object.values(await sandboxStates(s)).every((n) => n === 0), 30_000, 'every sandbox gone');
      expect(labelledResources(`${INSTANCE_LABEL}=${s.instance}`).containers).toEqual([]);
    } finally {
      s.proc.child.kill('SIGTERM');
      expect((await s.proc.exited).code).toBe(0);
    }
    expect(labelledResources(`${INSTANCE_LABEL}=${s.instance}`)).toEqual({ containers: [], networks: [] });
  });

  it('SIGTERM mid-run: every sandbox removed, the waiting creates refused, exit 0', async () => {
    const s = await startE2bServer(['--max-concurrent-envs', '3']);
    const live = await Promise.all(Array.from({ length: 3 }, () => Sandbox.create(TEMPLATE, { ...sdk(s), timeoutMs: 300_000 })));
    // commands in flight, and two creates waiting for a slot
    const running = live.map((sb) => sb.commands.run('sleep 300', { user: 'root', timeoutMs: 0 }).catch((e: unknown) => e));
    const waiting = [0, 1].map(() => Sandbox.create(TEMPLATE, { ...sdk(s), timeoutMs: 300_000 }).catch((e: unknown) => e));
    await waitFor(async () => (await sandboxStates(s)).waiting === 2, 30_000, 'two creates wait for a slot');
    expect(labelledResources(`${INSTANCE_LABEL}=${s.instance}`).containers).toHaveLength(3);
    s.proc.child.kill('SIGTERM');
    const { code } = await s.proc.exited;
    expect(code).toBe(0);
    // the waiting creates are told the server is shutting down (503: the SDK's ServiceBusyError)
    for (const w of await Promise.all(waiting)) expect(String(w)).toMatch(/shutting down/);
    for (const r of await Promise.all(running)) expect(r).toBeInstanceOf(Error);
    expect(labelledResources(`${INSTANCE_LABEL}=${s.instance}`)).toEqual({ containers: [], networks: [] });
    expect(s.proc.lines().some((l) => l.event === 'sandbox_ended' && l.end === 'shutdown')).toBe(true);
  });
});
