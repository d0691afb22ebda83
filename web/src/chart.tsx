/** A uPlot chart as a Preact component: made once, fed new data, resized with its box. */
import { useEffect, useRef } from 'preact/hooks';
import uPlot, { type AlignedData, type Options, type Series } from 'uplot';
import 'uplot/dist/uPlot.min.css';

export const PALETTE = ['#2563eb', '#dc2626', '#16a34a', '#d97706', '#7c3aed', '#0891b2', '#db2777', '#4b5563'];

export interface ChartProps {
  title: string;
  /** x then one array per series */
  data: AlignedData;
  series: Series[];
  /** x is a time in unix seconds (default) or a plain number */
  time?: boolean;
  height?: number;
  xValues?: (u: uPlot, splits: number[]) => string[];
  /** tick positions on x (non-time charts) */
  xSplits?: number[];
  yLabel?: string;
  /** a testid for the wrapper */
  id?: string;
  empty?: string;
}

export function bars(size = 0.7): Series.PathBuilder {
  return uPlot.paths.bars!({ size: [size, 60] });
}

export function Chart(props: ChartProps) {
  const box = useRef<HTMLDivElement>(null);
  const plot = useRef<uPlot | null>(null);
  const shape = `${props.series.map((s) => s.label).join('|')}`;

  useEffect(() => {
    const el = box.current;
    if (!el) return;
    const opts: Options = {
      width: Math.max(200, el.clientWidth),
      height: props.height ?? 180,
      legend: { show: true, live: false },
      cursor: { drag: { x: false, y: false } },
      scales: { x: { time: props.time !== false }, y: { range: (_u, min, max) => [Math.min(0, min), max > 0 ? max * 1.1 : 1] } },
      axes: [
        {
          stroke: '#6b7280',
          grid: { stroke: '#eef0f3' },
          ...(props.xValues ? { values: props.xValues } : {}),
          ...(props.xSplits ? { splits: () => props.xSplits! } : {}),
        },
        { stroke: '#6b7280', grid: { stroke: '#eef0f3' }, size: 48, ...(props.yLabel ? { label: props.yLabel, labelSize: 16 } : {}) },
      ],
      series: [{}, ...props.series],
    };
    const u = new uPlot(opts, props.data, el);
    plot.current = u;
    const ro = new ResizeObserver(() => u.setSize({ width: Math.max(200, el.clientWidth), height: props.height ?? 180 }));
    ro.observe(el);
    return () => {
      ro.disconnect();
      u.destroy();
      plot.current = null;
    };
    // a new set of series makes a new chart; new data only updates it
  }, [shape]);

  useEffect(() => {
    plot.current?.setData(props.data);
  }, [props.data]);

  const hasData = props.data.slice(1).some((s) => (s as (number | null | undefined)[]).some((v) => v !== null && v !== undefined && v !== 0));
  return (
    <figure class="chart" data-testid={props.id}>
      <figcaption>{props.title}</figcaption>
      <div ref={box} class="chart-box" />
      {!hasData && <div class="chart-empty">{props.empty ?? 'nothing in the last hour yet'}</div>}
    </figure>
  );
}
