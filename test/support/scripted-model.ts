/**
 * A real HTTP server speaking the OpenAI chat-completions wire shape (POST /v1/chat/completions)
 * whose "model" is a scripted policy: the test decides each reply from the conversation so far,
 * so the rewards an eval must report are known. Replies report token usage like vLLM and SGLang.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

export interface ChatRequest {
  model: string;
  messages: { role: string; content: string | null; tool_calls?: { id: string; function: { name: string; arguments: string } }[]; tool_call_id?: string }[];
  tools?: { type: 'function'; function: { name: string; description: string; parameters: unknown } }[];
  temperature?: number;
  max_tokens?: number;
  chat_template_kwargs?: Record<string, unknown>;
}

/** What the policy answers: a reply (text and/or tool calls), an HTTP failure, or no answer at all. */
export type PolicyAnswer = { content?: string | null; tool_calls?: { name: string; arguments: unknown }[] } | { status: number; body: string } | 'hang';

export type Policy = (req: ChatRequest) => PolicyAnswer;

/** Tokens a reply reports: deterministic, so a test can add them up. */
export const usageOf = (req: ChatRequest) => ({ prompt_tokens: 10 * req.messages.length, completion_tokens: 7 });

export interface ScriptedModel {
  /** the base a client is given, …/v1 */
  url: string;
  requests: ChatRequest[];
  /** the Authorization header each of `requests` came with (null: none) */
  authorizations: (string | null)[];
  /** requests held unanswered (policy 'hang') */
  hanging(): number;
  close(): Promise<void>;
}

/** `models`: what GET /v1/models lists (as vLLM and SGLang answer it); without it the route is 404, as on endpoints without one */
export async function startScriptedModel(policy: Policy, opts: { models?: string[] } = {}): Promise<ScriptedModel> {
  const requests: ChatRequest[] = [];
  const authorizations: (string | null)[] = [];
  const held = new Set<ServerResponse>();
  const sockets = new Set<Socket>();
  let n = 0;
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (req.method === 'GET' && req.url === '/v1/models' && opts.models) {
        res
          .writeHead(200, { 'content-type': 'application/json' })
          .end(JSON.stringify({ object: 'list', data: opts.models.map((id) => ({ id, object: 'model' })) }));
        return;
      }
      if (req.method !== 'POST' || req.url !== '/v1/chat/completions') {
        res.writeHead(404, { 'content-type': 'application/json' }).end('{"error":{"message":"not found"}}');
        return;
      }
      const body = JSON.parse(Buffer.concat(chunks).toString()) as ChatRequest;
      requests.push(body);
      authorizations.push(req.headers.authorization ?? null);
      const answer = policy(body);
      if (answer === 'hang') {
        held.add(res);
        res.on('close', () => held.delete(res));
        return;
      }
      if ('status' in answer) {
        res.writeHead(answer.status, { 'content-type': 'application/json' }).end(answer.body);
        return;
      }
      const calls = (answer.tool_calls ?? []).map((c, i) => ({
        id: `call_${++n}_${i}`,
        type: 'function',
        function: { name: c.name, arguments: typeof c.arguments === 'string' ? c.arguments : JSON.stringify(c.arguments) },
      }));
      const reply = {
        id: `chatcmpl-${n}`,
        object: 'chat.completion',
        created: 0,
        model: body.model,
        choices: [
          {
            index: 0,
            message: { role: 'assistant', content: answer.content ?? null, ...(calls.length ? { tool_calls: calls } : {}) },
            finish_reason: calls.length ? 'tool_calls' : 'stop',
          },
        ],
        usage: { ...usageOf(body), total_tokens: usageOf(body).prompt_tokens + usageOf(body).completion_tokens },
      };
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(reply));
    });
  });
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/v1`,
    requests,
    authorizations,
    hanging: () => held.size,
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** The conversation's first user prompt: how a policy tells which task it is playing. */
export function firstPrompt(req: ChatRequest): string {
  return req.messages.find((m) => m.role === 'user')?.content ?? '';
}

/** The model turns already taken in this conversation. */
export function turnsTaken(req: ChatRequest): number {
  return req.messages.filter((m) => m.role === 'assistant').length;
}
