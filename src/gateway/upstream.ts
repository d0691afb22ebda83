/**
 * The client of an episode's upstream (the shapes it is given in are the protocol's,
 * src/protocol/model.ts), and which headers cross the gateway each way. The upstream's headers
 * (its own credential, a trainer's session id) stay in the server: the env only ever holds its
 * own episode credential.
 */
import { Agent as HttpAgent, request as httpRequest, type IncomingMessage, type OutgoingHttpHeaders } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';

export { UpstreamSchema, BudgetsSchema, type Upstream, type UpstreamInput, type Budgets, type BudgetsInput } from '../protocol/model.js';

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
