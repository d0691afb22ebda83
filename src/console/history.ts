/**
 * What the web console shows of episodes, kept in memory: a transcript of every live episode as
 * it happens (the reset prompt, each tool call with its arguments and result, the end), the last
 * N ended ones (a ring: `--history N`, also bounded in bytes), and feeds the time series
 * (series.ts), which outlive the ring.
 *
 * It is an EpisodeObserver: the episode calls it, in a try/catch, at its few points of life.
 * A transcript holds what the model saw and sent: never the bearer token (no request is
 * recorded) nor a task's hidden `data` (only the reset observation is).
 */
import type { Action } from '../protocol/frames.js';
import type { ModelCall } from '../protocol/model.js';
import type { EndedFilter, EpisodeSummary, Series, SeriesWindow, StreamMessage, Transcript, TranscriptEvent } from '../protocol/console.js';
import type { Phase, StepOutcome } from '../protocol/observations.js';
import type { Episode, EpisodeObserver } from '../episodes/episode.js';
import type { VerifierRecord } from '../episodes/verified-task.js';
import type { HarnessRun } from '../episodes/harness-task.js';
import { EpisodeSeries } from './series.js';
import { boundEvent, transcriptBytes, type TranscriptBounds } from '../protocol/transcript-bound.js';

/**
 * What the history reads of what it observes: an episode (episode.ts), or anything else that
 * holds an env slot the same way and is shown as one (an E2B sandbox, src/e2b/).
 */
export type Observed = Pick<
  Episode,
  | 'id'
  | 'createdAt'
  | 'clientLabel'
  | 'transport'
  | 'seed'
  | 'lane'
  | 'phase'
  | 'steps'
  | 'turn'
  | 'endReason'
  | 'reward'
  | 'scores'
  | 'failure'
  | 'cost'
  | 'envId'
  | 'answering'
  | 'tornDown'
  | 'timings'
> & { readonly task: Pick<Episode['task'], 'task_id' | 'split' | 'index' | 'toolset' | 'groups'> };

/** What a subscriber hears: every change of an episode, and each new transcript event (the stream's messages). */
export type HistoryMessage = Extract<StreamMessage, { type: 'episode' | 'event' }>;

export interface HistoryOptions {
  /** ended episodes kept (`--history`) */
  size: number;
  /** and at most this many bytes of them (their JSON) */
  maxBytes?: number;
  /** events kept per transcript; later ones are counted, not kept */
  maxEvents?: number;
  /** what one transcript keeps of its events (default TRANSCRIPT_BOUNDS) */
  bounds?: TranscriptBounds;
  /** called once per episode when it is torn down, with its final transcript (--record) */
  onFinal?: (t: Transcript) => void;
  now?: () => number;
}

interface Live {
  ep: Observed;
  t: Transcript;
  /** JSON bytes of the events kept, as transcript.ts counted them */
  eventBytes: number;
  /** the end, recorded, told once the step that ended the episode answered (or at its teardown) */
  tellEnd?: () => void;
}

const MAX_EVENTS = 1000;
const MAX_BYTES = 64 * 1024 * 1024;

export class EpisodeHistory implements EpisodeObserver {
  private readonly live = new Map<string, Live>();
  /** ended, not yet torn down: a step that ended the episode is reported after onEnded */
  private readonly finishing = new Map<string, Live>();
  /** ended transcripts, oldest first, with their approximate size */
  private readonly ended = new Map<string, { t: Transcript; bytes: number }>();
  private endedBytes = 0;
  private readonly seriesStore: EpisodeSeries;
  private readonly listeners = new Set<(m: HistoryMessage) => void>();
  private readonly now: () => number;
  readonly size: number;
  private readonly maxBytes: number;
  private readonly maxEvents: number;

  constructor(private readonly opts: HistoryOptions) {
    this.size = Math.max(0, Math.floor(opts.size));
    this.maxBytes = opts.maxBytes ?? MAX_BYTES;
    this.maxEvents = opts.maxEvents ?? MAX_EVENTS;
    this.now = opts.now ?? Date.now;
    this.seriesStore = new EpisodeSeries({ now: this.now });
  }

  // ---- EpisodeObserver ---------------------------------------------------------------------

  onCreated(ep: Observed): void {
    const t: Transcript = {
      episode_id: ep.id,
      client_label: ep.clientLabel ?? null,
      env_id: null,
      task_id: ep.task.task_id,
      split: ep.task.split,
      index: ep.task.index,
      transport: ep.transport,
      phase: ep.phase,
      created_at: new Date(ep.createdAt).toISOString(),
      ended_at: null,
      steps: 0,
      turn: ep.turn,
      last_tool: null,
      end_reason: null,
      reward: null,
      failure_reason: null,
      timings: ep.timings(),
      toolset: ep.task.toolset,
      seed: ep.seed,
      scores: null,
      failure: null,
      cost: null,
      events_dropped: 0,
      events: [],
    };
    this.live.set(ep.id, { ep, t, eventBytes: 0 });
    void ep.tornDown.then(() => this.onTornDown(ep.id));
    this.emit({ type: 'episode', episode: this.summaryOf(ep.id)! });
  }

  onReset(ep: Observed, outcome: StepOutcome): void {
    const l = this.live.get(ep.id);
    if (!l) return;
    const o = outcome.observation as { messages?: unknown; tools?: { name: string }[]; turns?: unknown; max_turns?: unknown };
    const timings = ep.timings();
    this.seriesStore.started(timings.queued_s, timings.deploy_s, ep.lane);
    // deployed (or taken from the pool) by now
    l.t.env_id = ep.envId;
    this.push(l, {
      kind: 'reset',
      at: this.iso(),
      messages: o.messages ?? [],
      tools: (o.tools ?? []).map((t) => t.name),
      turns: o.turns ?? null,
      max_turns: o.max_turns ?? null,
    });
  }

  onStep(ep: Observed, action: Action, outcome: StepOutcome, startedAt: number): void {
    const l = this.live.get(ep.id) ?? this.finishing.get(ep.id);
    if (!l) return;
    const ms = Math.max(0, this.now() - startedAt);
    if (action.type === 'list_tools') {
      this.push(l, { kind: 'list_tools', at: this.iso(), ms });
    } else {
      const o = outcome.observation as { result?: unknown; error?: unknown };
      l.t.last_tool = action.tool_name;
      this.push(l, {
        kind: 'tool_call',
        at: this.iso(),
        step: ep.steps,
        turn: ep.turn,
        tool_name: action.tool_name,
        arguments: action.arguments === undefined ? {} : action.arguments,
        result: o.result ?? null,
        error: o.error ?? null,
        ms,
      });
    }
    // the step that ended the episode has answered: its end is told after it
    this.tellPendingEnd(l);
  }

  onVerifier(ep: Observed, r: VerifierRecord): void {
    const l = this.live.get(ep.id) ?? this.finishing.get(ep.id);
    if (!l) return;
    this.push(l, { kind: 'verifier', at: this.iso(), ...r });
  }

  onHarness(ep: Observed, run: HarnessRun): void {
    const l = this.live.get(ep.id) ?? this.finishing.get(ep.id);
    if (!l) return;
    this.push(l, {
      kind: 'harness',
      at: this.iso(),
      turn: run.turn,
      ended: run.ended,
      exit_code: run.exitCode,
      duration_s: run.durationMs / 1000,
      output: run.output.text,
      output_bytes: run.output.totalBytes,
      dropped_bytes: run.output.droppedBytes,
    });
  }

  onEnded(ep: Observed): void {
    const l = this.live.get(ep.id);
    if (!l) return;
    const timings = ep.timings();
    this.seriesStore.ended({
      split: ep.task.split,
      groups: ep.task.groups,
      endReason: ep.endReason ?? 'closed',
      failureReason: ep.failure?.reason ?? null,
      reward: ep.reward,
      scores: ep.scores,
      steps: ep.steps,
      turns: ep.turn,
      // a reset that never got a slot still waited: its wait counts (a started one counted at reset)
      queuedWithoutStart: l.t.events.some((e) => e.kind === 'reset') ? null : timings.queued_s,
      lane: ep.lane,
    });
    l.t.ended_at = this.iso();
    this.push(l, { kind: 'end', at: l.t.ended_at, end_reason: ep.endReason, reward: ep.reward, scores: ep.scores, failure: ep.failure, timings });
    // ended: it leaves the live list now and joins the ring (its teardown may still run)
    this.live.delete(ep.id);
    this.finishing.set(ep.id, l);
    this.keepEnded(l);
  }

  /** a model call the episode's env made through the gateway (the gateway's observer); given before the episode is torn down */
  onModelCall(call: ModelCall): void {
    const l = this.live.get(call.episode_id) ?? this.finishing.get(call.episode_id);
    if (!l) return;
    const { episode_id: _id, ...rest } = call;
    this.push(l, { kind: 'model_call', at: new Date(call.started_at).toISOString(), ...rest, request: call.request ?? null, response: call.response ?? null });
  }

  // ---- reading -----------------------------------------------------------------------------

  /** live episodes, oldest first */
  liveSummaries(): EpisodeSummary[] {
    return [...this.live.keys()].map((id) => this.summaryOf(id)!);
  }

  liveCount(phase?: Phase): number {
    if (!phase) return this.live.size;
    let n = 0;
    for (const l of this.live.values()) if (l.ep.phase === phase) n++;
    return n;
  }

  get endedCount(): number {
    return this.ended.size;
  }

  get endedBytesApprox(): number {
    return this.endedBytes;
  }

  /** ended episodes, newest first, filtered; `total` counts every match */
  endedSummaries(f: EndedFilter = {}): { total: number; episodes: EpisodeSummary[] } {
    const all = [...this.ended.values()].reverse().map((e) => e.t);
    const match = all.filter(
      (t) =>
        (f.split === undefined || t.split === f.split) &&
        (f.end_reason === undefined || t.end_reason === f.end_reason) &&
        (f.failed === undefined || (t.failure !== null) === f.failed) &&
        (f.failure_reason === undefined || t.failure?.reason === f.failure_reason) &&
        (f.task === undefined || t.task_id.includes(f.task)),
    );
    const offset = f.offset ?? 0;
    const limit = f.limit ?? 100;
    return { total: match.length, episodes: match.slice(offset, offset + limit).map(summarize) };
  }

  /** a live or kept ended episode's full transcript */
  transcript(id: string): Transcript | undefined {
    const l = this.live.get(id);
    if (l) return { ...this.refresh(l), events: [...l.t.events] };
    return this.ended.get(id)?.t;
  }

  summaryOf(id: string): EpisodeSummary | undefined {
    const l = this.live.get(id);
    if (l) return summarize(this.refresh(l));
    const e = this.ended.get(id);
    return e ? summarize(e.t) : undefined;
  }

  /** the time series over `window` (series.ts) */
  series(window?: SeriesWindow): Series {
    return this.seriesStore.view(window);
  }

  /** every change, as it happens; returns the unsubscribe function */
  subscribe(fn: (m: HistoryMessage) => void): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  // ---- inside ------------------------------------------------------------------------------

  private iso(): string {
    return new Date(this.now()).toISOString();
  }

  /** the live record with the episode's current counters */
  private refresh(l: Live): Transcript {
    const { ep, t } = l;
    t.phase = ep.phase;
    t.steps = ep.steps;
    t.turn = ep.turn;
    t.end_reason = ep.endReason;
    t.reward = ep.reward;
    t.scores = ep.scores;
    t.failure = ep.failure;
    t.failure_reason = ep.failure?.reason ?? null;
    t.timings = ep.timings();
    t.cost = ep.cost;
    if (t.env_id !== null) t.env_id = ep.envId;
    return t;
  }

  private push(l: Live, given: TranscriptEvent): void {
    const { event: ev, bytes } = boundEvent(given, l.eventBytes, this.opts.bounds);
    const evs = l.t.events;
    let index = evs.length;
    if (evs.length >= this.maxEvents && ev.kind !== 'end') {
      l.t.events_dropped++;
      index = -1;
    } else if (ev.kind !== 'end' && evs[evs.length - 1]?.kind === 'end') {
      // the step that ended the episode answers after its end was recorded: the end stays last
      index = evs.length - 1;
      evs.splice(index, 0, ev);
    } else {
      evs.push(ev);
    }
    if (index >= 0) {
      l.eventBytes += bytes;
      // the step that ended the episode may answer after it joined the ring: its size counts there
      const kept = this.ended.get(l.t.episode_id);
      if (kept?.t === l.t) this.recount(kept, l);
    }
    this.refresh(l);
    const tell = () => {
      if (index >= 0) this.emit({ type: 'event', episode_id: l.t.episode_id, index: ev.kind === 'end' ? l.t.events.indexOf(ev) : index, event: ev });
      this.emit({ type: 'episode', episode: summarize(l.t) });
    };
    // the end is told after the step that caused it, which answers after onEnded
    if (ev.kind === 'end' && l.ep.answering) l.tellEnd = tell;
    else tell();
  }

  private tellPendingEnd(l: Live): void {
    const tell = l.tellEnd;
    l.tellEnd = undefined;
    tell?.();
  }

  private keepEnded(l: Live): void {
    this.refresh(l);
    if (this.size === 0) return;
    const kept = { t: l.t, bytes: 0 };
    this.ended.set(l.t.episode_id, kept);
    this.recount(kept, l);
    this.evict();
  }

  /** an ended transcript's exact JSON size, into the ring's total */
  private recount(kept: { t: Transcript; bytes: number }, l: Live): void {
    const bytes = transcriptBytes(l.t, l.eventBytes);
    this.endedBytes += bytes - kept.bytes;
    kept.bytes = bytes;
    this.evict();
  }

  private evict(): void {
    while (this.ended.size > this.size || (this.endedBytes > this.maxBytes && this.ended.size > 1)) {
      const [oldest, e] = this.ended.entries().next().value as [string, { bytes: number }];
      this.ended.delete(oldest);
      this.endedBytes -= e.bytes;
    }
  }

  private onTornDown(id: string): void {
    const l = this.finishing.get(id) ?? this.live.get(id);
    this.finishing.delete(id);
    this.live.delete(id);
    if (!l) return;
    this.tellPendingEnd(l);
    this.refresh(l);
    // its timings grew with the teardown, and its cost was read as the teardown began
    const kept = this.ended.get(id);
    if (kept?.t === l.t) this.recount(kept, l);
    if (l.t.cost) {
      this.seriesStore.costed({ split: l.ep.task.split, groups: l.ep.task.groups, cost: l.t.cost });
      this.emit({ type: 'episode', episode: summarize(l.t) });
    }
    if (!this.opts.onFinal) return;
    try {
      this.opts.onFinal(l.t);
    } catch {
      // the recorder counts its own failures; nothing here may reject
    }
  }

  private emit(m: HistoryMessage): void {
    for (const fn of this.listeners) {
      try {
        fn(m);
      } catch {
        this.listeners.delete(fn);
      }
    }
  }
}

function summarize(t: Transcript): EpisodeSummary {
  return {
    episode_id: t.episode_id,
    client_label: t.client_label,
    env_id: t.env_id,
    task_id: t.task_id,
    split: t.split,
    index: t.index,
    transport: t.transport,
    phase: t.phase,
    created_at: t.created_at,
    ended_at: t.ended_at,
    steps: t.steps,
    turn: t.turn,
    last_tool: t.last_tool,
    end_reason: t.end_reason,
    reward: t.reward,
    scores: t.scores,
    failure_reason: t.failure_reason,
    timings: t.timings,
    cost: t.cost,
  };
}
