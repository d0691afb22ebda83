/** Overview: the gauges as pictures and the last hour's series as charts, live. */
import { useMemo } from 'preact/hooks';
import type { AlignedData } from 'uplot';
import { bars, Chart, PALETTE } from './chart';
import type { Overview } from './types';

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
        <span class={i < props.running ? 'slot on' : 'slot'} />
      ))}
      {props.capacity > n && <span class="slots-more">+{props.capacity - n}</span>}
    </div>
  );
}

const nz = (xs: (number | null)[]) => xs.map((x) => (x === null ? null : x));

export function OverviewView(props: { overview: Overview | null; connected: boolean }) {
  const o = props.overview;
  const s = o?.series;

  const deploy = useMemo<AlignedData | null>(() => (s ? [s.t, nz(s.deploy_s.mean), nz(s.deploy_s.max)] : null), [s]);
  const queue = useMemo<AlignedData | null>(() => (s ? [s.t, nz(s.queue_wait_s.mean), nz(s.queue_wait_s.max)] : null), [s]);
  const perMin = useMemo<AlignedData | null>(() => (s ? [s.t, s.episodes_ended] : null), [s]);
  const failureKeys = s ? Object.keys(s.failures) : [];
  const failures = useMemo<AlignedData | null>(() => (s ? [s.t, ...Object.values(s.failures)] : null), [s]);
  const splits = s ? Object.keys(s.rewards.by_split).sort() : [];
  const centres = s ? [-0.05, ...s.rewards.edges.slice(0, -1).map((e) => e + 0.05), 1.05] : [];
  const rewards = useMemo<AlignedData | null>(() => (s ? [centres, ...splits.map((k) => s.rewards.by_split[k]!.counts)] : null), [s]);
  // bins [0, .1), [.1, .2), …, [.9, 1] (1 included), labelled by their range
  const binLabel = (v: number) => (v < 0 ? '<0' : v > 1 ? '>1' : `${(v - 0.05).toFixed(1)}–${(v + 0.05).toFixed(1)}`.replace(/0\./g, '.'));

  if (!o || !s) return <p class="muted">Waiting for the server…</p>;
  return (
    <section class="overview">
      <div class="gauges">
        <div class="gauge-card" data-testid="gauge-envs">
          <Meter id="meter-envs" label="Envs running" value={o.running} max={o.capacity} tone="#2563eb" note={`/ ${o.capacity}`} />
          <Slots running={o.running} capacity={o.capacity} />
        </div>
        <div class="gauge-card">
          <Meter id="meter-waiting" label="Resets waiting" value={o.waiting} max={Math.max(o.capacity, o.waiting)} tone="#d97706" />
          <Meter id="meter-deploying" label="Deploys in flight" value={o.deploying} max={Math.max(1, o.capacity)} tone="#7c3aed" />
        </div>
        <div class="gauge-card small">
          <div>
            <span class={props.connected ? 'dot live' : 'dot'} /> {props.connected ? 'live' : 'reconnecting…'}
            {o.draining && <strong class="warn"> draining</strong>}
          </div>
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
      <div class="charts">
        <Chart
          id="chart-deploy"
          title="Deploy latency (s, per minute)"
          data={deploy!}
          series={[
            { label: 'mean', stroke: PALETTE[0], width: 2, spanGaps: false, points: { show: true, size: 4 } },
            { label: 'max', stroke: PALETTE[1], dash: [4, 4], points: { show: true, size: 3 } },
          ]}
        />
        <Chart
          id="chart-queue"
          title="Queue wait (s, per minute)"
          data={queue!}
          series={[
            { label: 'mean', stroke: PALETTE[3], width: 2, points: { show: true, size: 4 } },
            { label: 'max', stroke: PALETTE[1], dash: [4, 4], points: { show: true, size: 3 } },
          ]}
        />
        <Chart
          id="chart-rate"
          title="Episodes ended per minute"
          data={perMin!}
          series={[{ label: 'episodes', stroke: PALETTE[2], fill: 'rgba(22,163,74,0.35)', paths: bars() }]}
        />
        <Chart
          id="chart-failures"
          title="Failures by reason (per minute)"
          data={failures!}
          empty="no failure in the last hour"
          series={failureKeys.map((k, i) => ({
            label: k,
            stroke: PALETTE[(i + 1) % PALETTE.length],
            fill: `${PALETTE[(i + 1) % PALETTE.length]}99`,
            paths: bars(0.6),
          }))}
        />
        <Chart
          id="chart-rewards"
          title="Reward distribution per split (last hour)"
          time={false}
          data={rewards!}
          xSplits={centres}
          xValues={(_u, ticks) => ticks.map(binLabel)}
          empty="no scored episode in the last hour"
          series={splits.map((k, i) => ({
            label: `${k} (n=${s.rewards.by_split[k]!.n}, mean≈${s.rewards.by_split[k]!.mean})`,
            stroke: PALETTE[i % PALETTE.length],
            fill: `${PALETTE[i % PALETTE.length]}88`,
            paths: bars(0.8 / Math.max(1, splits.length)),
          }))}
        />
      </div>
    </section>
  );
}
