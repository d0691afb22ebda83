/**
 * The one formatter of zod issues: each issue as `where: message`, its path under `prefix`
 * ("data.task_id: Required"), or `root` when the issue is about the whole value. Every room that
 * turns a failed safeParse into words (frames, request bodies, tool arguments, the gateway's
 * upstream, replies read by the client) says it this way.
 */
import type { z } from 'zod';

export interface IssuePlace {
  /** the name of the value parsed, written before each issue's path ("data", "body"); none by default */
  prefix?: string;
  /** what an issue at the value itself is said to be about (default: the prefix) */
  root?: string;
}

/** where an issue is: `prefix.path`, or `root` for the value itself */
export function issueWhere(issue: z.ZodIssue, place: IssuePlace = {}): string {
  const prefix = place.prefix ?? '';
  return [prefix, ...issue.path.map(String)].filter(Boolean).join('.') || (place.root ?? prefix);
}

/** one issue as `where: message` */
export function describeIssue(issue: z.ZodIssue, place: IssuePlace = {}): string {
  return `${issueWhere(issue, place)}: ${issue.message}`;
}

/** a zod failure in one line, every issue as `where: message`, joined by "; " */
export function describeIssues(err: z.ZodError, place: IssuePlace = {}): string {
  return err.issues.map((i) => describeIssue(i, place)).join('; ');
}

/** A zod failure in one line, each issue at its path under `prefix` ("data.task_id: Required; ..."). */
export function describeZod(err: z.ZodError, prefix: string): string {
  return describeIssues(err, { prefix });
}
