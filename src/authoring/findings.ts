/**
 * What `openenv-bundle check` reports: findings, each located (a file and field, a task id, a
 * tool) and saying what was expected and what to change. A problem fails the check (exit 1); a
 * warning is worth reading but does not.
 */
import type { Finding, FindingLevel } from '../protocol/findings.js';

export type { Finding, FindingLevel };

export class Findings {
  readonly list: Finding[] = [];

  problem(where: string, message: string): void {
    this.list.push({ level: 'problem', where, message });
  }

  warning(where: string, message: string): void {
    this.list.push({ level: 'warning', where, message });
  }

  get problems(): Finding[] {
    return this.list.filter((f) => f.level === 'problem');
  }

  get warnings(): Finding[] {
    return this.list.filter((f) => f.level === 'warning');
  }
}

export function formatFinding(f: Finding): string {
  return `${f.level === 'problem' ? 'problem' : 'warning'}: ${f.where}: ${f.message}`;
}

/** The same finding (level and message) wherever it was found. */
export interface FindingGroup {
  level: FindingLevel;
  message: string;
  wheres: string[];
}

/**
 * Identical findings as one group each, so one mistake repeated over many tasks takes one line and
 * hides nothing behind it: problems before warnings, and within each the findings found once
 * first, then the repeated ones; otherwise in the order found.
 */
export function groupFindings(list: readonly Finding[]): FindingGroup[] {
  const groups = new Map<string, FindingGroup>();
  for (const f of list) {
    const key = `${f.level}\n${f.message}`;
    const g = groups.get(key);
    if (g) g.wheres.push(f.where);
    else groups.set(key, { level: f.level, message: f.message, wheres: [f.where] });
  }
  const rank = (g: FindingGroup) => (g.level === 'problem' ? 0 : 2) + (g.wheres.length > 1 ? 1 : 0);
  return [...groups.values()]
    .map((g, i) => ({ g, i }))
    .sort((a, b) => rank(a.g) - rank(b.g) || a.i - b.i)
    .map(({ g }) => g);
}

/** `task probe-v1-train-3 (tasks/train.jsonl line 4), field "golden[0]"` → `probe-v1-train-3, field "golden[0]"` */
function shortWhere(where: string): string {
  return where.replace(/^task (\S+) \([^)]*\)/, '$1');
}

/** One group as one finding's line: `problem: 32 tasks: <message>, e.g. train-0, train-1`. */
export function formatGroup(g: FindingGroup, examples = 2): string {
  if (g.wheres.length === 1) return formatFinding({ level: g.level, where: g.wheres[0]!, message: g.message });
  const noun = g.wheres.every((w) => w.startsWith('task ')) ? 'tasks' : 'places';
  const shown = g.wheres.slice(0, examples).map(shortWhere).join('; ');
  return `${g.level}: ${g.wheres.length} ${noun}: ${g.message}, e.g. ${shown}${g.wheres.length > examples ? ' …' : ''}`;
}
