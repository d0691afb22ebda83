/**
 * Playground: start an episode of a chosen task through POST /console/playground (the /episodes
 * machinery: it queues like any reset and counts against the cap, with a tighter idle bound),
 * read the prompt, call tools through forms made from their schemas, end turns, see the results
 * and the reward; close it with DELETE. While the page is open it says so every
 * CONSOLE_EPISODE_PING_S; when the page goes away (tab closed, reload, another site) it ends the
 * episode with a keepalive DELETE, so the slot is back at once.
 */
import { useEffect, useRef, useState } from 'preact/hooks';
import { CONSOLE_EPISODE_PING_S } from '../../src/defaults';
import { api, ApiError, sendOnExit } from './api';
import { TaskPicker } from './tasks';
import { compactJson, Folded, Messages, resultText } from './text';
import type { EpisodeSummary, JsonSchema, Started, StepReply } from './types';
import { SchemaForm } from './schema-form';

interface Call {
  tool: string;
  args: unknown;
  reply: StepReply | null;
  error: string | null;
}

const text = (r: unknown) => resultText(r) ?? compactJson(r);

export function PlaygroundView(props: { taskId: string | null; live: EpisodeSummary[]; capacity: number | null }) {
  const [task, setTask] = useState<string | null>(props.taskId);
  const [label, setLabel] = useState<string | null>(null);
  const [starting, setStarting] = useState(false);
  const [ep, setEp] = useState<Started | null>(null);
  const [calls, setCalls] = useState<Call[]>([]);
  const [tool, setTool] = useState<string>('');
  const [busy, setBusy] = useState(false);
  const [done, setDone] = useState<StepReply | null>(null);
  const [closed, setClosed] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const starter = useRef<AbortController | null>(null);
  const logEnd = useRef<HTMLDivElement>(null);

  // the newest call, or the end, in view
  useEffect(() => {
    if (calls.length) logEnd.current?.scrollIntoView({ block: 'end', behavior: 'auto' });
  }, [calls.length, done]);

  useEffect(() => {
    if (props.taskId && !ep && !starting) setTask(props.taskId);
  }, [props.taskId]);

  // the open episode's path, set the moment its start returns (before it renders): a page that
  // goes away (tab closed, reload, another site) in any moment after that ends it
  const leaving = useRef<string | null>(null);
  useEffect(() => {
    const leave = () => {
      if (leaving.current !== null) sendOnExit('DELETE', leaving.current);
    };
    addEventListener('pagehide', leave);
    return () => removeEventListener('pagehide', leave);
  }, []);

  // an open episode: ping while the page is here
  const open = ep !== null && !closed ? ep.episode_id : null;
  useEffect(() => {
    if (open === null) return;
    const ping = setInterval(() => void api('GET', `episodes/${encodeURIComponent(open)}`).catch(() => undefined), CONSOLE_EPISODE_PING_S * 1000);
    return () => clearInterval(ping);
  }, [open]);

  const start = async () => {
    if (!task) return;
    const l = `console-${Math.random().toString(36).slice(2, 10)}`;
    setLabel(l);
    setStarting(true);
    setError(null);
    setCalls([]);
    setDone(null);
    setClosed(false);
    const ctl = new AbortController();
    starter.current = ctl;
    try {
      const r = await api<Started>('POST', 'console/playground', { task_id: task, episode_id: l }, ctl.signal);
      leaving.current = `episodes/${encodeURIComponent(r.episode_id)}`;
      setEp(r);
      setTool(r.observation.tools.find((t) => t.name !== 'end_turn')?.name ?? 'end_turn');
    } catch (e) {
      if (!ctl.signal.aborted) setError(e instanceof ApiError ? `${e.status}: ${e.message}` : (e as Error).message);
    } finally {
      setStarting(false);
      starter.current = null;
    }
  };

  const call = async (name: string, args: unknown) => {
    if (!ep) return;
    setBusy(true);
    const entry: Call = { tool: name, args, reply: null, error: null };
    try {
      entry.reply = await api<StepReply>('POST', `episodes/${ep.episode_id}/step`, { type: 'call_tool', tool_name: name, arguments: args });
      if (entry.reply.done) setDone(entry.reply);
    } catch (e) {
      entry.error = (e as Error).message;
    }
    setCalls((cs) => [...cs, entry]);
    setBusy(false);
  };

  const close = async () => {
    if (!ep) return;
    try {
      await api('DELETE', `episodes/${ep.episode_id}`);
    } catch (e) {
      if (!(e instanceof ApiError && e.status === 404)) setError((e as Error).message);
    }
    leaving.current = null;
    setClosed(true);
  };

  const reset = () => {
    leaving.current = null;
    setEp(null);
    setCalls([]);
    setDone(null);
    setClosed(false);
    setLabel(null);
  };

  // while the reset waits: this episode's place in the FIFO queue, from the live list
  const mine = label ? props.live.find((e) => e.client_label === label) : undefined;
  const waiting = props.live.filter((e) => e.phase === 'waiting').sort((a, b) => a.created_at.localeCompare(b.created_at));
  const place = mine && mine.phase === 'waiting' ? waiting.findIndex((e) => e.episode_id === mine.episode_id) + 1 : 0;

  if (!ep) {
    return (
      <section class="two-col">
        <TaskPicker selected={task} onPick={setTask} pageSize={20} />
        <div class="play-start">
          <h2>Playground</h2>
          <p>
            Task: <b data-testid="chosen-task">{task ?? 'pick one'}</b>
          </p>
          <p class="muted">The episode runs on the same /episodes machinery as any client: it waits for a slot like any reset and counts against the cap.</p>
          {!starting ? (
            <button type="button" disabled={!task} onClick={start} data-testid="start">
              Start episode
            </button>
          ) : (
            <div class="starting" data-testid="starting">
              {mine?.phase === 'waiting' ? (
                <p>
                  Waiting for an env slot: place <b>{place}</b> of {waiting.length} in the queue ({props.capacity ?? '?'} slots).
                </p>
              ) : mine?.phase === 'deploying' ? (
                <p>Deploying the env…</p>
              ) : (
                <p>Starting…</p>
              )}
              <button type="button" onClick={() => starter.current?.abort()}>
                Cancel
              </button>
            </div>
          )}
          {error && <p class="error">{error}</p>}
        </div>
      </section>
    );
  }

  const tools = ep.observation.tools;
  const spec = tools.find((t) => t.name === tool);
  return (
    <section class="playground" data-testid="playground" data-episode={ep.episode_id}>
      <div class="transcript-head">
        <div>
          <h2>{ep.observation.task_id}</h2>
          <div class="muted">
            episode {ep.episode_id} · split {ep.observation.split} · {ep.observation.turns} turn(s)
          </div>
        </div>
        <div class="head-right">
          <a href={`#/episodes/${ep.episode_id}`}>transcript</a>
          {!closed ? (
            <button type="button" onClick={close} data-testid="close">
              Close episode
            </button>
          ) : (
            <button type="button" onClick={reset} data-testid="new">
              New episode
            </button>
          )}
        </div>
      </div>
      <div class="play-grid">
        <div class="play-log">
          <Messages messages={ep.observation.messages} testidPrefix="prompt" />
          {calls.map((c, i) => (
            <article key={i} class={c.tool === 'end_turn' ? 'ev ev-turn' : 'ev ev-call'} data-testid="play-call" data-tool={c.tool}>
              <header>
                <strong>
                  {i + 1}. {c.tool}
                </strong>
              </header>
              <pre class="json">{compactJson(c.args)}</pre>
              {c.error && <p class="error">{c.error}</p>}
              {c.reply?.observation.error && (
                <div class="call-error">
                  <Folded text={c.reply.observation.error.message} label={`error · ${c.reply.observation.error.error_type}`} />
                </div>
              )}
              {c.reply?.observation.result && (
                <div class={c.reply.observation.result.is_error ? 'call-result call-error' : 'call-result'}>
                  <Folded text={text(c.reply.observation.result)} label="result" testid="play-result" />
                </div>
              )}
            </article>
          ))}
          {done && (
            <article class={`ev ev-end ${done.observation.failure ? 'failed' : ''}`} data-testid="play-done">
              <header>
                <strong>episode over · {done.observation.end_reason}</strong>
              </header>
              <div class="big">
                reward <b data-testid="play-reward">{done.reward === null ? '—' : done.reward}</b>
              </div>
              {done.observation.scores && (
                <div>
                  scores:{' '}
                  {Object.entries(done.observation.scores).map(([k, v]) => (
                    <span key={k} class="pill">
                      {k} {v}
                    </span>
                  ))}
                </div>
              )}
              {done.observation.timings && (
                <div class="muted">
                  queued {done.observation.timings.queued_s}s · deploy {done.observation.timings.deploy_s}s · running {done.observation.timings.running_s}s
                </div>
              )}
              {done.observation.failure && <pre class="text">{done.observation.failure.message}</pre>}
            </article>
          )}
          <div ref={logEnd} />
        </div>
        <div class="play-tools">
          {!done && !closed ? (
            <>
              <label>
                tool{' '}
                <select value={tool} onChange={(e) => setTool((e.target as HTMLSelectElement).value)} data-testid="tool-select">
                  {tools.map((t) => (
                    <option key={t.name} value={t.name}>
                      {t.name}
                    </option>
                  ))}
                </select>
              </label>
              {spec && <p class="hint">{spec.description}</p>}
              {/* keyed by the tool: choosing another mounts a fresh form, so nothing typed after the
                  choice is wiped by a reset that runs later */}
              {spec && (
                <SchemaForm key={spec.name} tool={spec.name} schema={spec.input_schema as JsonSchema} busy={busy} onSubmit={(args) => call(spec.name, args)} />
              )}
              <button type="button" class="secondary" disabled={busy} onClick={() => call('end_turn', {})} data-testid="end-turn">
                End turn
              </button>
            </>
          ) : (
            <p class="muted">{closed ? 'Closed: its env is torn down.' : 'The episode is over; close it or start another.'}</p>
          )}
          {error && <p class="error">{error}</p>}
        </div>
      </div>
    </section>
  );
}
