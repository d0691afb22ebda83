/**
 * A CPU profile of the server under test over exactly the window a phase chooses (the warm burst),
 * taken through the V8 inspector the server was started with (`node --inspect=127.0.0.1:PORT`):
 * Profiler.start before, Profiler.stop after, over the inspector's WebSocket. The summary is where
 * the server's main thread spent its time in that window: self time per function, the heaviest
 * first, with what share of the window's samples each took ("(idle)" is the loop waiting).
 */
import WebSocket from 'ws';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  hitCount?: number;
}

/** the Profiler domain's `Profile` (what Chrome DevTools opens as a .cpuprofile) */
export interface CpuProfile {
  nodes: ProfileNode[];
  startTime: number;
  endTime: number;
  samples?: number[];
  timeDeltas?: number[];
}

export interface ProfileSummary {
  window_ms: number;
  samples: number;
  /** share of the window the main thread was busy (not "(idle)", "(program)" counted busy) */
  busy_share: number;
  top: { fn: string; where: string; self_ms: number; share: number }[];
}

export class CpuProfiler {
  private nextId = 1;
  private readonly pending = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();

  private constructor(private readonly ws: WebSocket) {
    ws.on('message', (data) => {
      const msg = JSON.parse(String(data)) as { id?: number; result?: unknown; error?: { message: string } };
      const p = msg.id === undefined ? undefined : this.pending.get(msg.id);
      if (!p) return;
      this.pending.delete(msg.id!);
      if (msg.error) p.reject(new Error(msg.error.message));
      else p.resolve(msg.result);
    });
  }

  /** connects to the inspector listening on 127.0.0.1:`port` */
  static async attach(port: number): Promise<CpuProfiler> {
    const targets = (await (await fetch(`http://127.0.0.1:${port}/json/list`)).json()) as { webSocketDebuggerUrl: string }[];
    const url = targets[0]?.webSocketDebuggerUrl;
    if (!url) throw new Error(`no inspector target on port ${port}`);
    const ws = new WebSocket(url);
    await new Promise<void>((resolve, reject) => {
      ws.once('open', () => resolve());
      ws.once('error', reject);
    });
    const p = new CpuProfiler(ws);
    await p.send('Profiler.enable');
    // 0.5 ms between samples: fine enough for a burst of a few seconds
    await p.send('Profiler.setSamplingInterval', { interval: 500 });
    return p;
  }

  private send(method: string, params: Record<string, unknown> = {}): Promise<unknown> {
    const id = this.nextId++;
    this.ws.send(JSON.stringify({ id, method, params }));
    return new Promise((resolve, reject) => this.pending.set(id, { resolve, reject }));
  }

  start(): Promise<void> {
    return this.send('Profiler.start').then(() => undefined);
  }

  async stop(): Promise<CpuProfile> {
    const { profile } = (await this.send('Profiler.stop')) as { profile: CpuProfile };
    return profile;
  }

  close(): void {
    this.ws.close();
  }
}

/** self time per function over the profile's window, the `top` heaviest */
export function summarizeProfile(profile: CpuProfile, top = 15): ProfileSummary {
  const byNode = new Map(profile.nodes.map((n) => [n.id, n]));
  const selfUs = new Map<number, number>();
  const samples = profile.samples ?? [];
  const deltas = profile.timeDeltas ?? [];
  // a sample's time is the delta to the next sample
  for (let i = 0; i < samples.length; i++) selfUs.set(samples[i]!, (selfUs.get(samples[i]!) ?? 0) + (deltas[i + 1] ?? 0));
  const byFunction = new Map<string, { fn: string; where: string; us: number }>();
  for (const [id, us] of selfUs) {
    const f = byNode.get(id)!.callFrame;
    const where = f.url ? `${f.url.replace(/^file:\/\/.*?\/(node_modules|dist|src)\//, '$1/')}:${f.lineNumber + 1}` : '';
    const key = `${f.functionName}@${where}`;
    const e = byFunction.get(key) ?? { fn: f.functionName || '(anonymous)', where, us: 0 };
    e.us += us;
    byFunction.set(key, e);
  }
  const windowUs = profile.endTime - profile.startTime;
  const idleUs = [...byFunction.values()].filter((e) => e.fn === '(idle)').reduce((s, e) => s + e.us, 0);
  const round = (x: number, d: number) => Math.round(x * 10 ** d) / 10 ** d;
  return {
    window_ms: round(windowUs / 1000, 1),
    samples: samples.length,
    busy_share: round(1 - idleUs / windowUs, 3),
    top: [...byFunction.values()]
      .filter((e) => e.fn !== '(idle)')
      .sort((a, b) => b.us - a.us)
      .slice(0, top)
      .map((e) => ({ fn: e.fn, where: e.where, self_ms: round(e.us / 1000, 1), share: round(e.us / windowUs, 3) })),
  };
}
