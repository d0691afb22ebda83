/**
 * What episodes cost, in the overview's group and task tables (each figure's mean over the
 * episodes that reported it) and the ended episodes' table (each episode's own): CPU seconds, peak
 * memory, bytes written, wall time deployed. '—': the sandbox could not tell (docs/protocol.md).
 */
import type { CostMeans, EpisodeCost } from './types';

/** bytes as a person reads them: 12.3 MB */
export function fmtBytes(n: number | null | undefined): string {
  if (n === null || n === undefined) return '—';
  const units = ['B', 'kB', 'MB', 'GB', 'TB'];
  let v = n;
  let i = 0;
  while (v >= 1000 && i < units.length - 1) {
    v /= 1000;
    i++;
  }
  return `${i === 0 ? v : v.toFixed(1)} ${units[i]}`;
}

const secs = (s: number | null | undefined) => (s === null || s === undefined ? '—' : String(Math.round(s * 10) / 10));

export function CostHeads(props: { mean?: boolean }) {
  const m = props.mean ? 'mean ' : '';
  const over = props.mean ? ' (mean over the episodes that reported it)' : '';
  return (
    <>
      <th data-cost="cpu_s" title={`CPU seconds of the env${over}`}>
        {m}CPU s
      </th>
      <th data-cost="peak_memory_bytes" title={`the most memory the env held at once${over}`}>
        {m}peak memory
      </th>
      <th data-cost="bytes_written" title={`bytes the env wrote to the host's disk${over}`}>
        {m}written
      </th>
      <th data-cost="wall_s" title={`seconds the env was deployed for the episode${over}`}>
        {m}wall s
      </th>
    </>
  );
}

export function CostCells(props: { cost: EpisodeCost | CostMeans | null }) {
  const c = props.cost;
  return (
    <>
      <td class="num" data-cost="cpu_s">
        {secs(c?.cpu_s)}
      </td>
      <td class="num" data-cost="peak_memory_bytes">
        {fmtBytes(c?.peak_memory_bytes)}
      </td>
      <td class="num" data-cost="bytes_written">
        {fmtBytes(c?.bytes_written)}
      </td>
      <td class="num" data-cost="wall_s">
        {secs(c?.wall_s)}
      </td>
    </>
  );
}
