/** Tasks: the splits, a searchable page of task ids, and one task's prompt and tools. */
import { useState } from 'preact/hooks';
import { get } from './api';
import { Json, Messages } from './text';
import type { ConsoleTasksPage, TaskRow, ToolSpec } from './types';
import { useGet } from './use-get';

const PAGE = 50;

/** a split picker, a search box and a page of task ids; `onPick` gets the chosen id */
export function TaskPicker(props: { onPick: (id: string) => void; selected?: string | null; pageSize?: number }) {
  const [split, setSplit] = useState<string | null>(null);
  const [q, setQ] = useState('');
  const [offset, setOffset] = useState(0);
  const size = props.pageSize ?? PAGE;
  const p = new URLSearchParams({ offset: String(offset), limit: String(size) });
  if (split) p.set('split', split);
  if (q) p.set('q', q);
  const { data: page, error } = useGet<ConsoleTasksPage>(`console/tasks?${p}`, { delayMs: q ? 200 : 0, onData: (r) => split === null && setSplit(r.split) });

  return (
    <div class="task-picker">
      <div class="filters">
        <div class="tabs" role="tablist">
          {page &&
            Object.entries(page.splits).map(([s, n]) => (
              <button key={s} type="button" role="tab" class={s === page.split ? 'tab on' : 'tab'} onClick={() => (setSplit(s), setOffset(0))} data-split={s}>
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
              <li key={t.task_id}>
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
  const [tools, setTools] = useState<ToolSpec[] | null>(null);
  const got = useGet<TaskRow>(`tasks/${encodeURIComponent(props.id)}`, {
    onData: (t) =>
      void toolsets().then(
        (all) => setTools(all[t.toolset] ?? []),
        () => setTools([]),
      ),
  });
  const task = got.data?.task_id === props.id ? got.data : null;
  if (got.error && !task) return <p class="error">{got.notFound ? `no task ${props.id}` : got.error}</p>;
  if (!task) return <p class="muted">Loading…</p>;
  return (
    <div class="task-detail" data-testid="task-detail">
      <div class="transcript-head">
        <div>
          <h2>{task.task_id}</h2>
          <div class="muted">
            split {task.split} #{task.index} · toolset {task.toolset} · {task.turns} turn(s), at most {task.max_turns}
            {Object.entries(task.groups).map(([k, v]) => ` · ${k} ${v}`)}
          </div>
        </div>
        <a class="button" href={`#/playground/${encodeURIComponent(task.task_id)}`}>
          Play it in the playground
        </a>
      </div>
      <Messages messages={task.messages} />
      <h3>Tools</h3>
      {tools?.map((t) => (
        <details key={t.name} class="tool">
          <summary>
            <code>{t.name}</code> <span class="muted">{t.description}</span>
          </summary>
          <Json value={t.input_schema} />
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
