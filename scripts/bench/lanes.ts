/**
 * The lanes run: eval resets arriving during a training burst at a full cap. `train` training
 * episodes are sent at once to a server with --max-concurrent-envs `cap` (each holds its env for
 * `holdS` seconds, a tool call that sleeps, as a rollout's model turns would); once all of them
 * hold a slot or wait, `evals` eval resets are sent at once and play a one-call episode. Each
 * reset's queue wait (the server's own timings.queued_s) and latency (connect to observation) are
 * kept, per kind. Played twice in the same run: lanes on (the default, eval=high) and off
 * (--split-priority eval=normal: one FIFO queue).
 */
import { sumOf, parsePrometheusText } from '../lib/prom-text.js';
import { waitFor } from '../lib/wait.js';
import type { BenchContext } from './context.js';
import { finishEpisode, startEpisode, startServer, waitNetworkStock, type StartedEpisode } from './server.js';
import { percentile } from './stats.js';

export interface LanesLoad {
  train: number;
  evals: number;
  cap: number;
  holdS: number;
  /** the network stock the server keeps at this cap (waited for before the burst) */
  stock: number;
}

export interface Waits {
  n: number;
  queued_p50_s: number;
  queued_p95_s: number;
  reset_p50_s: number;
  reset_p95_s: number;
}

export interface LanesRun {
  eval: Waits;
  train: Waits;
  /** from the first training reset until every episode had ended */
  wall_s: number;
}

const EVAL_TASK = 'fx-eval-0';

function waits(eps: StartedEpisode[]): Waits {
  const q = eps.map((e) => Number(e.timings.queued_s) * 1000);
  const r = eps.map((e) => e.resetMs);
  const s = (ms: number) => Number((ms / 1000).toFixed(3));
  return {
    n: eps.length,
    queued_p50_s: s(percentile(q, 50)),
    queued_p95_s: s(percentile(q, 95)),
    reset_p50_s: s(percentile(r, 50)),
    reset_p95_s: s(percentile(r, 95)),
  };
}

/** one run on a fresh server; `lanes` false: --split-priority eval=normal */
export async function lanesRun(ctx: BenchContext, load: LanesLoad, lanes: boolean): Promise<LanesRun> {
  const name = lanes ? 'lanes-on' : 'lanes-off';
  const s = await startServer(ctx, name, [
    '--max-concurrent-envs',
    String(load.cap),
    '--max-waiting',
    '4096',
    ...(lanes ? [] : ['--split-priority', 'eval=normal']),
  ]);
  try {
    await waitNetworkStock(ctx, s, load.stock);
    const t0 = performance.now();
    const training = Array.from({ length: load.train }, async () => {
      const e = await startEpisode(s.url);
      await e.client.call('sleep', { seconds: load.holdS });
      await finishEpisode(e.client);
      return e;
    });
    // the burst is in: every training reset holds a slot or waits for one
    await waitFor(
      async () => {
        const m = parsePrometheusText(await s.metrics());
        return sumOf(m, 'openenv_resets_waiting') + sumOf(m, 'openenv_episodes_running') >= load.train;
      },
      300_000,
      `${name}: the training burst in`,
      20,
    );
    ctx.progress(`  ${name}: ${load.train} training resets in at a cap of ${load.cap}; ${load.evals} eval resets now`);
    const evals = Array.from({ length: load.evals }, async () => {
      const e = await startEpisode(s.url, EVAL_TASK);
      await finishEpisode(e.client);
      return e;
    });
    const [trainEps, evalEps] = await Promise.all([Promise.all(training), Promise.all(evals)]);
    return { eval: waits(evalEps), train: waits(trainEps), wall_s: Number(((performance.now() - t0) / 1000).toFixed(1)) };
  } finally {
    await s.stop();
  }
}
