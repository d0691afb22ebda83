/**
 * What `openenv-bundle check` reports: findings, each located (a file and field, a task id, a
 * tool) and saying what was expected and what to change. A problem fails the check (exit 1); a
 * warning is worth reading but does not.
 */
export type FindingLevel = 'problem' | 'warning';

export interface Finding {
  level: FindingLevel;
  /** `bundle.json, field "scores.profit"`, `task guess-train-0 (tasks/train.jsonl line 1)`, `tool guess` */
  where: string;
  /** what was expected, what was found, what to change */
  message: string;
}

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
