/**
 * How many labelled containers were alive at once, counted exactly from the engines' own start and
 * die events (not by sampling `docker ps`, which misses a short moment over a cap, nor by sampling
 * several nodes one after another). The events are read live from each engine's stream: a bounded
 * query afterwards (`docker events --since --until`) replays only what the engine still buffers
 * (its last 256 events, networks' and swarm's included), which a burst of dozens of envs overflows.
 */
import { spawn } from 'node:child_process';

export interface LifeEvent {
  /** engine time, nanoseconds */
  t: bigint;
  delta: 1 | -1;
}

/** the most containers alive at once over these events (a die sorts before a start at the same instant: a slot handed over is not two at once) */
export function peakAlive(events: LifeEvent[]): { peak: number; starts: number; dies: number } {
  const sorted = [...events].sort((a, b) => (a.t === b.t ? a.delta - b.delta : a.t < b.t ? -1 : 1));
  let now = 0;
  let peak = 0;
  for (const e of sorted) {
    now += e.delta;
    peak = Math.max(peak, now);
  }
  return { peak, starts: sorted.filter((e) => e.delta === 1).length, dies: sorted.filter((e) => e.delta === -1).length };
}

/**
 * Every start and die of containers carrying `label` on these engines (name → DOCKER_HOST; the
 * default engine by default), from now until `stop()`, which resolves with the peak across them
 * and each one's. All engines stamp events with this machine's clock, so the peak is exact, as long
 * as no stream broke: a `docker events` that ended before `stop()` (an engine that dropped it) is
 * named in `broken` with what it said, and the events it missed are not counted (a die missed
 * counts its container alive ever after).
 */
export function followContainerLives(
  label: string,
  hosts: Record<string, string | undefined> = { engine: undefined },
): {
  stop: () => Promise<{
    peak: number;
    starts: number;
    dies: number;
    perNode: Record<string, { peak: number; starts: number; dies: number }>;
    broken: string[];
  }>;
} {
  const sinceS = (Date.now() / 1000).toFixed(3);
  const streams = Object.entries(hosts).map(([name, host]) => {
    const events: LifeEvent[] = [];
    const child = spawn(
      'docker',
      [
        ...(host ? ['-H', host] : []),
        'events',
        '--since',
        sinceS,
        '--filter',
        'type=container',
        '--filter',
        `label=${label}`,
        '--filter',
        'event=start',
        '--filter',
        'event=die',
        '--format',
        '{{.Action}} {{.TimeNano}}',
      ],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let buf = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      buf += chunk;
      const lines = buf.split('\n');
      buf = lines.pop() ?? '';
      for (const line of lines) {
        const [action, t] = line.trim().split(' ');
        if (!t) continue;
        events.push({ t: BigInt(t), delta: action === 'start' ? 1 : -1 });
      }
    });
    let said = '';
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (said += chunk));
    const stream = { name, events, child, exited: Promise.resolve(), stopping: false, brokenBy: null as string | null };
    stream.exited = new Promise<void>((r) =>
      child.once('exit', (code, signal) => {
        if (!stream.stopping)
          stream.brokenBy = `${name}: docker events ended before the count did (${signal ?? `exit ${code}`}): ${said.trim() || 'nothing said'}`;
        r();
      }),
    );
    return stream;
  });
  return {
    async stop() {
      // the engine lists a container stopped a moment before its die event reaches the stream
      await new Promise((r) => setTimeout(r, 500));
      for (const s of streams) {
        s.stopping = true;
        s.child.kill('SIGTERM');
      }
      await Promise.all(streams.map((s) => s.exited));
      const all = peakAlive(streams.flatMap((s) => s.events));
      return {
        ...all,
        perNode: Object.fromEntries(streams.map((s) => [s.name, peakAlive(s.events)])),
        broken: streams.map((s) => s.brokenBy).filter((b): b is string => b !== null),
      };
    },
  };
}
