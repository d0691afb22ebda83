/**
 * A scripted model: a small OpenAI-compatible chat-completions server on 127.0.0.1 that answers
 * as a script says, for `check` to play a harness task through the model gateway (check-harness.ts,
 * docs/gateway.md "checking a harness task"). Each script has a base URL of its own
 * (`http://127.0.0.1:PORT/s/ID/v1`), given to an episode as its reset's model upstream.
 *
 * A script is a list of bash commands per turn instruction. A request is answered from the request
 * alone (nothing is kept between calls, so a replay is answered alike): its first user message
 * names the turn (the instruction the harness got), the assistant messages so far say how far the
 * harness is; the next command goes back as a `bash` tool call, and once none is left the reply is
 * a plain "done" with no tool call, which ends the shipped harness's run. Every reply reports a
 * usage (a deterministic estimate: a character count / 4), as an upstream does.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/** the model name the scripted model serves */
export const SCRIPTED_MODEL_NAME = 'openenv-check-scripted';

/** the answer that ends a run: no tool call */
export const SCRIPTED_DONE = 'done';

/** the bash commands a harness is told to run, per turn; a turn is found by its instruction */
export interface ModelScript {
  turns: { instruction: string; commands: string[] }[];
}

/** the largest request body read (a harness's whole conversation) */
const MAX_BODY_BYTES = 32 * 1024 * 1024;

const tokensOf = (text: string) => Math.max(1, Math.ceil(text.length / 4));

interface ChatBody {
  messages?: { role?: string; content?: unknown }[];
  stream?: boolean;
}

/** The reply a script gives to a conversation: the next command, or null (done). */
export function nextCommand(script: ModelScript, messages: NonNullable<ChatBody['messages']>): string | null {
  const user = messages.find((m) => m.role === 'user');
  const text = typeof user?.content === 'string' ? user.content : Array.isArray(user?.content) ? JSON.stringify(user.content) : '';
  const turn = script.turns.find((t) => t.instruction === text) ?? script.turns.find((t) => text.includes(t.instruction.trim()));
  if (!turn) return null;
  const asked = messages.filter((m) => m.role === 'assistant').length;
  return turn.commands[asked] ?? null;
}

export class ScriptedModel {
  private readonly scripts = new Map<string, ModelScript>();
  private server: Server | null = null;
  private port = 0;
  private next = 0;
  /** calls answered, for the tests and the report */
  calls = 0;

  async start(): Promise<void> {
    const server = createServer((req, res) => void this.handle(req, res));
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => resolve());
    });
    this.server = server;
    this.port = (server.address() as AddressInfo).port;
  }

  /** a base URL (…/v1) that answers per `script` */
  add(script: ModelScript): string {
    if (!this.server) throw new Error('the scripted model is not started');
    const id = `${++this.next}`;
    this.scripts.set(id, script);
    return `http://127.0.0.1:${this.port}/s/${id}/v1`;
  }

  async close(): Promise<void> {
    const s = this.server;
    this.server = null;
    if (!s) return;
    s.closeAllConnections();
    await new Promise<void>((resolve) => s.close(() => resolve()));
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const m = /^\/s\/([0-9]+)\/v1\/(models|chat\/completions)$/.exec(new URL(req.url ?? '/', 'http://x').pathname);
    const script = m ? this.scripts.get(m[1]!) : undefined;
    const send = (status: number, body: unknown) => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(body));
    };
    if (!m || !script) return send(404, { error: { message: `the scripted model has no ${req.url}`, type: 'not_found' } });
    if (m[2] === 'models') return send(200, { object: 'list', data: [{ id: SCRIPTED_MODEL_NAME, object: 'model', owned_by: 'openenv-check' }] });
    if (req.method !== 'POST') return send(405, { error: { message: 'POST a chat completion', type: 'invalid_request_error' } });
    let body: ChatBody;
    try {
      const chunks: Buffer[] = [];
      let size = 0;
      for await (const c of req) {
        size += (c as Buffer).length;
        if (size > MAX_BODY_BYTES)
          return send(413, { error: { message: 'the conversation is too long for the scripted model', type: 'invalid_request_error' } });
        chunks.push(c as Buffer);
      }
      body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as ChatBody;
    } catch {
      return send(400, { error: { message: 'the body is not JSON', type: 'invalid_request_error' } });
    }
    this.calls++;
    const messages = Array.isArray(body.messages) ? body.messages : [];
    const command = nextCommand(script, messages);
    const asked = messages.filter((x) => x.role === 'assistant').length;
    const toolCall =
      command === null ? null : { id: `call_${asked + 1}`, type: 'function', function: { name: 'bash', arguments: JSON.stringify({ command }) } };
    const usage = {
      prompt_tokens: tokensOf(JSON.stringify(messages)),
      completion_tokens: tokensOf(command ?? SCRIPTED_DONE),
      total_tokens: 0,
    };
    usage.total_tokens = usage.prompt_tokens + usage.completion_tokens;
    const created = Math.floor(Date.now() / 1000);
    const id = `chatcmpl-scripted-${this.calls}`;
    if (body.stream) {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      const delta = toolCall ? { role: 'assistant', tool_calls: [{ index: 0, ...toolCall }] } : { role: 'assistant', content: SCRIPTED_DONE };
      const chunk = (choices: unknown[], extra: Record<string, unknown> = {}) =>
        `data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created, model: SCRIPTED_MODEL_NAME, choices, ...extra })}\n\n`;
      res.write(chunk([{ index: 0, delta, finish_reason: null }]));
      res.write(chunk([{ index: 0, delta: {}, finish_reason: toolCall ? 'tool_calls' : 'stop' }]));
      res.write(chunk([], { usage }));
      res.end('data: [DONE]\n\n');
      return;
    }
    send(200, {
      id,
      object: 'chat.completion',
      created,
      model: SCRIPTED_MODEL_NAME,
      choices: [
        {
          index: 0,
          message: toolCall ? { role: 'assistant', content: null, tool_calls: [toolCall] } : { role: 'assistant', content: SCRIPTED_DONE },
          finish_reason: toolCall ? 'tool_calls' : 'stop',
        },
      ],
      usage,
    });
  }
}
