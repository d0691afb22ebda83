/**
 * What an eval run comes to (summary.json) and the lines a person reads at a glance: the mean
 * reward over the scored episodes with its standard error, the share of zeros, each score's mean
 * beside it (as vf-eval prints each rubric function's), the failures by whose side and reason
 * (never scored) with each reason's first message, the means per task group, the tokens the
 * endpoint reported, and the bundle's baselines for the split.
 */
import type { EpisodeRecord } from './play.js';

export interface MeanStat {
  n: number;
  mean: number | null;
  /** standard error of the mean (sample standard deviation / √n); null below 2 episodes */
  stderr: number | null;
}

export interface EvalSummary {
  server: string;
  bundle: string;
  split: string;
  model: string;
  model_url: string;
  /** tasks selected to play */
  tasks: number;
  /** episodes that finished (scored or failed) */
  played: number;
  scored: MeanStat & { zero_share: number | null };
  /** score name → its mean over the scored episodes (the names the env reported, in the order first seen) */
  scores: Record<string, MeanStat>;
  failures: {
    env: Record<string, number>;
    model: Record<string, number>;
    total: number;
    /** reason → the first episode that failed with it, its message, and the last line of its log tail (a verifier's output) when it had one */
    first: Record<string, { task_id: string; message: string; output_ends?: string }>;
  };
  /** group name → group value → the scored episodes' mean */
  groups: Record<string, Record<string, MeanStat>>;
  baselines: Record<string, number>;
  tokens: { prompt: number; completion: number; episodes_reporting: number } | null;
  /**
   * harness episodes' model use through the server's gateway (calls, tokens), summed, and the
   * episodes whose harness's last run did not exit 0 (a model call refused: no gateway, a budget
   * spent; a crash; its time budget); null when none was played
   */
  harness: { episodes: number; model_calls: number; model_tokens: number; not_exited_0: number } | null;
  interrupted: boolean;
  wall_s: number;
  settings: Record<string, unknown>;
}

export function meanStat(xs: readonly number[]): MeanStat {
  const n = xs.length;
  if (n === 0) return { n, mean: null, stderr: null };
  const mean = xs.reduce((a, b) => a + b, 0) / n;
  if (n < 2) return { n, mean, stderr: null };
  const variance = xs.reduce((a, b) => a + (b - mean) ** 2, 0) / (n - 1);
  return { n, mean, stderr: Math.sqrt(variance / n) };
}

export interface SummaryContext {
  server: string;
  bundle: string;
  split: string;
  model: string;
  modelUrl: string;
  tasks: number;
  groupNames: readonly string[];
  baselines: Record<string, number>;
  interrupted: boolean;
  wallS: number;
  settings: Record<string, unknown>;
}

/** a log tail's last non-blank line, at most 160 characters ('' when none) */
function lastLine(tail: string): string {
  const line = tail.trimEnd().split('\n').pop()?.trim() ?? '';
  return line.length > 160 ? `${line.slice(0, 159)}…` : line;
}

export function summarize(records: readonly EpisodeRecord[], c: SummaryContext): EvalSummary {
  const scored = records.filter((r) => r.failure === null && r.reward !== null);
  const rewards = scored.map((r) => r.reward!);
  const failures: EvalSummary['failures'] = { env: {}, model: {}, total: 0, first: {} };
  for (const r of records) {
    if (!r.failure) continue;
    const side = failures[r.failure.kind];
    side[r.failure.reason] = (side[r.failure.reason] ?? 0) + 1;
    const ends = lastLine(r.failure.detail?.log_tail ?? '');
    failures.first[r.failure.reason] ??= { task_id: r.task_id, message: r.failure.message, ...(ends ? { output_ends: ends } : {}) };
    failures.total++;
  }
  const byScore = new Map<string, number[]>();
  for (const r of scored) for (const [name, v] of Object.entries(r.scores ?? {})) byScore.set(name, [...(byScore.get(name) ?? []), v]);
  const groups: EvalSummary['groups'] = {};
  for (const name of c.groupNames) {
    const byValue = new Map<string, number[]>();
    for (const r of scored) {
      const v = r.groups[name];
      if (v === undefined) continue;
      byValue.set(v, [...(byValue.get(v) ?? []), r.reward!]);
    }
    const sorted = [...byValue.entries()].sort(([a], [b]) => a.localeCompare(b, 'en', { numeric: true }));
    groups[name] = Object.fromEntries(sorted.map(([v, xs]) => [v, meanStat(xs)]));
  }
  const reporting = records.filter((r) => r.usage !== null);
  // a record of a run from before harness use was recorded has no `harness`
  const harnessRecords = records.filter((r): r is EpisodeRecord & { harness: NonNullable<EpisodeRecord['harness']> } => (r.harness ?? null) !== null);
  return {
    server: c.server,
    bundle: c.bundle,
    split: c.split,
    model: c.model,
    model_url: c.modelUrl,
    tasks: c.tasks,
    played: records.length,
    scored: { ...meanStat(rewards), zero_share: rewards.length ? rewards.filter((x) => x === 0).length / rewards.length : null },
    scores: Object.fromEntries([...byScore].map(([name, xs]) => [name, meanStat(xs)])),
    failures,
    groups,
    baselines: c.baselines,
    tokens: reporting.length
      ? {
          prompt: reporting.reduce((a, r) => a + r.usage!.prompt_tokens, 0),
          completion: reporting.reduce((a, r) => a + r.usage!.completion_tokens, 0),
          episodes_reporting: reporting.length,
        }
      : null,
    harness: harnessRecords.length
      ? {
          episodes: harnessRecords.length,
          model_calls: harnessRecords.reduce((a, r) => a + r.harness.model_calls, 0),
          model_tokens: harnessRecords.reduce((a, r) => a + r.harness.model_tokens, 0),
          not_exited_0: harnessRecords.filter((r) => r.harness.ended !== 'exited' || r.harness.exit_code !== 0).length,
        }
      : null,
    interrupted: c.interrupted,
    wall_s: c.wallS,
    settings: c.settings,
  };
}

/** a message's first line, at most 160 characters */
const oneLine = (m: string) => {
  const first = m.split('\n')[0]!.trim();
  return first.length > 160 ? `${first.slice(0, 159)}…` : first;
};
const f4 = (x: number | null) => (x === null ? '–' : x.toFixed(4));
const pct = (x: number | null) => (x === null ? '–' : `${(x * 100).toFixed(1)} %`);
const withSe = (m: MeanStat) => `${f4(m.mean)}${m.stderr === null ? '' : ` ± ${f4(m.stderr)}`}`;

/** The summary as a person reads it on a terminal. */
export function formatSummary(s: EvalSummary): string {
  const lines: string[] = [];
  lines.push(
    `${s.model} on ${s.bundle}, split ${s.split}: ${s.played} of ${s.tasks} tasks played in ${s.wall_s.toFixed(1)} s${s.interrupted ? ' (interrupted)' : ''}`,
  );
  lines.push(`  mean reward  ${withSe(s.scored)} (± standard error) over ${s.scored.n} scored episodes; zero scores ${pct(s.scored.zero_share)}`);
  const scores = Object.entries(s.scores ?? {});
  if (scores.length) lines.push(`  scores       ${scores.map(([name, m]) => `${name} ${withSe(m)}${m.n === s.scored.n ? '' : ` (${m.n})`}`).join(' · ')}`);
  const base = Object.entries(s.baselines);
  if (base.length) lines.push(`  baselines    ${base.map(([k, v]) => `${k} ${v}`).join(' · ')}`);
  if (s.failures.total === 0) lines.push('  failures     none');
  else {
    const side = (name: string, m: Record<string, number>) => {
      const e = Object.entries(m);
      return e.length ? `${name}: ${e.map(([k, v]) => `${k} ${v}`).join(', ')}` : null;
    };
    const parts = [side('env', s.failures.env), side('model', s.failures.model)].filter((x) => x !== null);
    lines.push(`  failures     ${s.failures.total}, not scored (${parts.join('; ')})`);
    const width = Math.max(...Object.keys(s.failures.first).map((r) => r.length));
    for (const [reason, first] of Object.entries(s.failures.first)) {
      lines.push(`    ${reason.padEnd(width)}  first: ${first.task_id}: ${oneLine(first.message)}`);
      if (first.output_ends) lines.push(`    ${' '.repeat(width)}  its output ends: ${first.output_ends}`);
    }
  }
  for (const [name, values] of Object.entries(s.groups)) {
    const cells = Object.entries(values).map(([v, m]) => `${v} ${withSe(m)} (${m.n})`);
    if (cells.length) lines.push(`  by ${name.padEnd(10)} ${cells.join(' · ')}`);
  }
  if (s.tokens) {
    lines.push(
      `  tokens       prompt ${s.tokens.prompt.toLocaleString('en')} · completion ${s.tokens.completion.toLocaleString('en')} (${s.tokens.episodes_reporting} episodes reported usage)`,
    );
  }
  if (s.harness) {
    lines.push(
      `  harness      ${s.harness.model_calls.toLocaleString('en')} model call(s) · ${s.harness.model_tokens.toLocaleString('en')} tokens through the server's gateway (${s.harness.episodes} harness episode(s)${s.harness.not_exited_0 ? `; in ${s.harness.not_exited_0} the harness did not exit 0: its output's tail is in its record, harness.output_tail` : ''})`,
    );
  }
  return lines.join('\n');
}
