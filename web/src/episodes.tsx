/** Episodes: the live ones (from the stream), the last ended ones (filterable), one transcript. */
import { useState } from 'preact/hooks';
import type { EndReason } from '../../src/protocol/observations';
import { download } from './api';
import { CostCells, CostHeads } from './cost-columns';
import { Folded, Json, Messages, resultText } from './text';
import type { ConsoleEpisodesPage, EndEvent, EpisodeSummary, Transcript, TranscriptEvent } from './types';
import { useGet } from './use-get';

export function age(iso: string, now = Date.now()): string {
  const s = Math.max(0, Math.round((now - Date.parse(iso)) / 1000));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m ${s % 60}s`;
  return `${Math.floor(s / 3600)}h ${Math.floor((s % 3600) / 60)}m`;
}

const fmtReward = (r: number | null) => (r === null ? '—' : String(Math.round(r * 1e4) / 1e4));

function Phase(props: { phase: string; reason?: string | null; failed?: boolean }) {
  const cls = props.failed ? 'pill bad' : props.phase === 'running' ? 'pill ok' : props.phase === 'done' ? 'pill' : 'pill wait';
  return <span class={cls}>{props.phase === 'done' ? (props.reason ?? 'done') : props.phase}</span>;
}

// every end reason the server declares, once each: tsc refuses a missing or an unknown one
const END_REASON_SET: Record<EndReason, true> = { finished: true, turns_ended: true, max_steps: true, env_failed: true, closed: true };
const END_REASONS = Object.keys(END_REASON_SET) as EndReason[];

export function EpisodesView(props: { live: EpisodeSummary[]; splits: string[]; endedTick: number }) {
  const [split, setSplit] = useState('');
  const [reason, setReason] = useState('');
  const [failed, setFailed] = useState('');
  const [task, setTask] = useState('');
  const q = new URLSearchParams({ limit: '200' });
  if (split) q.set('split', split);
  if (reason) q.set('end_reason', reason);
  if (failed) q.set('failed', failed);
  if (task) q.set('task', task);
  // a burst of ends refetches once
  const { data: ended, error } = useGet<ConsoleEpisodesPage>(`console/episodes?${q}`, { refresh: props.endedTick, delayMs: 150 });

  const live = props.live.filter((e) => (!split || e.split === split) && (!task || e.task_id.includes(task)));
  const now = Date.now();
  return (
    <section>
      <div class="filters">
        <label>
          split{' '}
          <select value={split} onChange={(e) => setSplit((e.target as HTMLSelectElement).value)} data-testid="filter-split">
            <option value="">all</option>
            {props.splits.map((s) => (
              <option key={s} value={s}>
                {s}
              </option>
            ))}
          </select>
        </label>
        <label>
          end reason{' '}
          <select value={reason} onChange={(e) => setReason((e.target as HTMLSelectElement).value)} data-testid="filter-reason">
            <option value="">any</option>
            {END_REASONS.map((r) => (
              <option key={r} value={r}>
                {r}
              </option>
            ))}
          </select>
        </label>
        <label>
          failure{' '}
          <select value={failed} onChange={(e) => setFailed((e.target as HTMLSelectElement).value)} data-testid="filter-failed">
            <option value="">any</option>
            <option value="true">failed</option>
            <option value="false">not failed</option>
          </select>
        </label>
        <label>
          task id <input type="search" value={task} placeholder="contains…" onInput={(e) => setTask((e.target as HTMLInputElement).value)} />
        </label>
      </div>

      <h2>
        Live <span class="count">{live.length}</span>
      </h2>
      <table class="grid" data-testid="live-episodes">
        <thead>
          <tr>
            <th>task</th>
            <th>split</th>
            <th>phase</th>
            <th>transport</th>
            <th>age</th>
            <th>steps</th>
            <th>last tool</th>
          </tr>
        </thead>
        <tbody>
          {live.length === 0 && (
            <tr>
              <td colSpan={7} class="muted">
                no live episode
              </td>
            </tr>
          )}
          {live.map((e) => (
            <tr key={e.episode_id} class="clickable" data-episode={e.episode_id} onClick={() => (location.hash = `#/episodes/${e.episode_id}`)}>
              <td>
                <a href={`#/episodes/${e.episode_id}`}>{e.task_id}</a>
              </td>
              <td>{e.split}</td>
              <td>
                <Phase phase={e.phase} />
              </td>
              <td>{e.transport}</td>
              <td>{age(e.created_at, now)}</td>
              <td>{e.steps}</td>
              <td>{e.last_tool ?? '—'}</td>
            </tr>
          ))}
        </tbody>
      </table>

      <h2>
        Ended <span class="count">{ended ? `${ended.ended_total} of the last ${ended.history_size} kept` : '…'}</span>
      </h2>
      {error && <p class="error">{error}</p>}
      <table class="grid" data-testid="ended-episodes">
        <thead>
          <tr>
            <th>task</th>
            <th>split</th>
            <th>ended</th>
            <th>end reason</th>
            <th>reward</th>
            <th>steps</th>
            <th>failure</th>
            <th>deploy s</th>
            <CostHeads />
          </tr>
        </thead>
        <tbody>
          {ended?.ended.map((e) => (
            <tr key={e.episode_id} class="clickable" data-episode={e.episode_id} onClick={() => (location.hash = `#/episodes/${e.episode_id}`)}>
              <td>
                <a href={`#/episodes/${e.episode_id}`}>{e.task_id}</a>
              </td>
              <td>{e.split}</td>
              <td>{e.ended_at ? `${age(e.ended_at, now)} ago` : ''}</td>
              <td>
                <Phase phase="done" reason={e.end_reason} failed={e.failure_reason !== null} />
              </td>
              <td class="num">{fmtReward(e.reward)}</td>
              <td class="num">{e.steps}</td>
              <td>{e.failure_reason ?? ''}</td>
              <td class="num">{e.timings.deploy_s}</td>
              <CostCells cost={e.cost} />
            </tr>
          ))}
        </tbody>
      </table>
    </section>
  );
}

/** inserts a streamed event where the server put it in the transcript */
export function withEvent(t: Transcript, index: number, ev: TranscriptEvent): Transcript {
  const events = [...t.events];
  if (events.length > index && JSON.stringify(events[index]) === JSON.stringify(ev)) return t; // already there
  events.splice(Math.min(index, events.length), 0, ev);
  return { ...t, events };
}

/**
 * How the env's death reads, from the failure's own fields and the call it cut short: a failure
 * in the tool phase whose last recorded call failed died during that call; one with no failed
 * call died between calls. Other phases say what the server was doing.
 */
export function describeFailure(failure: NonNullable<EndEvent['failure']>, events: readonly TranscriptEvent[]): string {
  const cause = failure.reason.replace(/_/g, ' ');
  if (failure.phase === 'tool') {
    const last = [...events].reverse().find((e) => e.kind === 'tool_call');
    if (last?.kind === 'tool_call' && last.error) return `${cause} during the call to ${last.tool_name} (step ${last.step})`;
    return `${cause} between calls (no call was in flight)`;
  }
  const during: Record<Exclude<typeof failure.phase, 'tool'>, string> = {
    queue: 'while the reset waited for a slot',
    deploy: 'while the env was deployed',
    reset: "during the env's /reset",
    finish: 'while the env scored the episode',
    teardown: 'while the env was torn down',
    model: "at the env's model call through the gateway",
  };
  return `${cause} ${during[failure.phase]}`;
}

export function EventView(props: { ev: TranscriptEvent; events: readonly TranscriptEvent[] }) {
  const ev = props.ev;
  const time = new Date(ev.at).toLocaleTimeString();
  if (ev.kind === 'reset') {
    return (
      <article class="ev ev-reset" data-kind="reset">
        <header>
          <strong>reset</strong>{' '}
          <span class="muted">
            {time} · tools: {ev.tools.join(', ')}
          </span>
        </header>
        <Messages messages={ev.messages} />
      </article>
    );
  }
  if (ev.kind === 'list_tools') {
    return (
      <article class="ev" data-kind="list_tools">
        <header>
          <strong>list_tools</strong> <span class="muted">{time}</span>
        </header>
      </article>
    );
  }
  if (ev.kind === 'verifier') {
    // a verified task's tests ran: their output is the transcript's, never the model's
    return (
      <article class={`ev ${ev.status === 'scored' ? '' : 'call-error'}`} data-kind="verifier">
        <header>
          <strong>
            verifier · {ev.scope === 'turn' ? `turn ${ev.turn}` : 'task'} · {ev.status}
          </strong>{' '}
          <span class="muted">
            {time} · {ev.duration_s}s · exit {ev.exit_code ?? '?'} · {ev.agent_processes_killed} agent process(es) stopped before it
          </span>
        </header>
        {ev.scores && (
          <div>
            {Object.entries(ev.scores).map(([k, v]) => (
              <span key={k} class="pill">
                {k} {v}
              </span>
            ))}
          </div>
        )}
        <Folded
          text={typeof ev.output === 'string' ? ev.output : JSON.stringify(ev.output)}
          label={`output · ${ev.output_bytes} bytes${ev.dropped_bytes ? ` (${ev.dropped_bytes} dropped)` : ''}`}
        />
      </article>
    );
  }
  if (ev.kind === 'harness') {
    // a harness episode's harness run ended: what it printed is the transcript's
    return (
      <article class={`ev ${ev.ended === 'exited' && ev.exit_code === 0 ? '' : 'call-error'}`} data-kind="harness">
        <header>
          <strong>
            harness · turn {ev.turn} · {ev.ended === 'time_budget' ? 'time budget passed' : `exit ${ev.exit_code ?? '?'}`}
          </strong>{' '}
          <span class="muted">
            {time} · {ev.duration_s}s
          </span>
        </header>
        <Folded
          text={typeof ev.output === 'string' ? ev.output : JSON.stringify(ev.output)}
          label={`output · ${ev.output_bytes} bytes${ev.dropped_bytes ? ` (${ev.dropped_bytes} dropped)` : ''}`}
        />
      </article>
    );
  }
  if (ev.kind === 'tool_call') {
    const text = resultText(ev.result);
    const isTurn = ev.tool_name === 'end_turn';
    return (
      <article class={`ev ${isTurn ? 'ev-turn' : 'ev-call'}`} data-kind="tool_call" data-tool={ev.tool_name}>
        <header>
          <strong>{isTurn ? `end_turn → turn ${ev.turn}` : ev.tool_name}</strong>{' '}
          <span class="muted">
            step {ev.step} · {time} · {ev.ms} ms
          </span>
        </header>
        <div class="call-args">
          <Json value={ev.arguments} label="arguments" />
        </div>
        {ev.error ? (
          <div class="call-error">
            <Folded text={ev.error.message} label={`error · ${ev.error.error_type}`} />
          </div>
        ) : (
          <div class={ev.result?.is_error ? 'call-result call-error' : 'call-result'}>
            {text !== null ? <Folded text={text} label={`result${ev.result?.is_error ? ' · is_error' : ''}`} /> : <Json value={ev.result} label="result" />}
          </div>
        )}
      </article>
    );
  }
  if (ev.kind === 'model_call') {
    const failed = ev.outcome !== 'ok';
    return (
      <article class={`ev ev-call ${failed ? 'call-error' : ''}`} data-kind="model_call" data-outcome={ev.outcome}>
        <header>
          <strong>model call · {ev.api ?? ev.path}</strong>{' '}
          <span class="muted">
            #{ev.seq} · {time} · {ev.latency_ms} ms{ev.stream ? ' · streamed' : ''} · HTTP {ev.status} · {ev.outcome}
            {ev.usage ? ` · ${ev.usage.input_tokens} in / ${ev.usage.output_tokens} out tokens` : ''}
          </span>
        </header>
        <div class="call-args">
          <Json value={ev.request} label="request" />
        </div>
        <div class={failed ? 'call-result call-error' : 'call-result'}>
          {ev.error ? <Folded text={ev.error} label={`error${ev.refusal ? ` · ${ev.refusal}` : ''}`} /> : <Json value={ev.response} label="response" />}
        </div>
      </article>
    );
  }
  return (
    <article class={`ev ev-end ${ev.failure ? 'failed' : ''}`} data-kind="end">
      <header>
        <strong>end · {ev.end_reason}</strong> <span class="muted">{time}</span>
      </header>
      <div class="end-grid">
        <div class="big" data-testid="end-reward">
          reward <b>{fmtReward(ev.reward)}</b>
        </div>
        {ev.scores && (
          <div>
            scores:{' '}
            {Object.entries(ev.scores).map(([k, v]) => (
              <span key={k} class="pill">
                {k} {v}
              </span>
            ))}
          </div>
        )}
        <div class="muted">
          queued {ev.timings.queued_s}s · deploy {ev.timings.deploy_s}s · running {ev.timings.running_s}s
        </div>
      </div>
      {ev.failure && (
        <div class="call-error" data-testid="failure">
          <div class="death" data-testid="failure-headline">
            {describeFailure(ev.failure, props.events)}
          </div>
          <div class="role">
            failure · {ev.failure.reason} ({ev.failure.phase}){ev.failure.retryable ? ' · retryable' : ''}
            {ev.failure.exit_code !== undefined && ev.failure.exit_code !== null ? ` · exit ${ev.failure.exit_code}` : ''}
          </div>
          <pre class="text">{ev.failure.message}</pre>
          {ev.failure.log_tail && (
            <>
              <Folded class="text log" text={ev.failure.log_tail} label="log tail" />
            </>
          )}
        </div>
      )}
    </article>
  );
}

export function TranscriptView(props: { id: string; transcript: Transcript | null; live: EpisodeSummary | undefined; setTranscript: (t: Transcript) => void }) {
  // the stream sends the transcript too; this also covers a server without one in flight
  const got = useGet<Transcript>(`console/episodes/${encodeURIComponent(props.id)}`, {
    onData: (t) => {
      if (!props.transcript || props.transcript.events.length <= t.events.length) props.setTranscript(t);
    },
  });
  const error = got.notFound ? 'This episode is not in the history (it ended and was evicted, or never existed).' : got.error;

  const t = props.transcript;
  if (error && !t) return <p class="error">{error}</p>;
  if (!t) return <p class="muted">Loading…</p>;
  const s = props.live ?? t;
  return (
    <section class="transcript" data-testid="transcript">
      <div class="transcript-head">
        <div>
          <h2>{t.task_id}</h2>
          <div class="muted">
            {t.episode_id} · split {t.split} #{t.index} · {t.transport} · {t.toolset}
            {t.client_label ? ` · label ${t.client_label}` : ''}
          </div>
        </div>
        <div class="head-right">
          <Phase phase={s.phase} reason={s.end_reason} failed={s.failure_reason !== null} />
          <span>steps {s.steps}</span>
          <span>reward {fmtReward(s.reward)}</span>
          <button type="button" onClick={() => download(`episode-${t.episode_id}.json`, t)} data-testid="download">
            Download JSON
          </button>
        </div>
      </div>
      {t.events_dropped > 0 && <p class="warn">{t.events_dropped} later events were not kept.</p>}
      <div class="events">
        {t.events.map((ev, i) => (
          <EventView key={`${i}-${ev.kind}-${ev.at}`} ev={ev} events={t.events.slice(0, i)} />
        ))}
        {s.phase !== 'done' && <p class="muted pulse">{s.phase === 'running' ? 'running: new calls appear as they happen…' : `${s.phase}…`}</p>}
      </div>
    </section>
  );
}
