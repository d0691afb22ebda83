/** Tasks: the splits, a searchable page of task ids, and one task's prompt and tools. */
import { useEffect, useState } from 'preact/hooks';
import { ApiError, get } from './api';
import type { TaskRow, ToolSpec } from './types';

export interface TaskLine {
  task_id: string;
  index: number;
  toolset: string;
  turns: number;
  max_turns: number;
}

interface TaskPage {
  split: string;
  splits: Record<string, number>;
  total: number;
  offset: number;
  tasks: TaskLine[];
}

const PAGE = 50;

/** a split picker, a search box and a page of task ids; `onPick` gets the chosen id */
export function TaskPicker(props: { onPick: (id: string) => void; selected?: string | null; pageSize?: number }) {
  const [split, setSplit] = useState<string | null>(null);
  const [q, setQ] = useState('');
  const [offset, setOffset] = useState(0);
  const [page, setPage] = useState<TaskPage | null>(null);
  const [error, setError] = useState<string | null>(null);
  const size = props.pageSize ?? PAGE;

  useEffect(() => {
    const ctl = new AbortController();
    const p = new URLSearchParams({ offset: String(offset), limit: String(size) });
    if (split) p.set('split', split);
    if (q) p.set('q', q);
    const t = setTimeout(
      () =>
        get<TaskPage>(`console/tasks?${p}`, ctl.signal).then(
          (r) => (setPage(r), setError(null), split === null && setSplit(r.split)),
          (e: Error) => !ctl.signal.aborted && setError(e.message),
        ),
      q ? 200 : 0,
    );
    return () => (clearTimeout(t), ctl.abort());
  }, [split, q, offset]);

  return (
    <div class="task-picker">
      <div class="filters">
        <div class="tabs" role="tablist">
          {page &&
            Object.entries(page.splits).map(([s, n]) => (
              <button type="button" role="tab" class={s === page.split ? 'tab on' : 'tab'} onClick={() => (setSplit(s), setOffset(0))} data-split={s}>
                {s} <span class="count">{n}</span>
              </button>
            ))}
        </div>
        <input
          type="search"
          placeholder="search task id…"
          value={q}
          onInput={(e) => (setQ((e.target as HTMLInputElement).value), setOffset(0))}
          data-testid="task-search"
          aria-label="search task id"
        />
      </div>
      {error && <p class="error">{error}</p>}
      {page && (
        <>
          <ul class="task-list" data-testid="task-list">
            {page.tasks.map((t) => (
              <li>
                <button type="button" class={t.task_id === props.selected ? 'task on' : 'task'} onClick={() => props.onPick(t.task_id)} data-task={t.task_id}>
                  <span class="muted">#{t.index}</span> {t.task_id}
                </button>
              </li>
            ))}
            {page.tasks.length === 0 && <li class="muted">no task matches</li>}
          </ul>
          <div class="pager">
            <button type="button" disabled={offset === 0} onClick={() => setOffset(Math.max(0, offset - size))}>
              ‹ prev
            </button>
            <span class="muted">
              {page.total === 0 ? 0 : offset + 1}–{Math.min(offset + size, page.total)} of {page.total}
            </span>
            <button type="button" disabled={offset + size >= page.total} onClick={() => setOffset(offset + size)}>
              next ›
            </button>
          </div>
        </>
      )}
    </div>
  );
}

let toolsetsCache: Promise<Record<string, ToolSpec[]>> | null = null;
export function toolsets(): Promise<Record<string, ToolSpec[]>> {
  toolsetsCache ??= get<{ toolsets: Record<string, ToolSpec[]> }>('toolsets').then(
    (r) => r.toolsets,
    (e) => {
      toolsetsCache = null;
      throw e;
    },
  );
  return toolsetsCache;
}

export function TaskDetail(props: { id: string }) {
  const [task, setTask] = useState<TaskRow | null>(null);
  const [tools, setTools] = useState<ToolSpec[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    const ctl = new AbortController();
    setTask(null);
    get<TaskRow>(`tasks/${encodeURIComponent(props.id)}`, ctl.signal).then(
      async (t) => {
        setTask(t);
        setTools((await toolsets())[t.toolset] ?? []);
      },
      (e: Error) => !ctl.signal.aborted && setError(e instanceof ApiError && e.status === 404 ? `no task ${props.id}` : e.message),
    );
    return () => ctl.abort();
  }, [props.id]);
  if (error) return <p class="error">{error}</p>;
  if (!task) return <p class="muted">Loading…</p>;
  return (
    <div class="task-detail" data-testid="task-detail">
      <div class="transcript-head">
        <div>
          <h2>{task.task_id}</h2>
          <div class="muted">
            split {task.split} #{task.index} · toolset {task.toolset} · {task.turns} turn(s), at most {task.max_turns}
          </div>
        </div>
        <a class="button" href={`#/playground/${encodeURIComponent(task.task_id)}`}>
          Play it in the playground
        </a>
      </div>
      {task.messages.map((m) => (
        <div class={`msg msg-${m.role}`}>
          <div class="role">{m.role}</div>
          <pre class="text">{m.content}</pre>
        </div>
      ))}
      <h3>Tools</h3>
      {tools?.map((t) => (
        <details class="tool">
          <summary>
            <code>{t.name}</code> <span class="muted">{t.description}</span>
          </summary>
          <pre class="json">{JSON.stringify(t.input_schema, null, 2)}</pre>
        </details>
      ))}
    </div>
  );
}

export function TasksView(props: { id: string | null }) {
  return (
    <section class="two-col">
      <TaskPicker selected={props.id} onPick={(id) => (location.hash = `#/tasks/${encodeURIComponent(id)}`)} />
      <div>{props.id ? <TaskDetail id={props.id} /> : <p class="muted">Pick a task to read its prompt and tools.</p>}</div>
    </section>
  );
}
