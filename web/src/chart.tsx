/**
 * The console's charts as plain SVG: bars that stack (counts of one bucket, one on another) or
 * stand side by side (one bar per series in each slot), and lines with an optional band and
 * horizontal reference lines (baselines). No bar ever covers another: every count has its own
 * rectangle, which carries its series, slot and value as data attributes and a tooltip.
 */
import type { ComponentChildren } from 'preact';

export const PALETTE = ['#2563eb', '#dc2626', '#16a34a', '#d97706', '#7c3aed', '#0891b2', '#db2777', '#4b5563'];

const W = 640;
const H = 200;
const PAD = { left: 44, right: 12, top: 10, bottom: 26 };
const PLOT_W = W - PAD.left - PAD.right;
const PLOT_H = H - PAD.top - PAD.bottom;

export interface BarSeries {
  label: string;
  color: string;
  values: readonly number[];
}

export interface LineSeries {
  label: string;
  color: string;
  values: readonly (number | null)[];
  /** a shaded band around the line (e.g. p10–p90) */
  band?: { lo: readonly (number | null)[]; hi: readonly (number | null)[] };
  dash?: boolean;
}

export interface RefLine {
  label: string;
  color: string;
  y: number;
}

interface Frame {
  title: string;
  id: string;
  /** one label per slot */
  slotLabels: readonly string[];
  empty: string;
  hasData: boolean;
  legend: { label: string; color: string; dash?: boolean }[];
  note?: ComponentChildren;
}

function niceMax(max: number): number {
  if (!(max > 0)) return 1;
  const p = 10 ** Math.floor(Math.log10(max));
  for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= max) return m * p;
  return 10 * p;
}

const fmt = (v: number) => (v === 0 ? '0' : Math.abs(v) >= 100 ? v.toFixed(0) : String(Number(v.toPrecision(2))));

/** the figure around a plot: title, axes, slot labels (a few of them), legend */
function Figure(props: Frame & { yMin: number; yMax: number; children: ComponentChildren }) {
  const n = props.slotLabels.length;
  const every = Math.max(1, Math.ceil(n / 8));
  const ticks = [0, 0.25, 0.5, 0.75, 1].map((f) => props.yMin + (props.yMax - props.yMin) * f);
  const y = (v: number) => PAD.top + PLOT_H - ((v - props.yMin) / (props.yMax - props.yMin)) * PLOT_H;
  return (
    <figure class="chart" data-testid={props.id}>
      <figcaption>{props.title}</figcaption>
      <svg viewBox={`0 0 ${W} ${H}`} class="chart-svg" role="img" aria-label={props.title}>
        {ticks.map((t) => (
          <g key={t}>
            <line x1={PAD.left} x2={W - PAD.right} y1={y(t)} y2={y(t)} class="grid" />
            <text x={PAD.left - 6} y={y(t) + 4} class="tick" text-anchor="end">
              {fmt(t)}
            </text>
          </g>
        ))}
        {props.slotLabels.map((l, i) =>
          i % every === 0 || i === n - 1 ? (
            <text key={`x${i}`} x={PAD.left + ((i + 0.5) / n) * PLOT_W} y={H - 8} class="tick" text-anchor="middle">
              {l}
            </text>
          ) : null,
        )}
        {props.children}
      </svg>
      <div class="legend">
        {props.legend.map((l) => (
          <span key={l.label} class="legend-item">
            <i style={{ background: l.dash ? 'transparent' : l.color, borderColor: l.color }} class={l.dash ? 'dash' : ''} /> {l.label}
          </span>
        ))}
        {props.note}
      </div>
      {!props.hasData && <div class="chart-empty">{props.empty}</div>}
    </figure>
  );
}

/**
 * Bars per slot: `stack` piles a slot's counts one on another, `group` puts them side by side.
 * Either way each non-zero value is its own rectangle.
 */
export function BarChart(props: {
  id: string;
  title: string;
  slotLabels: readonly string[];
  series: readonly BarSeries[];
  mode: 'stack' | 'group';
  empty?: string;
  note?: ComponentChildren;
}) {
  const n = props.slotLabels.length;
  const k = props.series.length;
  const totals = props.slotLabels.map((_, i) => props.series.reduce((a, s) => a + (s.values[i] ?? 0), 0));
  const peak = props.mode === 'stack' ? Math.max(0, ...totals) : Math.max(0, ...props.series.flatMap((s) => s.values));
  const yMax = niceMax(peak);
  const slotW = PLOT_W / Math.max(1, n);
  // a few slots make wide bars: no wider than this, centred in their slot
  const span = Math.min(slotW, 120);
  const y = (v: number) => PAD.top + PLOT_H - (v / yMax) * PLOT_H;
  const rects: preact.JSX.Element[] = [];
  for (let i = 0; i < n; i++) {
    let base = 0;
    props.series.forEach((s, j) => {
      const v = s.values[i] ?? 0;
      if (v <= 0) return;
      const w = props.mode === 'stack' ? span * 0.7 : (span * 0.8) / k;
      const x = PAD.left + i * slotW + (slotW - span) / 2 + (props.mode === 'stack' ? span * 0.15 : span * 0.1 + j * w);
      const top = props.mode === 'stack' ? y(base + v) : y(v);
      const bottom = props.mode === 'stack' ? y(base) : y(0);
      base += v;
      rects.push(
        <rect
          key={`${i}-${j}`}
          x={x}
          y={top}
          width={Math.max(1, w - (props.mode === 'group' ? 1 : 0))}
          height={Math.max(1, bottom - top)}
          fill={s.color}
          data-series={s.label}
          data-slot={i}
          data-value={v}
          class="bar"
        >
          <title>{`${s.label}: ${v} (${props.slotLabels[i]})`}</title>
        </rect>,
      );
    });
  }
  return (
    <Figure
      id={props.id}
      title={props.title}
      slotLabels={props.slotLabels}
      yMin={0}
      yMax={yMax}
      empty={props.empty ?? 'nothing in this window yet'}
      hasData={rects.length > 0}
      legend={props.series.map((s) => ({ label: s.label, color: s.color }))}
      note={props.note}
    >
      {rects}
    </Figure>
  );
}

/** Lines over slots (a gap where a value is null), bands behind them, reference lines across. */
export function LineChart(props: {
  id: string;
  title: string;
  slotLabels: readonly string[];
  series: readonly LineSeries[];
  refs?: readonly RefLine[];
  /** fixed y range (rewards: [0, 1]); otherwise from 0 to the data */
  yRange?: [number, number];
  empty?: string;
  note?: ComponentChildren;
}) {
  const n = props.slotLabels.length;
  const refs = props.refs ?? [];
  const all = [...props.series.flatMap((s) => [...s.values, ...(s.band?.hi ?? [])]), ...refs.map((r) => r.y)].filter((v): v is number => v !== null);
  const [yMin, yMax] = props.yRange ? [Math.min(props.yRange[0], ...all), Math.max(props.yRange[1], ...all)] : [0, niceMax(Math.max(0, ...all))];
  const x = (i: number) => PAD.left + ((i + 0.5) / Math.max(1, n)) * PLOT_W;
  const y = (v: number) => PAD.top + PLOT_H - ((v - yMin) / (yMax - yMin || 1)) * PLOT_H;
  // runs of consecutive non-null points: a line never bridges a bucket without data
  const runs = (vals: readonly (number | null)[]) => {
    const out: number[][] = [];
    let cur: number[] = [];
    vals.forEach((v, i) => {
      if (v === null) {
        if (cur.length) out.push(cur);
        cur = [];
      } else cur.push(i);
    });
    if (cur.length) out.push(cur);
    return out;
  };
  const hasData = props.series.some((s) => s.values.some((v) => v !== null));
  return (
    <Figure
      id={props.id}
      title={props.title}
      slotLabels={props.slotLabels}
      yMin={yMin}
      yMax={yMax}
      empty={props.empty ?? 'nothing in this window yet'}
      hasData={hasData}
      legend={[
        ...props.series.map((s) => ({ label: s.label, color: s.color, dash: s.dash })),
        ...refs.map((r) => ({ label: `${r.label} ${r.y}`, color: r.color, dash: true })),
      ]}
      note={props.note}
    >
      {props.series.map((s) =>
        s.band
          ? runs(s.values).map((run) => {
              const lo = run.map((i) => [x(i), y(s.band!.lo[i] ?? s.values[i]!)] as const);
              const hi = run.map((i) => [x(i), y(s.band!.hi[i] ?? s.values[i]!)] as const);
              const pts = [...hi, ...lo.reverse()].map(([a, b]) => `${a},${b}`).join(' ');
              return <polygon key={`band-${s.label}-${run[0]}`} points={pts} fill={s.color} class="band" data-band={s.label} />;
            })
          : null,
      )}
      {refs.map((r) => (
        <g key={`ref-${r.label}`} data-ref={r.label} data-y={r.y}>
          <line x1={PAD.left} x2={W - PAD.right} y1={y(r.y)} y2={y(r.y)} stroke={r.color} class="ref" />
          <text x={W - PAD.right - 2} y={y(r.y) - 3} class="ref-label" text-anchor="end" fill={r.color}>
            {r.label} {r.y}
          </text>
        </g>
      ))}
      {props.series.map((s) =>
        runs(s.values).map((run) => (
          <g key={`line-${s.label}-${run[0]}`} data-line={s.label}>
            {run.length > 1 && (
              <polyline points={run.map((i) => `${x(i)},${y(s.values[i]!)}`).join(' ')} stroke={s.color} class={s.dash ? 'line dash' : 'line'} fill="none" />
            )}
            {run.map((i) => (
              <circle key={i} cx={x(i)} cy={y(s.values[i]!)} r={2.5} fill={s.color} data-slot={i} data-value={s.values[i]}>
                <title>{`${s.label}: ${s.values[i]} (${props.slotLabels[i]})`}</title>
              </circle>
            ))}
          </g>
        )),
      )}
    </Figure>
  );
}
