/**
 * A bundle server read over HTTP, as the row writer, `eval` and `play` read it: GET /bundle,
 * /tasks (paged) and /toolsets; no env is deployed. Every failure becomes a ServerReadError whose
 * message is one line a person can act on.
 */
import type { z } from 'zod';
import { BundleInfoSchema, TasksPageSchema, ToolsetsSchema, type BundleInfo, type TaskRow, type ToolSpec } from '../protocol/bundle.js';
import { describeIssue } from '../protocol/zod-issues.js';

/** The server could not be read: one line (a command exits 1 with it). */
export class ServerReadError extends Error {
  override readonly name = 'ServerReadError';
}

export const PAGE_LIMIT = 1000;

export interface ServerClientOptions {
  url: string;
  token: string | null;
  /** names the variable the token came from, for messages */
  tokenVar: string | null;
  timeoutMs?: number;
}

export class BundleServerClient {
  constructor(private readonly o: ServerClientOptions) {}

  private async get<T>(path: string, schema: z.ZodType<T, z.ZodTypeDef, unknown>): Promise<T> {
    const { url, token, tokenVar } = this.o;
    let res: Response;
    try {
      res = await fetch(`${url}${path}`, {
        headers: { accept: 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
        signal: AbortSignal.timeout(this.o.timeoutMs ?? 60_000),
      });
    } catch (e) {
      const err = e as Error & { cause?: { code?: string; message?: string } };
      const why =
        err.name === 'TimeoutError' ? `no answer within ${(this.o.timeoutMs ?? 60_000) / 1000} s` : (err.cause?.message ?? err.cause?.code ?? err.message);
      throw new ServerReadError(`cannot reach the server at ${url}: ${why}`);
    }
    const text = await res.text().catch(() => '');
    if (res.status === 401) {
      throw new ServerReadError(
        token
          ? `the server at ${url} refused the token in $${tokenVar} (HTTP 401): check that it holds the server's token`
          : `the server at ${url} needs a token (HTTP 401): pass --token-var NAME, naming the environment variable that holds it`,
      );
    }
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch {
      throw new ServerReadError(`GET ${path} at ${url} answered HTTP ${res.status} with no JSON: is ${url} a bundle server?`);
    }
    if (!res.ok) {
      const msg = (body as { message?: unknown })?.message;
      throw new ServerReadError(`GET ${path} at ${url} answered HTTP ${res.status}${typeof msg === 'string' ? `: ${msg}` : ''}`);
    }
    const parsed = schema.safeParse(body);
    if (!parsed.success) {
      const issue = parsed.error.issues[0]!;
      throw new ServerReadError(`GET ${path} at ${url} answered an unexpected shape (${describeIssue(issue, { root: 'body' })}): is ${url} a bundle server?`);
    }
    return parsed.data;
  }

  bundle(): Promise<BundleInfo> {
    return this.get('/bundle', BundleInfoSchema);
  }

  toolsets(): Promise<Record<string, ToolSpec[]>> {
    return this.get('/toolsets', ToolsetsSchema).then((t) => t.toolsets);
  }

  /** Every task of a split, a page of PAGE_LIMIT at a time; `onPage(done, total)` after each. */
  async tasks(split: string, onPage?: (done: number, total: number) => void): Promise<TaskRow[]> {
    const rows: TaskRow[] = [];
    let total = Infinity;
    while (rows.length < total) {
      const q = `/tasks?split=${encodeURIComponent(split)}&offset=${rows.length}&limit=${PAGE_LIMIT}`;
      const page = await this.get(q, TasksPageSchema);
      if (total !== Infinity && page.total !== total) {
        throw new ServerReadError(`split "${split}" changed size while it was read (${total} then ${page.total} tasks); run again`);
      }
      total = page.total;
      if (page.tasks.length === 0 && rows.length < total) {
        throw new ServerReadError(`GET ${q} returned no tasks though split "${split}" has ${total}`);
      }
      rows.push(...page.tasks);
      onPage?.(rows.length, total);
    }
    return rows;
  }
}
