/**
 * Overview: the gauges, then what a person watching a training run keeps open: per split the
 * reward over time (exact mean, p10–p90 band, the bundle's baselines as lines), failure rate and
 * episode length over time; episodes, failures, deploy and queue wait (per lane) per bucket;
 * percentiles next to the means; per task group and per task. The series come from the server (they survive a
 * reload) over a chosen window that starts at the first data kept.
 */
import { useState } from 'preact/hooks';
import { BarChart, LineChart, PALETTE, type RefLine } from './chart';
import { CostCells, CostHeads } from './cost-columns';
import { ScoreCells, ScoreHeads, scoreNames } from './score-columns';
import type { BundleInfo, Lane, Overview, RecentTasksPage, Series, SeriesWindow } from './types';
import { useGet } from './use-get';

const WINDOWS: { id: SeriesWindow; label: string }[] = [
  { id: '15m', label: '15 min' },
  { id: '1h', label: '1 h' },
  { id: '6h', label: '6 h' },
  { id: 'all', label: 'all kept' },
];

function Meter(props: { label: string; value: number; max: number; tone: string; id: string; note?: string }) {
  const pct = props.max > 0 ? Math.min(100, (props.value / props.max) * 100) : 0;
  return (
    <div class="meter" data-testid={props.id}>
      <div class="meter-head">
        <span class="meter-label">{props.label}</span>
        <span class="meter-value">
          {props.value}
          {props.note && <small> {props.note}</small>}
        </span>
      </div>
      <div class="meter-track">
        <div class="meter-fill" style={{ width: `${pct}%`, background: props.tone }} />
      </div>
    </div>
  );
}

/** slots as a row of squares: filled ones run an env */
function Slots(props: { running: number; capacity: number }) {
  const n = Math.min(props.capacity, 64);
  return (
    <div class="slots" aria-label={`${props.running} of ${props.capacity} env slots in use`}>
      {Array.from({ length: n }, (_, i) => (
        <span key={i} class={i < props.running ? 'slot on' : 'slot'} />
      ))}
      {props.capacity > n && <span class="slots-more">+{props.capacity - n}</span>}
    </div>
  );
}

const num = (v: number | null | undefined) => (v === null || v === undefined ? '—' : String(v));
const pct = (failed: number, ended: number) => (ended ? `${Math.round((failed / ended) * 1000) / 10} %` : '—');
const colorOf = (splits: string[], split: string) => PALETTE[Math.max(0, splits.indexOf(split)) % PALETTE.length]!;
const REF_COLORS = ['#6b7280', '#b45309', '#047857', '#9333ea'];
const LANE_COLORS: Record<Lane, string> = { high: '#dc2626', normal: '#2563eb', low: '#6b7280' };
/** the lanes a series has waits of, highest first (the server sends them in that order) */
const lanesOf = (s: Series) => Object.keys(s.queue_wait_s_by_lane) as Lane[];

function timeLabels(s: Series): string[] {
  return s.t.map((t) => {
    const d = new Date(t * 1000);
    return `${String(d.getHours()).padStart(2, '0')}:${String(d.getMinutes()).padStart(2, '0')}`;
  });
}

function refsOf(bundle: BundleInfo | null, split: string): RefLine[] {
  const b = bundle?.baselines[split] ?? {};
  return Object.entries(b).map(([label, y], i) => ({ label, y, color: REF_COLORS[i % REF_COLORS.length]! }));
}

function SummaryTable(props: { s: Series; splits: string[]; bundle: BundleInfo | null }) {
  const { s } = props;
  const row = (key: string, label: string, d: Series['summary']['deploy_s'], extra = '') => (
    <tr key={key} data-row={key}>
      <th>{label}</th>
      <td class="num" data-stat="n">
        {d.n}
      </td>
      <td class="num" data-stat="mean">
        {num(d.mean)}
      </td>
      <td class="num">{num(d.p10)}</td>
      <td class="num">{num(d.p50)}</td>
      <td class="num">{num(d.p90)}</td>
      <td class="num">{num(d.max)}</td>
      <td class="muted">{extra}</td>
    </tr>
  );
  return (
    <table class="grid stats" data-testid="summary">
      <thead>
        <tr>
          <th />
          <th>n</th>
          <th>mean</th>
          <th>p10</th>
          <th>p50</th>
          <th>p90</th>
          <th>max</th>
          <th>baselines</th>
        </tr>
      </thead>
      <tbody>
        {props.splits.map((split) => {
          const d = s.summary.reward[split];
          const refs = refsOf(props.bundle, split);
          return d ? row(`reward-${split}`, `reward · ${split}`, d, refs.map((r) => `${r.label} ${r.y}`).join(' · ')) : null;
        })}
        {row('deploy', 'deploy s', s.summary.deploy_s)}
        {row('queue', 'queue wait s', s.summary.queue_wait_s)}
        {lanesOf(s).map((lane) => row(`queue-${lane}`, `queue wait s · ${lane} lane`, s.summary.queue_wait_s_by_lane[lane]!))}
      </tbody>
    </table>
  );
}

function GroupsTable(props: { s: Series; splits: string[]; bundle: BundleInfo | null }) {
  const names = Object.keys(props.bundle?.groups ?? {});
  const [split, setSplit] = useState<string | null>(null);
  const [group, setGroup] = useState<string | null>(null);
  if (names.length === 0) return <p class="muted">This bundle declares no task groups (bundle.json's groups).</p>;
  const sp = split ?? props.splits[0] ?? null;
  const g = group ?? names[0]!;
  const rows = sp ? Object.entries(props.s.groups[sp]?.[g] ?? {}).sort((a, b) => a[0].localeCompare(b[0], undefined, { numeric: true })) : [];
  const scores = scoreNames(rows.map(([, r]) => r));
  return (
    <div data-testid="groups">
      <div class="filters">
        <label>
          split{' '}
          <select value={sp ?? ''} onChange={(e) => setSplit((e.target as HTMLSelectElement).value)} data-testid="groups-split">
            {props.splits.map((x) => (
              <option key={x} value={x}>
                {x}
              </option>
            ))}
          </select>
        </label>
        <label>
          group{' '}
          <select value={g} onChange={(e) => setGroup((e.target as HTMLSelectElement).value)} data-testid="groups-name">
            {names.map((x) => (
              <option key={x} value={x}>
                {x}
              </option>
            ))}
          </select>
        </label>
      </div>
      <table class="grid">
        <thead>
          <tr>
            <th>{g}</th>
            <th>episodes</th>
            <th>failure rate</th>
            <th>scored</th>
            <th>mean reward</th>
            <ScoreHeads names={scores} />
            <CostHeads mean />
            <th />
          </tr>
        </thead>
        <tbody>
          {rows.length === 0 && (
            <tr>
              <td colSpan={10 + scores.length} class="muted">
                no episode of this split in the window
              </td>
            </tr>
          )}
          {rows.map(([value, r]) => (
            <tr key={value} data-group-value={value}>
              <td>{value}</td>
              <td class="num">{r.ended}</td>
              <td class="num">{pct(r.failed, r.ended)}</td>
              <td class="num">{r.n}</td>
              <td class="num" data-stat="mean">
                {num(r.mean)}
              </td>
              <ScoreCells names={scores} scores={r.scores} />
              <CostCells cost={r.cost} />
              <td class="bar-cell">{r.mean !== null && <span class="hbar" style={{ width: `${Math.max(0, Math.min(1, r.mean)) * 100}%` }} />}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

function RecentTasks(props: { endedTick: number }) {
  const [n, setN] = useState(200);
  const got = useGet<RecentTasksPage>(`console/recent-tasks?n=${n}`, { refresh: props.endedTick, delayMs: 300 });
  const r = got.data;
  const shown = r?.tasks.slice(0, 20) ?? [];
  const scores = scoreNames(shown);
  return (
    <div data-testid="recent-tasks">
      <div class="filters">
        <label>
          over the last{' '}
          <select value={String(n)} onChange={(e) => setN(Number((e.target as HTMLSelectElement).value))}>
            {[50, 200, 1000, 10000].map((x) => (
              <option key={x} value={String(x)}>
                {x}
              </option>
            ))}
          </select>{' '}
          ended episodes kept {r && <span class="muted">({r.episodes} looked at)</span>}
        </label>
      </div>
      {got.error && <p class="error">{got.error}</p>}
      <table class="grid">
        <thead>
          <tr>
            <th>task</th>
            <th>split</th>
            <th>episodes</th>
            <th>failures</th>
            <th>mean reward</th>
            <ScoreHeads names={scores} />
            <CostHeads mean />
            <th>last reward</th>
          </tr>
        </thead>
        <tbody>
          {shown.map((t) => (
            <tr key={t.task_id} data-task={t.task_id}>
              <td>
                <a href={`#/tasks/${encodeURIComponent(t.task_id)}`}>{t.task_id}</a>
              </td>
              <td>{t.split}</td>
              <td class="num">{t.ended}</td>
              <td class="num">{t.failed}</td>
              <td class="num" data-stat="mean">
                {num(t.mean)}
              </td>
              <ScoreCells names={scores} scores={t.scores} />
              <CostCells cost={t.cost} />
              <td class="num">{num(t.last_reward)}</td>
            </tr>
          ))}
        </tbody>
      </table>
      {r && r.tasks.length > 20 && <p class="muted">{r.tasks.length - 20} more tasks</p>}
    </div>
  );
}

/** What each env runs with: the lock-down every env gets and what its bundle asked for (docs/security.md). */
function EnvsTable(props: { bundle: BundleInfo | null }) {
  const envs = Object.entries(props.bundle?.envs ?? {});
  if (envs.length === 0) return <p class="muted">The server says nothing of its envs' lock-down yet.</p>;
  return (
    <table class="grid" data-testid="envs-granted">
      <thead>
        <tr>
          <th>env</th>
          <th>runtime</th>
          <th>capabilities</th>
          <th>root</th>
          <th>user</th>
          <th>memory, CPUs, processes</th>
          <th>storage</th>
          <th>not enforced</th>
        </tr>
      </thead>
      <tbody>
        {envs.map(([name, g]) => (
          <tr key={name} data-testid={`env-${name}`}>
            <td>{name}</td>
            <td>{g.runtime}</td>
            <td title={g.capabilities.join(', ')}>{g.added.length ? `defaults + ${g.added.join(', ')}` : 'defaults'}</td>
            <td>{g.root === 'read-only' ? `read-only, /tmp ${g.tmp_mb} MB` : 'writable'}</td>
            <td>{g.user ?? "image's"}</td>
            <td>
              {g.memory_mb} MB, {g.cpus}, {g.pids}
            </td>
            <td>{g.storage_mb === null ? 'unbounded' : `${g.storage_mb} MB`}</td>
            <td>{g.not_enforced.join('; ') || '—'}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

export function OverviewView(props: {
  overview: Overview | null;
  connected: boolean;
  bundle: BundleInfo | null;
  window: SeriesWindow;
  setWindow: (w: SeriesWindow) => void;
  endedTick: number;
}) {
  const o = props.overview;
  const s = o?.series;
  if (!o || !s) return <p class="muted">Waiting for the server…</p>;

  const labels = timeLabels(s);
  const splits = Object.keys(s.by_split).sort();
  const per = s.bucket_s === 60 ? 'per minute' : `per ${s.bucket_s / 60} min`;
  const failureKeys = Object.keys(s.failures);
  const binLabels = ['<0', ...s.rewards.edges.slice(0, -1).map((e) => `${e.toFixed(1)}–${(e + 0.1).toFixed(1)}`.replace(/0\./g, '.')), '>1'];

  return (
    <section class="overview">
      <div class="gauges">
        <div class="gauge-card" data-testid="gauge-envs">
          <Meter id="meter-envs" label="Envs running" value={o.running} max={o.capacity} tone="#2563eb" note={`/ ${o.capacity}`} />
          <Slots running={o.running} capacity={o.capacity} />
        </div>
        <div class="gauge-card">
          <Meter id="meter-waiting" label="Resets waiting" value={o.waiting} max={Math.max(o.capacity, o.waiting)} tone="#d97706" />
          <div class="muted" data-testid="waiting-by-lane">
            {(Object.keys(o.waiting_by_lane) as Lane[]).map((lane, i) => (
              <span key={lane} data-lane={lane}>
                {i > 0 && ' · '}
                {lane} {o.waiting_by_lane[lane]}
              </span>
            ))}
          </div>
          <Meter id="meter-deploying" label="Deploys in flight" value={o.deploying} max={Math.max(1, o.capacity)} tone="#7c3aed" />
        </div>
        <div class="gauge-card small">
          <div>
            <span class={props.connected ? 'dot live' : 'dot'} /> {props.connected ? 'live' : 'reconnecting…'}
            {o.draining && <strong class="warn"> draining</strong>}
          </div>
          {o.images && (
            <div class="warn" data-testid="env-images" title="env images build in the background; a reset of a task whose image is not ready waits for it">
              {o.images.summary}
            </div>
          )}
          <div class="muted">
            history {o.history.kept}/{o.history.size} ended episodes kept
          </div>
          {o.recorder && (
            <div class="muted" title={o.recorder.dir}>
              recording: {o.recorder.written} written, {o.recorder.dropped} dropped, {o.recorder.failed} failed
            </div>
          )}
        </div>
      </div>

      <div class="window-bar">
        <span class="muted">window</span>
        {WINDOWS.map((w) => (
          <button key={w.id} type="button" class={props.window === w.id ? 'tab on' : 'tab'} onClick={() => props.setWindow(w.id)} data-window={w.id}>
            {w.label}
          </button>
        ))}
        <span class="muted">
          {labels.length} bucket(s) of {s.bucket_s / 60} min, from {labels[0]}
          {s.kept_since !== null && ` · data kept since ${new Date(s.kept_since * 1000).toLocaleTimeString()}`}
        </span>
      </div>

      <SummaryTable s={s} splits={splits} bundle={props.bundle} />

      <div class="charts">
        {splits.map((split) => {
          const r = s.by_split[split]!.reward;
          return (
            <LineChart
              key={`reward-${split}`}
              id={`chart-reward-${split}`}
              title={`Reward over time · ${split} (mean, p10–p90 band, ${per})`}
              slotLabels={labels}
              yRange={[0, 1]}
              series={[{ label: `${split} mean`, color: colorOf(splits, split), values: r.mean, band: { lo: r.p10, hi: r.p90 } }]}
              refs={refsOf(props.bundle, split)}
              empty="no scored episode of this split in the window"
            />
          );
        })}
        <LineChart
          id="chart-failure-rate"
          title={`Failure rate per split (%, ${per})`}
          slotLabels={labels}
          series={splits.map((split) => ({
            label: split,
            color: colorOf(splits, split),
            values: s.by_split[split]!.ended.map((e, i) => (e ? Math.round((s.by_split[split]!.failed[i]! / e) * 1000) / 10 : null)),
          }))}
        />
        <LineChart
          id="chart-length"
          title={`Episode length per split (mean steps, dashed: turns; ${per})`}
          slotLabels={labels}
          series={splits.flatMap((split) => [
            { label: `${split} steps`, color: colorOf(splits, split), values: s.by_split[split]!.steps_mean },
            { label: `${split} turns`, color: colorOf(splits, split), values: s.by_split[split]!.turns_mean, dash: true },
          ])}
        />
        <BarChart
          id="chart-rate"
          title={`Episodes ended (${per})`}
          slotLabels={labels}
          mode="stack"
          series={splits.map((split) => ({ label: split, color: colorOf(splits, split), values: s.by_split[split]!.ended }))}
        />
        <BarChart
          id="chart-failures"
          title={`Failures by reason (${per}, stacked)`}
          slotLabels={labels}
          mode="stack"
          empty="no failure in this window"
          series={failureKeys.map((k, i) => ({ label: k, color: PALETTE[(i + 1) % PALETTE.length]!, values: s.failures[k]! }))}
        />
        <LineChart
          id="chart-deploy"
          title={`Deploy latency (s, ${per}: mean, dashed: max)`}
          slotLabels={labels}
          series={[
            { label: 'mean', color: PALETTE[0]!, values: s.deploy_s.mean },
            { label: 'max', color: PALETTE[1]!, values: s.deploy_s.max, dash: true },
          ]}
        />
        <LineChart
          id="chart-queue"
          title={`Queue wait per lane (s, ${per}: mean, dashed: max)`}
          slotLabels={labels}
          series={lanesOf(s).flatMap((lane) => [
            { label: `${lane} mean`, color: LANE_COLORS[lane], values: s.queue_wait_s_by_lane[lane]!.mean },
            { label: `${lane} max`, color: LANE_COLORS[lane], values: s.queue_wait_s_by_lane[lane]!.max, dash: true },
          ])}
        />
        <BarChart
          id="chart-rewards"
          title="Reward distribution per split (the window; bars side by side)"
          slotLabels={binLabels}
          mode="group"
          empty="no scored episode in this window"
          series={splits
            .filter((split) => s.rewards.by_split[split])
            .map((split) => ({
              label: `${split} (n=${s.rewards.by_split[split]!.n}, mean ${num(s.rewards.by_split[split]!.mean)})`,
              color: colorOf(splits, split),
              values: s.rewards.by_split[split]!.counts,
            }))}
        />
      </div>

      <h2>Per task group</h2>
      <GroupsTable s={s} splits={splits} bundle={props.bundle} />
      <h2>Per task</h2>
      <RecentTasks endedTick={props.endedTick} />
      <h2>Envs</h2>
      <EnvsTable bundle={props.bundle} />
    </section>
  );
}
