/**
 * One request of a harness at its episode's door, from its arrival to its record: the credential,
 * the path, the episode's state and budgets (the call may wait for its part of the token budget),
 * the bounded body; then the call upstream, its reply given whole (bounded) or streamed through as
 * it arrives (watched, reassembled, bounded in size and silence; read on for a while after the
 * harness hangs up, so that its usage is known); and one record with the call's count, whatever
 * happened.
 *
 * Long because one call is one story told in order (credential, budget, body, upstream, whole or
 * streamed reply, record), and every exit of it must reach its one record; the APIs, the counting
 * and the bounded JSON are in files of their own.
 */
import type { IncomingMessage, OutgoingHttpHeaders, ServerResponse } from 'node:http';
import { APIS, apiOf, errorBody, isStreamRequest, modelList, type ApiSpec, type ReplyCap } from './apis.js';
import { isObject, readJson } from './bounded-json.js';
import { presentedKeys } from './credentials.js';
import { countCall, type Counted } from './counting.js';
import { END_STATUS, type EpisodeGate, type Hold, type Stop } from './episode-gate.js';
import type { Usage } from './reassembly.js';
import type { CallOutcome } from './records.js';
import { SseParser, type SseEvent } from './sse.js';
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
  hangUpDrainMs: number;
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
  /** the part of the token budget the call holds while it runs */
  private hold: Hold | null = null;
  /** the most tokens its reply may have: its cap (as sent) times its choices; with no cap, what it holds of the budget */
  private replyMost = 0;
  /** bytes of the request sent upstream (null: nothing went) */
  private sentBytes: number | null = null;
  private receivedBytes = 0;
  /** the harness hung up while its call ran: the reply is read on (bounded) to count it, and given to no one */
  private harnessGone = false;
  /** the harness's own key, sent upstream as its bearer (EpisodeGate.forwardsHarnessKey) */
  private harnessKey: string | null = null;

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
    const keys = presentedKeys(this.req.headers);
    if (!gate.forwardsHarnessKey && !gate.credential.acceptsAny(keys)) {
      return this.refuse(401, 'unauthorized', "no valid key for this episode's model gateway", { connection: 'close' });
    }
    this.harnessKey = gate.forwardsHarnessKey ? gate.credential.otherThan(keys) : null;
    if (this.harnessKey !== null && !/^[\x21-\x7e]{1,4096}$/.test(this.harnessKey)) {
      return this.refuse(401, 'unauthorized', 'the key is not a token the model upstream can be given (visible ASCII, at most 4096 characters)', {
        connection: 'close',
      });
    }
    if (!gate.bound) {
      return this.refuse(
        403,
        'not_in_episode',
        "this env's model credential is bound to no episode yet: the env waits in the server's warm pool, and its model calls are refused until an episode takes it",
        { ...NO_RETRY, connection: 'close' },
      );
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
    if (!this.counts()) {
      // counting a prompt's tokens runs no model: it holds a place among the calls in flight, and none of the budget
      gate.forwarding++;
      try {
        this.request = api.prepare(body!, gate.upstream.model, null);
        return await this.forward(Buffer.from(JSON.stringify(this.request)), body!);
      } finally {
        gate.forwarding--;
      }
    }
    gate.forwarding++;
    try {
      const want = api.replyCap(body!);
      const admission = await this.admit(want);
      if ('refused' in admission) return this.refuse(END_STATUS[admission.refused], admission.refused, gate.ended?.message ?? admission.refused, NO_RETRY);
      if ('stopped' in admission) {
        if (this.refuseIfEnded({})) return;
        return this.stopped('the harness closed the connection while its call waited for its part of the token budget');
      }
      this.hold = admission.hold;
      this.replyMost = want.cap === null ? admission.hold.tokens : (admission.hold.cap ?? want.cap) * want.choices;
      this.request = api.prepare(body!, gate.upstream.model, admission.hold.cap);
      return await this.forward(Buffer.from(JSON.stringify(this.request)), body!);
    } finally {
      gate.forwarding--;
      gate.release(this.hold);
    }
  }

  /** the gate's admission, given up when the harness hangs up (or the request is cut short) while it waits */
  private async admit(want: ReplyCap) {
    const stop = new AbortController();
    const onStop = () => stop.abort();
    this.signal.addEventListener('abort', onStop);
    this.res.once('close', onStop);
    if (this.signal.aborted || this.res.destroyed) onStop();
    try {
      return await this.gate.admit(want, stop.signal);
    } finally {
      this.signal.removeEventListener('abort', onStop);
      this.res.off('close', onStop);
    }
  }

  private async forward(body: Buffer | null, harnessBody: Record<string, unknown> | null = null): Promise<void> {
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
    let drain: NodeJS.Timeout | null = null;
    const onClose = () => {
      if (res.writableFinished) return;
      const gone: Stop = { kind: 'client_gone', message: 'the harness closed the connection before the reply was complete' };
      if (!this.counts()) return ctl.abort(gone);
      // the upstream reports the usage at the reply's end: read on to it, for a while (the call's own bounds still hold)
      this.harnessGone = true;
      drain = setTimeout(
        () => ctl.abort({ ...gone, message: `${gone.message}, and the reply did not end within ${limits.hangUpDrainMs / 1000} s after` }),
        limits.hangUpDrainMs,
      );
    };
    res.once('close', onClose);
    // gone already (while the call waited at the door): read on all the same
    if (res.destroyed) onClose();
    try {
      const headers: OutgoingHttpHeaders = {};
      for (const h of FORWARDED_REQUEST_HEADERS) if (typeof this.req.headers[h] === 'string') headers[h] = this.req.headers[h];
      if (body) headers['content-type'] = 'application/json';
      if (this.harnessKey !== null) headers.authorization = `Bearer ${this.harnessKey}`;
      Object.assign(headers, gate.upstream.headers);
      const url = new URL(gate.upstream.base_url.replace(/\/+$/, '') + api!.upstreamPath);
      let up: IncomingMessage;
      try {
        this.sentBytes = body?.length ?? 0;
        up = await this.client.send({ url, method: api!.method, headers, body, signal: ctl.signal });
      } catch (err) {
        return this.failed(ctl.signal, `the model upstream ${url.origin} could not be reached: ${(err as Error).message}`);
      }
      this.upstreamStatus = up.statusCode ?? 0;
      const sse = /^text\/event-stream\b/i.test(String(up.headers['content-type'] ?? '')) && this.upstreamStatus < 300;
      return await (sse ? this.relayStream(up, ctl, harnessBody) : this.relayWhole(up, ctl));
    } finally {
      clearTimeout(deadline);
      if (drain) clearTimeout(drain);
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
        this.receivedBytes = size;
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
    if (this.harnessGone) return this.record(499, 'client_gone', status < 300 ? this.api!.usage(response) : null, response, READ_ON, null, true);
    if (status >= 500) {
      const error = `the model upstream answered ${status}`;
      sendJson(this.res, 502, errorBody(this.shape, 'model_upstream_error', `${error}: ${text.slice(0, 500)}`), NO_RETRY);
      return this.record(502, 'upstream_error', null, response, error, null, true);
    }
    if (status >= 200 && status < 300 && !json.ok) {
      const error = `the model upstream's reply is not usable JSON (${json.problem})`;
      sendJson(this.res, 502, errorBody(this.shape, 'model_upstream_error', error), NO_RETRY);
      return this.record(502, 'upstream_error', null, response, error, null, true);
    }
    if (!this.res.headersSent && !this.res.destroyed) this.res.writeHead(status, { ...headers, 'content-length': Buffer.byteLength(text) }).end(text);
    const usage = status < 300 ? this.api!.usage(response) : null;
    return this.record(
      status,
      status < 300 ? 'ok' : 'upstream_rejected',
      usage,
      response,
      status < 300 ? null : `the model upstream answered ${status}`,
      null,
      true,
    );
  }

  /**
   * A streamed reply: every chunk goes to the harness as it arrives, and is watched on the way.
   * Where the harness did not ask for some events (the usage chunk), the stream goes on event by
   * event instead, without them.
   */
  private async relayStream(up: IncomingMessage, ctl: AbortController, harnessBody: Record<string, unknown> | null): Promise<void> {
    const { res } = this;
    const limits = this.limits;
    const withheld = harnessBody ? this.api!.withheld(harnessBody) : null;
    let more = true;
    const pass = (bytes: Buffer | string) => {
      if (!this.harnessGone && !res.destroyed) more = res.write(bytes) && more;
    };
    const passUnlessWithheld = (raw: string, e: SseEvent | null) => {
      if (!e || !withheld!(e)) pass(raw);
    };
    // one event may be as long as a whole reply
    const parser = new SseParser(limits.maxResponseBytes, withheld ? passUnlessWithheld : undefined);
    const assembler = this.api!.reassembler();
    if (!this.harnessGone && !res.destroyed) {
      res.writeHead(this.upstreamStatus!, { ...this.replyHeaders(up), 'cache-control': 'no-cache', 'x-accel-buffering': 'no' });
      res.flushHeaders();
    }
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
    // a harness that hung up reads nothing more: the stream goes on without waiting for it (forward's listener came first)
    res.once('close', onDrain);
    const complete = await new Promise<boolean>((resolve) => {
      up.on('data', (c: Buffer) => {
        if (ctl.signal.aborted) return;
        this.firstByteAt ??= Date.now();
        size += c.length;
        this.receivedBytes = size;
        if (size > limits.maxStreamBytes) {
          ctl.abort({ kind: 'too_large', message: `the model upstream's stream is longer than ${limits.maxStreamBytes} bytes` } satisfies Stop);
          return;
        }
        more = true;
        if (!withheld) pass(c);
        try {
          for (const e of parser.push(c)) assembler.event(e);
        } catch (err) {
          ctl.abort({ kind: 'too_large', message: `the model upstream's stream is broken: ${(err as Error).message}` } satisfies Stop);
          return;
        }
        if (more || this.harnessGone) arm();
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
    res.off('close', onDrain);
    const ended = complete && !ctl.signal.aborted;
    if (ended) for (const e of parser.end()) assembler.event(e);
    const { response, usage, usageFinal, streamError } = assembler.result();
    if (this.harnessGone) {
      const why = ended
        ? READ_ON
        : ctl.signal.aborted
          ? (ctl.signal.reason as Stop).message
          : 'the harness closed the connection, then the upstream dropped the stream';
      return this.record(499, 'client_gone', usage, response, why, null, ended || usageFinal);
    }
    if (!ended) {
      const stop: Stop = ctl.signal.aborted
        ? (ctl.signal.reason as Stop)
        : { kind: 'too_large', message: 'the model upstream dropped the stream before it ended' };
      const outcome = outcomeOf(stop);
      this.streamError(stop.code ?? (outcome === 'upstream_timeout' ? 'model_upstream_timeout' : 'model_upstream_error'), stop.message);
      return this.record(this.upstreamStatus!, outcome, usage, response, stop.message, stop.code ?? null, usageFinal);
    }
    res.end();
    if (streamError !== null)
      return this.record(this.upstreamStatus!, 'upstream_error', usage, response, `the model upstream's stream reported an error: ${streamError}`, null, true);
    return this.record(this.upstreamStatus!, 'ok', usage, response, null, null, true);
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
    if (this.harnessGone) return this.record(499, 'client_gone', null, null, stop?.message ?? whenNoStop, null);
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
  private stopped(gone = 'the harness closed the connection while sending its request'): void {
    const stop = this.signal.aborted ? (this.signal.reason as Stop) : null;
    if (stop?.kind === 'cut_short') return this.refuse(stop.status ?? 410, stop.code ?? 'cut_short', stop.message);
    return this.record(499, 'client_gone', null, null, gone, null);
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

  /** a model call: the budget counts it (the models list and a count of a prompt's tokens are not) */
  private counts(): boolean {
    return this.api !== null && this.api.name !== 'openai.models' && this.api.name !== 'anthropic.count_tokens';
  }

  /**
   * What the call counts: nothing when it never went upstream; else the usage it reported, else
   * the estimate (counting.ts). `replyEnded`: the reply came to its end (whole, or its stream's).
   */
  private count(reported: Usage | null, replyEnded: boolean): Counted {
    if (this.sentBytes === null || !this.counts()) return { usage: reported, estimated: false };
    return countCall({
      reported,
      final: replyEnded,
      upstreamStatus: this.upstreamStatus,
      sent: this.sentBytes,
      received: this.receivedBytes,
      // abandoned by its harness and never ended: the upstream may have made all its cap allowed, unseen
      unseen: this.harnessGone && !replyEnded ? this.replyMost : 0,
    });
  }

  private record(
    status: number,
    outcome: CallOutcome,
    reported: Usage | null,
    response: unknown,
    error: string | null,
    refusal: string | null,
    replyEnded = false,
  ): void {
    const { usage, estimated } = this.count(reported, replyEnded);
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
      usage_estimated: estimated,
      error,
    });
    // after its record: an end this call causes comes after the call that caused it
    if (outcome !== 'refused' && this.counts()) this.gate.settle(outcome, usage, error, this.hold);
  }
}

const READ_ON = 'the harness closed the connection before the reply was complete (the reply was read to its end, for its usage)';

function outcomeOf(stop: Stop): 'upstream_timeout' | 'upstream_error' | 'cut_short' | 'client_gone' {
  if (stop.kind === 'timeout' || stop.kind === 'stall') return 'upstream_timeout';
  if (stop.kind === 'cut_short') return 'cut_short';
  if (stop.kind === 'client_gone') return 'client_gone';
  return 'upstream_error';
}
