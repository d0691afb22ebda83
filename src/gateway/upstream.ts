/**
 * Where an episode's model calls go, and what bounds them, as a client gives them at reset (or the
 * server's --model-url / --model): declared once, as zod schemas, so the reset message, the
 * options and the gateway read the same shape. The upstream's headers (its own credential, a
 * trainer's session id) stay in the server: the env only ever holds its own episode credential.
 */
import { Agent as HttpAgent, request as httpRequest, type IncomingMessage, type OutgoingHttpHeaders } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import { z } from 'zod';

const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

export const UpstreamSchema = z
  .object({
    /** the API's base: the gateway appends /chat/completions, /responses, /messages, /models */
    base_url: z
      .string()
      .url()
      .refine((u) => /^https?:$/.test(new URL(u).protocol), 'the upstream must be an http:// or https:// URL'),
    /** sent with every call upstream (e.g. Authorization for the upstream, a session header) */
    headers: z
      .record(
        z.string().regex(HEADER_NAME, 'not a valid HTTP header name'),
        z.string().refine((v) => !/[\r\n\0]/.test(v), 'a header value may not hold CR, LF or NUL'),
      )
      .default({}),
    /** the model every call names upstream, whatever the harness asked for; also what /v1/models lists */
    model: z.string().min(1).optional(),
  })
  .strict();
export type Upstream = z.infer<typeof UpstreamSchema>;
export type UpstreamInput = z.input<typeof UpstreamSchema>;

export const BudgetsSchema = z
  .object({
    /** model calls the episode may make */
    calls: z.number().int().positive().optional(),
    /** tokens (input and output, as the upstream reports them) the episode may use */
    tokens: z.number().int().positive().optional(),
    /** seconds from the credential's issue after which the episode's model access ends */
    wall_time_s: z.number().positive().optional(),
  })
  .strict();
export type Budgets = z.infer<typeof BudgetsSchema>;
export type BudgetsInput = z.input<typeof BudgetsSchema>;

/** request headers of a harness that are the API's own and go upstream; every other one stays here */
export const FORWARDED_REQUEST_HEADERS = ['accept', 'anthropic-version', 'anthropic-beta', 'openai-beta'] as const;
/** response headers of the upstream a harness gets */
export const FORWARDED_RESPONSE_HEADERS = ['content-type', 'retry-after', 'x-request-id', 'request-id'] as const;

export interface UpstreamCall {
  url: URL;
  method: 'GET' | 'POST';
  headers: OutgoingHttpHeaders;
  body: Buffer | null;
  signal: AbortSignal;
}

/** keep-alive connections to the upstreams, shared by every episode of one gateway */
export class UpstreamClient {
  private readonly http = new HttpAgent({ keepAlive: true, maxSockets: 512 });
  private readonly https = new HttpsAgent({ keepAlive: true, maxSockets: 512 });

  /** the upstream's response as soon as its headers arrive; rejects on a connection error or the signal */
  send(call: UpstreamCall): Promise<IncomingMessage> {
    const tls = call.url.protocol === 'https:';
    return new Promise((resolve, reject) => {
      const req = (tls ? httpsRequest : httpRequest)(call.url, {
        method: call.method,
        headers: call.body ? { ...call.headers, 'content-length': call.body.length } : call.headers,
        agent: tls ? this.https : this.http,
        signal: call.signal,
      });
      req.once('response', resolve);
      req.once('error', reject);
      req.end(call.body ?? undefined);
    });
  }

  close(): void {
    this.http.destroy();
    this.https.destroy();
  }
}
