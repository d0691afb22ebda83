/**
 * One request of a harness at its episode's door, from its arrival to its record: the credential,
 * the path, the episode's state and budgets, the bounded body; then the call upstream, its reply
 * given whole (bounded) or streamed through as it arrives (watched, reassembled, bounded in size
 * and silence); and one record, whatever happened.
 */
import type { IncomingMessage, OutgoingHttpHeaders, ServerResponse } from 'node:http';
import { APIS, apiOf, errorBody, isStreamRequest, modelList, type ApiSpec } from './apis.js';
import { isObject, readJson } from './bounded-json.js';
import { presentedKeys } from './credentials.js';
import { END_STATUS, type EpisodeGate, type Stop } from './episode-gate.js';
import type { Usage } from './reassembly.js';
import type { CallOutcome } from './records.js';
import { SseParser } from './sse.js';
import { FORWARDED_REQUEST_HEADERS, FORWARDED_RESPONSE_HEADERS, type UpstreamClient } from './upstream.js';

export interface GatewayLimits {
  /** the port of every door (0: a free port per door) */
  port: number;
  callTimeoutMs: number;
  streamIdleMs: number;
  maxRequestBytes: number;
  maxResponseBytes: number;
  maxStreamBytes: number;
  maxJsonDepth: number;
  maxInFlight: number;
  maxConnections: number;
  requestReceiveMs: number;
}

/** the SDKs (OpenAI's, Anthropic's) honour it: an answer that retrying cannot change */
const NO_RETRY = { 'x-should-retry': 'false' };

const SERVED = APIS.map((a) => `${a.method} ${a.path}`).join(', ');

export function sendJson(res: ServerResponse, status: number, body: unknown, headers: OutgoingHttpHeaders = {}): void {
  if (res.headersSent || res.destroyed) return;
  const text = JSON.stringify(body);
  res.writeHead(status, { ...headers, 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) }).end(text);
}

/** the request body, at most `max` bytes; else why not: more than that, or the harness hung up (or the signal fired) first */
function readBody(req: IncomingMessage, max: number, signal: AbortSignal): Promise<{ body: Buffer } | { problem: 'too_large' | 'gone' }> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const finish = (r: { body: Buffer } | { problem: 'too_large' | 'gone' }) => {
      signal.removeEventListener('abort', onAbort);
      req.off('data', onData);
      resolve(r);
    };
    const onAbort = () => finish({ problem: 'gone' });
    const onData = (c: Buffer) => {
      size += c.length;
      if (size > max) {
        finish({ problem: 'too_large' });
        return;
      }
      chunks.push(c);
    };
    signal.addEventListener('abort', onAbort);
    req.on('data', onData);
    req.once('end', () => finish({ body: Buffer.concat(chunks) }));
    req.once('close', () => finish({ problem: 'gone' }));
  });
}

/** one request: run() answers the harness and gives the record, whatever happens */
export class Call {
  private readonly started = Date.now();
  private readonly api: ApiSpec | null;
  private readonly shape: 'openai' | 'anthropic';
  private stream = false;
  private request: unknown = null;
  private upstreamStatus: number | null = null;
  private firstByteAt: number | null = null;

  constructor(
    private readonly gate: EpisodeGate,
    private readonly limits: GatewayLimits,
    private readonly client: UpstreamClient,
    private readonly req: IncomingMessage,
    private readonly res: ServerResponse,
    private readonly signal: AbortSignal,
  ) {
    this.api = apiOf(req.method, req.url);
    this.shape = this.api?.errors ?? ((req.url ?? '').startsWith('/v1/messages') ? 'anthropic' : 'openai');
  }

  async run(): Promise<void> {
    const { gate, api } = this;
    if (!gate.credential.acceptsAny(presentedKeys(this.req.headers))) {
      return this.refuse(401, 'unauthorized', "no valid key for this episode's model gateway", { connection: 'close' });
    }
    if (!api) return this.refuse(404, 'not_found', `the model gateway serves ${SERVED}`, { connection: 'close' });
    if (this.refuseIfEnded({ connection: 'close' })) return;
    let body: Record<string, unknown> | null = null;
    if (api.method === 'POST') {
      const read = await readBody(this.req, this.limits.maxRequestBytes, this.signal);
      if ('problem' in read) {
        if (read.problem === 'too_large')
          return this.refuse(413, 'request_too_large', `the request body is larger than ${this.limits.maxRequestBytes} bytes`, { connection: 'close' });
        return this.stopped();
      }
      const json = readJson(read.body.toString('utf8'), this.limits.maxJsonDepth);
      if (!json.ok) return this.refuse(400, 'invalid_request', `the request body: ${json.problem}`);
      if (!isObject(json.value)) return this.refuse(400, 'invalid_request', 'the request body must be a JSON object');
      body = json.value;
      this.stream = isStreamRequest(body);
      this.request = body;
    }
    // the episode may have ended while the body came in
    if (this.refuseIfEnded({})) return;
    if (api.name === 'openai.models') {
      if (gate.upstream.model !== undefined) {
        sendJson(this.res, 200, modelList(gate.upstream.model));
        return this.record(200, 'ok', null, modelList(gate.upstream.model), null, null);
      }
      return this.forward(null);
    }
    if (gate.forwarding >= this.limits.maxInFlight) {
      return this.refuse(429, 'busy', `the episode already has ${gate.forwarding} model calls in flight (at most ${this.limits.maxInFlight})`);
    }
    const refused = gate.admit();
    if (refused) return this.refuse(END_STATUS[refused], refused, gate.ended?.message ?? refused, NO_RETRY);
    this.request = api.prepare(body!, gate.upstream.model);
    gate.forwarding++;
    try {
      return await this.forward(Buffer.from(JSON.stringify(this.request)));
    } finally {
      gate.forwarding--;
    }
  }

  private async forward(body: Buffer | null): Promise<void> {
    const { gate, api, res } = this;
    const limits = this.limits;
    const ctl = new AbortController();
    const onOuter = () => ctl.abort(this.signal.reason);
    this.signal.addEventListener('abort', onOuter);
    if (this.signal.aborted) onOuter();
    const deadline = setTimeout(
      () => ctl.abort({ kind: 'timeout', message: `the model upstream did not finish the call within ${limits.callTimeoutMs / 1000} s` } satisfies Stop),
      limits.callTimeoutMs,
    );
    const onClose = () => {
      if (!res.writableFinished) ctl.abort({ kind: 'client_gone', message: 'the harness closed the connection before the reply was complete' } satisfies Stop);
    };
    res.once('close', onClose);
    try {
      const headers: OutgoingHttpHeaders = {};
      for (const h of FORWARDED_REQUEST_HEADERS) if (typeof this.req.headers[h] === 'string') headers[h] = this.req.headers[h];
      if (body) headers['content-type'] = 'application/json';
      Object.assign(headers, gate.upstream.headers);
      const url = new URL(gate.upstream.base_url.replace(/\/+$/, '') + api!.upstreamPath);
      let up: IncomingMessage;
      try {
        up = await this.client.send({ url, method: api!.method, headers, body, signal: ctl.signal });
      } catch (err) {
        return this.failed(ctl.signal, `the model upstream ${url.origin} could not be reached: ${(err as Error).message}`);
      }
      this.upstreamStatus = up.statusCode ?? 0;
      const sse = /^text\/event-stream\b/i.test(String(up.headers['content-type'] ?? '')) && this.upstreamStatus < 300;
      return await (sse ? this.relayStream(up, ctl) : this.relayWhole(up, ctl));
    } finally {
      clearTimeout(deadline);
      this.signal.removeEventListener('abort', onOuter);
      res.off('close', onClose);
    }
  }

  /** a reply read whole (bounded), then given to the harness */
  private async relayWhole(up: IncomingMessage, ctl: AbortController): Promise<void> {
    const max = this.limits.maxResponseBytes;
    const chunks: Buffer[] = [];
    let size = 0;
    const complete = await new Promise<boolean>((resolve) => {
      up.on('data', (c: Buffer) => {
        this.firstByteAt ??= Date.now();
        size += c.length;
        if (size > max) {
          ctl.abort({ kind: 'too_large', message: `the model upstream's reply is larger than ${max} bytes` } satisfies Stop);
          return;
        }
        chunks.push(c);
      });
      up.once('end', () => resolve(true));
      up.once('error', () => resolve(false));
      up.once('close', () => resolve(up.complete));
    });
    if (!complete || ctl.signal.aborted) return this.failed(ctl.signal, 'the model upstream dropped the connection before its reply was complete');
    const text = Buffer.concat(chunks).toString('utf8');
    const status = this.upstreamStatus!;
    const json = readJson(text, this.limits.maxJsonDepth);
    const response = json.ok ? json.value : { text: text.slice(0, 4096) };
    const headers = this.replyHeaders(up);
    if (status >= 500) {
      const error = `the model upstream answered ${status}`;
      sendJson(this.res, 502, errorBody(this.shape, 'model_upstream_error', `${error}: ${text.slice(0, 500)}`), NO_RETRY);
      return this.record(502, 'upstream_error', null, response, error, null);
    }
    if (status >= 200 && status < 300 && !json.ok) {
      const error = `the model upstream's reply is not usable JSON (${json.problem})`;
      sendJson(this.res, 502, errorBody(this.shape, 'model_upstream_error', error), NO_RETRY);
      return this.record(502, 'upstream_error', null, response, error, null);
    }
    if (!this.res.headersSent && !this.res.destroyed) this.res.writeHead(status, { ...headers, 'content-length': Buffer.byteLength(text) }).end(text);
    const usage = status < 300 ? this.api!.usage(response) : null;
    return this.record(status, status < 300 ? 'ok' : 'upstream_rejected', usage, response, status < 300 ? null : `the model upstream answered ${status}`, null);
  }

  /** a streamed reply: every chunk goes to the harness as it arrives, and is watched on the way */
  private async relayStream(up: IncomingMessage, ctl: AbortController): Promise<void> {
    const { res } = this;
    const limits = this.limits;
    // one event may be as long as a whole reply
    const parser = new SseParser(limits.maxResponseBytes);
    const assembler = this.api!.reassembler();
    res.writeHead(this.upstreamStatus!, { ...this.replyHeaders(up), 'cache-control': 'no-cache', 'x-accel-buffering': 'no' });
    res.flushHeaders();
    let size = 0;
    let idle: NodeJS.Timeout | null = null;
    const arm = () => {
      if (idle) clearTimeout(idle);
      idle = setTimeout(
        () => ctl.abort({ kind: 'stall', message: `the model upstream's stream sent nothing for ${limits.streamIdleMs / 1000} s` } satisfies Stop),
        limits.streamIdleMs,
      );
    };
    arm();
    const onDrain = () => {
      arm();
      up.resume();
    };
    res.on('drain', onDrain);
    const complete = await new Promise<boolean>((resolve) => {
      up.on('data', (c: Buffer) => {
        if (ctl.signal.aborted) return;
        this.firstByteAt ??= Date.now();
        size += c.length;
        if (size > limits.maxStreamBytes) {
          ctl.abort({ kind: 'too_large', message: `the model upstream's stream is longer than ${limits.maxStreamBytes} bytes` } satisfies Stop);
          return;
        }
        const more = res.write(c);
        try {
          for (const e of parser.push(c)) assembler.event(e);
        } catch (err) {
          ctl.abort({ kind: 'too_large', message: `the model upstream's stream is broken: ${(err as Error).message}` } satisfies Stop);
          return;
        }
        if (more) arm();
        else {
          // the harness reads slower than the upstream writes: wait for it, and do not count that as a stall
          if (idle) clearTimeout(idle);
          up.pause();
        }
      });
      up.once('end', () => resolve(true));
      up.once('error', () => resolve(false));
      up.once('close', () => resolve(up.complete));
    });
    if (idle) clearTimeout(idle);
    res.off('drain', onDrain);
    if (complete && !ctl.signal.aborted) for (const e of parser.end()) assembler.event(e);
    const { response, usage, streamError } = assembler.result();
    if (!complete || ctl.signal.aborted) {
      const stop: Stop = ctl.signal.aborted
        ? (ctl.signal.reason as Stop)
        : { kind: 'too_large', message: 'the model upstream dropped the stream before it ended' };
      const outcome = outcomeOf(stop);
      this.streamError(stop.code ?? (outcome === 'upstream_timeout' ? 'model_upstream_timeout' : 'model_upstream_error'), stop.message);
      return this.record(this.upstreamStatus!, outcome, usage, response, stop.message, stop.code ?? null);
    }
    res.end();
    if (streamError !== null)
      return this.record(this.upstreamStatus!, 'upstream_error', usage, response, `the model upstream's stream reported an error: ${streamError}`, null);
    return this.record(this.upstreamStatus!, 'ok', usage, response, null, null);
  }

  /** a stream cut short: an error event the harness's SDK raises, then the end */
  private streamError(code: string, message: string): void {
    if (this.res.destroyed || this.res.writableEnded) return;
    const body = errorBody(this.shape, code, message);
    this.res.end(this.shape === 'anthropic' ? `event: error\ndata: ${JSON.stringify(body)}\n\n` : `data: ${JSON.stringify(body)}\n\n`);
  }

  private replyHeaders(up: IncomingMessage): Record<string, string | string[]> {
    const out: Record<string, string | string[]> = {};
    for (const h of FORWARDED_RESPONSE_HEADERS) {
      const v = up.headers[h];
      if (v !== undefined) out[h] = v;
    }
    return out;
  }

  /** the call got no usable reply: why decides what the harness gets and what it means for the episode */
  private failed(signal: AbortSignal, whenNoStop: string): void {
    const stop = signal.aborted ? (signal.reason as Stop) : null;
    if (!stop) {
      sendJson(this.res, 502, errorBody(this.shape, 'model_upstream_error', whenNoStop), NO_RETRY);
      return this.record(502, 'upstream_error', null, null, whenNoStop, null);
    }
    if (stop.kind === 'client_gone') return this.record(499, 'client_gone', null, null, stop.message, null);
    if (stop.kind === 'cut_short') {
      sendJson(this.res, stop.status ?? 410, errorBody(this.shape, stop.code ?? 'cut_short', stop.message), NO_RETRY);
      return this.record(stop.status ?? 410, 'cut_short', null, null, stop.message, stop.code ?? null);
    }
    const outcome = outcomeOf(stop);
    const status = outcome === 'upstream_timeout' ? 504 : 502;
    sendJson(
      this.res,
      status,
      errorBody(this.shape, outcome === 'upstream_timeout' ? 'model_upstream_timeout' : 'model_upstream_error', stop.message),
      NO_RETRY,
    );
    return this.record(status, outcome, null, null, stop.message, null);
  }

  /** the request was dropped before it was forwarded (the harness hung up, or the episode was revoked) */
  private stopped(): void {
    const stop = this.signal.aborted ? (this.signal.reason as Stop) : null;
    if (stop?.kind === 'cut_short') return this.refuse(stop.status ?? 410, stop.code ?? 'cut_short', stop.message);
    return this.record(499, 'client_gone', null, null, 'the harness closed the connection while sending its request', null);
  }

  /** true (and the harness answered) when the episode's model access has ended, or it was revoked */
  private refuseIfEnded(headers: OutgoingHttpHeaders): boolean {
    // a kept-alive connection may still send while revoke() waits for the calls it cut short
    if (this.gate.revoked) {
      this.refuse(410, 'episode_ended', 'the episode ended', { ...NO_RETRY, ...headers });
      return true;
    }
    const end = this.gate.ended;
    if (!end) return false;
    this.refuse(END_STATUS[end.reason], end.reason, end.message, { ...NO_RETRY, ...headers });
    return true;
  }

  private refuse(status: number, code: string, message: string, headers: OutgoingHttpHeaders = {}): void {
    sendJson(this.res, status, errorBody(this.shape, code, message), headers);
    this.record(status, 'refused', null, null, message, code);
  }

  private record(status: number, outcome: CallOutcome, usage: Usage | null, response: unknown, error: string | null, refusal: string | null): void {
    const now = Date.now();
    this.gate.report({
      api: this.api?.name ?? null,
      method: this.req.method ?? '',
      path: (this.req.url ?? '').slice(0, 256),
      stream: this.stream,
      started_at: this.started,
      latency_ms: now - this.started,
      first_byte_ms: this.firstByteAt === null ? null : this.firstByteAt - this.started,
      status,
      upstream_status: this.upstreamStatus,
      outcome,
      refusal,
      request: this.request,
      response,
      usage,
      error,
    });
    // after its record: an end this call causes comes after the call that caused it
    if (outcome !== 'refused' && this.api?.name !== 'openai.models') this.gate.settle(outcome, usage, error);
  }
}

function outcomeOf(stop: Stop): 'upstream_timeout' | 'upstream_error' | 'cut_short' | 'client_gone' {
  if (stop.kind === 'timeout' || stop.kind === 'stall') return 'upstream_timeout';
  if (stop.kind === 'cut_short') return 'cut_short';
  if (stop.kind === 'client_gone') return 'client_gone';
  return 'upstream_error';
}
