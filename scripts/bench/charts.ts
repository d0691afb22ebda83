/** The bench's chart: reset latency CDFs as a self-contained SVG. */
import { percentile } from './stats.js';

export interface CdfSeries {
  name: string;
  color: string;
  ms: number[];
}

/** CDFs of reset latency on a log time axis, one line per series, its p50 and p95 in the legend */
export function cdfSvg(title: string, series: CdfSeries[]): string {
  const W = 860,
    H = 480,
    L = 70,
    R = 20,
    T = 40,
    B = 60;
  const all = series.flatMap((s) => s.ms).filter((x) => x > 0);
  const lo = Math.log10(Math.max(1, Math.min(...all)) / 1.5);
  const hi = Math.log10(Math.max(...all) * 1.2);
  const x = (ms: number) => L + ((Math.log10(Math.max(ms, 1)) - lo) / (hi - lo)) * (W - L - R);
  const y = (p: number) => T + (1 - p) * (H - T - B);
  const parts: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" font-family="sans-serif" font-size="12">`,
    `<rect width="${W}" height="${H}" fill="white"/>`,
    `<text x="${W / 2}" y="22" text-anchor="middle" font-size="15">${title}</text>`,
  ];
  for (let e = Math.floor(lo); e <= Math.ceil(hi); e++) {
    for (const m of [1, 2, 5]) {
      const v = m * 10 ** e;
      if (Math.log10(v) < lo || Math.log10(v) > hi) continue;
      parts.push(`<line x1="${x(v)}" y1="${T}" x2="${x(v)}" y2="${H - B}" stroke="#ddd"/>`);
      parts.push(`<text x="${x(v)}" y="${H - B + 16}" text-anchor="middle">${v >= 1000 ? `${v / 1000} s` : `${v} ms`}</text>`);
    }
  }
  for (const p of [0, 0.25, 0.5, 0.75, 0.95, 1]) {
    parts.push(`<line x1="${L}" y1="${y(p)}" x2="${W - R}" y2="${y(p)}" stroke="#eee"/>`);
    parts.push(`<text x="${L - 8}" y="${y(p) + 4}" text-anchor="end">${p}</text>`);
  }
  parts.push(`<text x="${W / 2}" y="${H - 18}" text-anchor="middle">connect → reset observation (log scale)</text>`);
  parts.push(`<text x="18" y="${H / 2}" transform="rotate(-90 18 ${H / 2})" text-anchor="middle">fraction of resets</text>`);
  series.forEach((s, i) => {
    const sorted = [...s.ms].sort((a, b) => a - b);
    const pts = sorted.map((v, k) => `${x(v).toFixed(1)},${y((k + 1) / sorted.length).toFixed(1)}`);
    parts.push(`<polyline fill="none" stroke="${s.color}" stroke-width="2" points="${x(sorted[0]!).toFixed(1)},${y(0)} ${pts.join(' ')}"/>`);
    parts.push(`<rect x="${L + 12}" y="${T + 8 + i * 18}" width="14" height="4" fill="${s.color}"/>`);
    parts.push(
      `<text x="${L + 32}" y="${T + 14 + i * 18}">${s.name} (p50 ${(percentile(s.ms, 50) / 1000).toFixed(2)} s, p95 ${(percentile(s.ms, 95) / 1000).toFixed(2)} s)</text>`,
    );
  });
  parts.push('</svg>');
  return parts.join('\n');
}
