/**
 * HTTP calls to one env inside its episode network (the env contract, docs/bundle-format.md), each with a deadline.
 */
import { z } from 'zod';

export class EnvCallError extends Error {
  override readonly name = 'EnvCallError';
  constructor(
    readonly kind: 'timeout' | 'unreachable' | 'bad_response' | 'aborted',
    message: string,
    readonly status?: number,
    readonly body?: unknown,
  ) {
    super(message);
  }
}

export const ToolCallReplySchema = z
  .object({
    result: z.unknown().optional(),
    text: z.string().optional(),
    is_error: z.boolean().optional(),
    done: z.boolean().optional(),
    scores: z.record(z.unknown()).optional(),
  })
  .passthrough();
export type ToolCallReply = z.infer<typeof ToolCallReplySchema>;

export const FinishReplySchema = z.object({ scores: z.record(z.unknown()) }).passthrough();

export interface EnvResponse {
  status: number;
  body: unknown;
}

export class EnvClient {
  constructor(readonly baseUrl: string) {}

  async request(method: 'GET' | 'POST', path: string, body: unknown, timeoutMs: number, signal?: AbortSignal): Promise<EnvResponse> {
    const timeout = AbortSignal.timeout(timeoutMs);
    const combined = signal ? AbortSignal.any([timeout, signal]) : timeout;
    let res: Response;
    try {
      res = await fetch(this.baseUrl + path, {
        method,
        headers: body === undefined ? {} : { 'content-type': 'application/json' },
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: combined,
      });
    } catch (e) {
      throw this.classify(e, timeout, path);
    }
    let text: string;
    try {
      text = await res.text();
    } catch (e) {
      throw this.classify(e, timeout, path);
    }
    let parsed: unknown = null;
    if (text.length > 0) {
      try {
        parsed = JSON.parse(text);
      } catch {
        throw new EnvCallError('bad_response', `env answered ${method} ${path} with ${res.status} and a body that is not JSON`, res.status, text.slice(0, 500));
      }
    }
    return { status: res.status, body: parsed };
  }

  private classify(e: unknown, timeout: AbortSignal, path: string): EnvCallError {
    if (timeout.aborted) return new EnvCallError('timeout', `env did not answer ${path} in time`);
    const err = e as Error;
    if (err?.name === 'AbortError') return new EnvCallError('aborted', `call to ${path} aborted`);
    const cause = (err as { cause?: { code?: string; message?: string } })?.cause;
    return new EnvCallError('unreachable', `env unreachable on ${path}: ${cause?.code ?? cause?.message ?? err?.message ?? String(e)}`);
  }
}
