/**
 * A model upstream for the gateway's tests: a real HTTP server on 127.0.0.1 whose every reply the
 * test scripts (a JSON body, an SSE stream sent event by event and optionally held, a hang, a
 * status, a huge body, a dropped connection), recording what reached it under /v1 (path, headers, body).
 * Builders make replies in the wire shapes of OpenAI chat, OpenAI responses and Anthropic messages.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

export interface Received {
  method: string;
  path: string;
  headers: IncomingMessage['headers'];
  body: any;
}

export type Reply =
  | { kind: 'json'; status?: number; body: unknown }
  /** each event is written on its own, `gapMs` apart; with `holdAfter`, the stream waits after that many events until release() */
  | { kind: 'sse'; events: string[]; gapMs?: number; holdAfter?: number; then?: 'end' | 'hang' | 'drop' }
  | { kind: 'hang' }
  | { kind: 'bytes'; status?: number; contentType: string; size: number }
  | { kind: 'drop' };

export interface FakeUpstream {
  /** http://127.0.0.1:port/v1 */
  baseUrl: string;
  received: Received[];
  /** replies held unanswered or mid-stream, and connections open */
  openResponses(): number;
  /** lets every held stream go on */
  release(): void;
  /** resolves when a request has been received (the n-th, counting from 1) */
  receivedN(n: number): Promise<void>;
  close(): Promise<void>;
}

export async function startFakeUpstream(script: (r: Received) => Reply): Promise<FakeUpstream> {
  const received: Received[] = [];
  const open = new Set<ServerResponse>();
  const sockets = new Set<Socket>();
  let releases: (() => void)[] = [];
  let waiters: { n: number; resolve: () => void }[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const text = Buffer.concat(chunks).toString();
      let body: unknown;
      try {
        body = text ? JSON.parse(text) : null;
      } catch {
        body = text;
      }
      const r: Received = { method: req.method ?? '', path: req.url ?? '', headers: req.headers, body };
      // the gateway calls its upstream under /v1 (baseUrl): anything else is a stray client of another
      // test file of the same process (the fast layer runs files in parallel) still polling a port of
      // its own that this server took over after it closed (a GET /health): not recorded, refused
      if (!r.path.startsWith('/v1/')) {
        res.writeHead(404, { 'content-type': 'text/plain' }).end('not a model API path of this fake upstream');
        return;
      }
      received.push(r);
      waiters = waiters.filter((w) => (received.length >= w.n ? (w.resolve(), false) : true));
      open.add(res);
      res.on('close', () => open.delete(res));
      void answer(res, script(r));
    });
  });
  server.on('connection', (s: Socket) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });

  const held = () => new Promise<void>((resolve) => releases.push(resolve));
  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

  async function answer(res: ServerResponse, reply: Reply): Promise<void> {
    switch (reply.kind) {
      case 'json': {
        const t = JSON.stringify(reply.body);
        res.writeHead(reply.status ?? 200, { 'content-type': 'application/json', 'x-request-id': 'req-fake' }).end(t);
        return;
      }
      case 'hang':
        return;
      case 'drop':
        res.socket?.destroy();
        return;
      case 'bytes': {
        res.writeHead(reply.status ?? 200, { 'content-type': reply.contentType });
        const chunk = Buffer.alloc(64 * 1024, 'a');
        let left = reply.size;
        while (left > 0 && !res.destroyed) {
          const n = Math.min(left, chunk.length);
          if (!res.write(chunk.subarray(0, n))) {
            await new Promise<void>((r) => {
              const go = () => {
                res.off('drain', go).off('close', go);
                r();
              };
              res.on('drain', go).on('close', go);
            });
          }
          left -= n;
        }
        res.end();
        return;
      }
      case 'sse': {
        res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
        res.flushHeaders();
        for (let i = 0; i < reply.events.length; i++) {
          if (res.destroyed) return;
          if (reply.holdAfter !== undefined && i === reply.holdAfter) await held();
          else if (i > 0 && reply.gapMs) await sleep(reply.gapMs);
          res.write(reply.events[i]);
        }
        if (reply.then === 'hang') return;
        if (reply.then === 'drop') {
          res.socket?.destroy();
          return;
        }
        res.end();
        return;
      }
    }
  }

  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  return {
    baseUrl: `http://127.0.0.1:${port}/v1`,
    received,
    openResponses: () => open.size,
    release() {
      const rs = releases;
      releases = [];
      for (const r of rs) r();
    },
    receivedN(n) {
      if (received.length >= n) return Promise.resolve();
      return new Promise((resolve) => waiters.push({ n, resolve }));
    },
    close: () =>
      new Promise<void>((r) => {
        for (const s of sockets) s.destroy();
        server.close(() => r());
      }),
  };
}

/** an SSE event of `data` (JSON-encoded unless a string), with an event name when given */
export function sse(data: unknown, event?: string): string {
  return `${event ? `event: ${event}\n` : ''}data: ${typeof data === 'string' ? data : JSON.stringify(data)}\n\n`;
}

export interface ToolCall {
  id: string;
  name: string;
  arguments: string;
}

export function chatCompletion(content: string | null, opts: { toolCalls?: ToolCall[]; usage?: [number, number]; model?: string } = {}): unknown {
  const [p, c] = opts.usage ?? [10, 7];
  return {
    id: 'chatcmpl-1',
    object: 'chat.completion',
    created: 1,
    model: opts.model ?? 'fake-model',
    choices: [
      {
        index: 0,
        message: {
          role: 'assistant',
          content,
          ...(opts.toolCalls
            ? { tool_calls: opts.toolCalls.map((t) => ({ id: t.id, type: 'function', function: { name: t.name, arguments: t.arguments } })) }
            : {}),
        },
        finish_reason: opts.toolCalls ? 'tool_calls' : 'stop',
      },
    ],
    usage: { prompt_tokens: p, completion_tokens: c, total_tokens: p + c },
  };
}

/** a chat stream: the text in `pieces`, tool calls with their arguments in two deltas, the usage chunk when asked, [DONE] */
export function chatChunks(pieces: string[], opts: { toolCalls?: ToolCall[]; usage?: [number, number] | null } = {}): string[] {
  const base = { id: 'chatcmpl-s', object: 'chat.completion.chunk', created: 2, model: 'fake-model' };
  const out = [sse({ ...base, choices: [{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }] })];
  for (const p of pieces) out.push(sse({ ...base, choices: [{ index: 0, delta: { content: p }, finish_reason: null }] }));
  (opts.toolCalls ?? []).forEach((t, i) => {
    const half = Math.floor(t.arguments.length / 2);
    out.push(
      sse({
        ...base,
        choices: [
          { index: 0, delta: { tool_calls: [{ index: i, id: t.id, type: 'function', function: { name: t.name, arguments: t.arguments.slice(0, half) } }] } },
        ],
      }),
    );
    out.push(sse({ ...base, choices: [{ index: 0, delta: { tool_calls: [{ index: i, function: { arguments: t.arguments.slice(half) } }] } }] }));
  });
  out.push(sse({ ...base, choices: [{ index: 0, delta: {}, finish_reason: opts.toolCalls ? 'tool_calls' : 'stop' }] }));
  if (opts.usage !== null) {
    const [p, c] = opts.usage ?? [10, 7];
    out.push(sse({ ...base, choices: [], usage: { prompt_tokens: p, completion_tokens: c, total_tokens: p + c } }));
  }
  out.push('data: [DONE]\n\n');
  return out;
}

export function anthropicMessage(text: string, usage: [number, number] = [12, 5]): unknown {
  return {
    id: 'msg_1',
    type: 'message',
    role: 'assistant',
    model: 'fake-claude',
    content: [{ type: 'text', text }],
    stop_reason: 'end_turn',
    stop_sequence: null,
    usage: { input_tokens: usage[0], output_tokens: usage[1] },
  };
}

/** Anthropic's stream: a text block in `pieces`, then a tool_use block whose input JSON comes in two parts */
export function anthropicEvents(pieces: string[], tool?: { id: string; name: string; input: unknown }, usage: [number, number] = [12, 5]): string[] {
  const out = [
    sse(
      {
        type: 'message_start',
        message: {
          id: 'msg_s',
          type: 'message',
          role: 'assistant',
          model: 'fake-claude',
          content: [],
          stop_reason: null,
          usage: { input_tokens: usage[0], output_tokens: 1 },
        },
      },
      'message_start',
    ),
    sse({ type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } }, 'content_block_start'),
    sse({ type: 'ping' }, 'ping'),
  ];
  for (const p of pieces) out.push(sse({ type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: p } }, 'content_block_delta'));
  out.push(sse({ type: 'content_block_stop', index: 0 }, 'content_block_stop'));
  if (tool) {
    const json = JSON.stringify(tool.input);
    const half = Math.floor(json.length / 2);
    out.push(
      sse({ type: 'content_block_start', index: 1, content_block: { type: 'tool_use', id: tool.id, name: tool.name, input: {} } }, 'content_block_start'),
    );
    out.push(sse({ type: 'content_block_delta', index: 1, delta: { type: 'input_json_delta', partial_json: json.slice(0, half) } }, 'content_block_delta'));
    out.push(sse({ type: 'content_block_delta', index: 1, delta: { type: 'input_json_delta', partial_json: json.slice(half) } }, 'content_block_delta'));
    out.push(sse({ type: 'content_block_stop', index: 1 }, 'content_block_stop'));
  }
  out.push(
    sse(
      { type: 'message_delta', delta: { stop_reason: tool ? 'tool_use' : 'end_turn', stop_sequence: null }, usage: { output_tokens: usage[1] } },
      'message_delta',
    ),
  );
  out.push(sse({ type: 'message_stop' }, 'message_stop'));
  return out;
}

export function responsesEvents(text: string, usage: [number, number] = [8, 3]): string[] {
  const response = {
    id: 'resp_1',
    object: 'response',
    status: 'completed',
    model: 'fake-model',
    output: [{ type: 'message', role: 'assistant', content: [{ type: 'output_text', text }] }],
    usage: { input_tokens: usage[0], output_tokens: usage[1], total_tokens: usage[0] + usage[1] },
  };
  return [
    sse({ type: 'response.created', response: { ...response, status: 'in_progress', output: [] } }, 'response.created'),
    sse({ type: 'response.output_text.delta', delta: text.slice(0, 2) }, 'response.output_text.delta'),
    sse({ type: 'response.output_text.delta', delta: text.slice(2) }, 'response.output_text.delta'),
    sse({ type: 'response.completed', response }, 'response.completed'),
  ];
}
