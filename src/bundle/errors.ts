/**
 * A bundle that cannot be served. The message is for the person who wrote the bundle: it names
 * the file, the line (JSONL) or the archive entry, the field, and what was expected, e.g.
 *   tasks/train.jsonl line 17, field "turns": expected a non-empty array of strings, got []
 * Several problems are reported together so that one fix-and-retry round fixes them all.
 */

/** One problem, located as precisely as the source allows. */
export interface BundleIssue {
  /** path relative to the bundle folder (`bundle.json`, `tasks/train.jsonl`), or the archive's path */
  file: string;
  /** 1-based line number, for JSONL files and for JSON syntax errors */
  line?: number;
  /** dotted field path, e.g. `envs.gridsim.port` or `turns[0]` */
  field?: string;
  /** archive entry path, for extraction problems */
  entry?: string;
  /** what was expected and what was found */
  message: string;
}

/** How many issues a message spells out; the rest are counted. */
export const MAX_REPORTED_ISSUES = 20;

export function formatIssue(issue: BundleIssue): string {
  let where = issue.file;
  if (issue.line !== undefined) where += ` line ${issue.line}`;
  if (issue.entry !== undefined) where += `, entry ${JSON.stringify(issue.entry)}`;
  if (issue.field !== undefined && issue.field !== '') where += `, field "${issue.field}"`;
  return `${where}: ${issue.message}`;
}

export class BundleError extends Error {
  override readonly name = 'BundleError';
  /** the issues spelled out in the message (at most MAX_REPORTED_ISSUES) */
  readonly issues: readonly BundleIssue[];
  /** how many issues were found in all, including those not spelled out */
  readonly total: number;

  /**
   * @param issues at least one
   * @param context what was being loaded, e.g. the bundle path; starts a multi-issue message
   * @param total the number of issues found, when more were found than are passed
   */
  constructor(issues: BundleIssue | readonly BundleIssue[], context?: string, total?: number) {
    const list = (Array.isArray(issues) ? issues : [issues]) as readonly BundleIssue[];
    const shown = list.slice(0, MAX_REPORTED_ISSUES);
    const count = Math.max(total ?? list.length, list.length);
    super(BundleError.compose(shown, count, context));
    this.issues = shown;
    this.total = count;
  }

  private static compose(shown: readonly BundleIssue[], count: number, context?: string): string {
    if (count === 1 && shown[0] !== undefined) {
      return context ? `${context}: ${formatIssue(shown[0])}` : formatIssue(shown[0]);
    }
    const head = `${context ?? 'bundle'}: ${count} problems`;
    const lines = shown.map((i) => `  ${formatIssue(i)}`);
    if (count > shown.length) lines.push(`  … and ${count - shown.length} more`);
    return [head, ...lines].join('\n');
  }
}

/**
 * Collects issues while loading continues, keeping the first MAX_REPORTED_ISSUES and counting
 * the rest.
 */
export class IssueCollector {
  readonly issues: BundleIssue[] = [];
  total = 0;

  add(issue: BundleIssue): void {
    this.total++;
    if (this.issues.length < MAX_REPORTED_ISSUES) this.issues.push(issue);
  }

  get empty(): boolean {
    return this.total === 0;
  }

  /** Throws a BundleError holding every issue collected so far, if any. */
  throwIfAny(context?: string): void {
    if (this.total > 0) throw new BundleError(this.issues, context, this.total);
  }
}
