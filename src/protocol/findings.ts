/**
 * A finding: what `openenv-bundle check` (and the checks it runs) reports, located (a file and
 * field, a task id, a tool) and saying what was expected and what to change. A problem fails the
 * check (exit 1); a warning is worth reading but does not.
 */
export type FindingLevel = 'problem' | 'warning';

export interface Finding {
  level: FindingLevel;
  /** `bundle.json, field "scores.profit"`, `task guess-train-0 (tasks/train.jsonl line 1)`, `tool guess` */
  where: string;
  /** what was expected, what was found, what to change */
  message: string;
}
