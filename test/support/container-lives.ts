/**
 * How many labelled containers were alive at once, counted exactly from the engine's own start and
 * die events (not by sampling `docker ps`, which misses a short moment over a cap). The events are
 * read afterwards with a bounded query (`docker events --since … --until …`), which ends once it has
 * delivered every event of the window: nothing is waited for by the clock.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';

const run = promisify(execFile);

export interface LifeEvent {
  /** engine time, nanoseconds */
  t: bigint;
  delta: 1 | -1;
}

/** start/die events of containers carrying `label`, on the engine at `host` (the default engine when absent) */
export async function containerLifeEvents(opts: { label: string; sinceMs: number; untilMs: number; host?: string }): Promise<LifeEvent[]> {
  const seconds = (ms: number) => (ms / 1000).toFixed(3);
  const args = [
    ...(opts.host ? ['-H', opts.host] : []),
    'events',
    '--since',
    seconds(opts.sinceMs),
    '--until',
    seconds(opts.untilMs),
    '--filter',
    'type=container',
    '--filter',
    `label=${opts.label}`,
    '--format',
    '{{.Action}} {{.TimeNano}}',
  ];
  const { stdout } = await run('docker', args, { maxBuffer: 64 * 1024 * 1024 });
  const out: LifeEvent[] = [];
  for (const line of stdout.split('\n')) {
    const [action, t] = line.trim().split(' ');
    if (!t) continue;
    if (action === 'start') out.push({ t: BigInt(t), delta: 1 });
    else if (action === 'die') out.push({ t: BigInt(t), delta: -1 });
  }
  return out;
}

/** the most containers alive at once over these events (a die sorts before a start at the same instant: a slot handed over is not two at once) */
export function peakAlive(events: LifeEvent[]): { peak: number; starts: number } {
  const sorted = [...events].sort((a, b) => (a.t === b.t ? a.delta - b.delta : a.t < b.t ? -1 : 1));
  let now = 0;
  let peak = 0;
  for (const e of sorted) {
    now += e.delta;
    peak = Math.max(peak, now);
  }
  return { peak, starts: sorted.filter((e) => e.delta === 1).length };
}

/**
 * Marks the start of a window; `stop()` ends it and returns the peak of containers alive at once
 * across these engines (the default engine when `hosts` is empty), and how many started.
 */
export function watchContainerLives(label: string, hosts: (string | undefined)[] = [undefined]): { stop: () => Promise<{ peak: number; starts: number }> } {
  // the engine stamps events with its own clock, which is this machine's: a little slack either side
  const sinceMs = Date.now() - 1000;
  return {
    async stop() {
      const untilMs = Date.now() + 1;
      const all = await Promise.all(hosts.map((host) => containerLifeEvents({ label, sinceMs, untilMs, ...(host ? { host } : {}) })));
      return peakAlive(all.flat());
    },
  };
}
