/**
 * A model behind an OpenAI-compatible chat-completions endpoint (vLLM, SGLang, a hosted API):
 * one request per model turn, the task's tools as function tools. Whatever goes wrong on the
 * model's side is a ModelError with a reason, so the episode is reported as the model's failure,
 * never as the env's and never as a score.
 */
import { z } from 'zod';
import { readBoundedText } from '../util/bounded-body.js';
import type { FunctionTool } from '../rows/build.js';
import { describeIssue } from '../protocol/zod-issues.js';

/** `eval`: the largest chat-completion reply it reads from a model endpoint (a reply of the longest context is far smaller); past it the model's reply is bad. */
export const MODEL_REPLY_MAX_BYTES = 16 * 1024 * 1024;

export const ToolCallSchema = z.object({
  id: z.string().default(''),
  type: z.literal('function').default('function'),
  function: z.object({ name: z.string(), arguments: z.string().default('') }),
});
export type ToolCall = z.infer<typeof ToolCallSchema>;

export type ChatMessage =
  | { role: 'system' | 'user'; content: string }
  | { role: 'assistant'; content: string | null; tool_calls?: ToolCall[] }
  | { role: 'tool'; tool_call_id: string; content: string };

const UsageSchema = z.object({ prompt_tokens: z.number().int().min(0), completion_tokens: z.number().int().min(0) }).passthrough();
export type Usage = { prompt_tokens: number; completion_tokens: number };

const ReplySchema = z.object({
  choices: z
    .array(
      z.object({
        message: z.object({
          content: z.string().nullable().optional(),
          tool_calls: z.array(ToolCallSchema).nullable().optional(),
        }),
        finish_reason: z.string().nullable().optional(),
      }),
    )
    .min(1),
  usage: UsageSchema.nullable().optional(),
});

export type ModelFailureReason = 'model_timeout' | 'model_unreachable' | 'model_http_error' | 'model_bad_reply';

export class ModelError extends Error {
  override readonly name = 'ModelError';
  constructor(
    readonly reason: ModelFailureReason,
    message: string,
  ) {
    super(message);
  }
}

/** The longest the endpoint check waits (it is bounded by --model-timeout too). */
const PROBE_TIMEOUT_MS = 30_000;

export interface ChatModelOptions {
  /** the endpoint's base, e.g. http://127.0.0.1:30000/v1 */
  url: string;
  model: string;
  apiKey: string | null;
  temperature: number | null;
  maxTokens: number | null;
  /** extra arguments of the endpoint's chat template (SGLang and vLLM read `chat_template_kwargs`) */
  chatTemplateKwargs: Record<string, unknown> | null;
  timeoutMs: number;
}

export interface ModelReply {
  message: Extract<ChatMessage, { role: 'assistant' }>;
  usage: Usage | null;
  finishReason: string | null;
}

export class ChatModel {
  constructor(private readonly o: ChatModelOptions) {}

  get endpoint(): string {
    return this.o.url.endsWith('/chat/completions') ? this.o.url : `${this.o.url}/chat/completions`;
  }

  /**
   * Asks the endpoint which models it serves (GET …/models, which vLLM, SGLang and hosted APIs
   * answer), before anything is deployed: an address that does not answer, a refused key or a
   * model the endpoint does not serve is a ModelError now rather than one failed episode per task.
   * An endpoint without the route (404) or with another answer is given the benefit of the doubt.
   */
  async checkEndpoint(signal?: AbortSignal): Promise<void> {
    const url = `${this.endpoint.replace(/\/chat\/completions$/, '')}/models`;
    const timeoutMs = Math.min(this.o.timeoutMs, PROBE_TIMEOUT_MS);
    const deadline = AbortSignal.timeout(timeoutMs);
    let res: Response;
    let read: Awaited<ReturnType<typeof readBoundedText>>;
    try {
      res = await fetch(url, {
        headers: { accept: 'application/json', ...(this.o.apiKey ? { authorization: `Bearer ${this.o.apiKey}` } : {}) },
        signal: signal ? AbortSignal.any([signal, deadline]) : deadline,
      });
      read = await readBoundedText(res, MODEL_REPLY_MAX_BYTES);
    } catch (e) {
      if (signal?.aborted) throw e;
      if (deadline.aborted) throw new ModelError('model_timeout', `the model endpoint did not answer GET ${url} within ${timeoutMs / 1000} s`);
      const err = e as Error & { cause?: { code?: string; message?: string } };
      throw new ModelError('model_unreachable', `cannot reach the model at ${url}: ${err.cause?.message ?? err.cause?.code ?? err.message}`);
    }
    if ('over' in read)
      throw new ModelError('model_bad_reply', `the model endpoint answered GET ${url} with more than ${MODEL_REPLY_MAX_BYTES / 1024 / 1024} MiB: not read`);
    const text = read.text;
    if (res.status === 401 || res.status === 403) {
      throw new ModelError(
        'model_http_error',
        `the model endpoint refused GET ${url} (HTTP ${res.status})${this.o.apiKey ? ': check the key --model-key-var names' : ': it needs a key, named by --model-key-var'}`,
      );
    }
    if (!res.ok) return;
    let listed: string[] | null = null;
    try {
      const body = JSON.parse(text) as { data?: { id?: unknown }[] };
      if (Array.isArray(body.data)) listed = body.data.map((m) => m.id).filter((id): id is string => typeof id === 'string');
    } catch {
      return;
    }
    if (listed && listed.length > 0 && !listed.includes(this.o.model)) {
      const shown = listed.slice(0, 8).map((m) => JSON.stringify(m));
      throw new ModelError(
        'model_http_error',
        `the model endpoint serves ${shown.join(', ')}${listed.length > 8 ? ` and ${listed.length - 8} more` : ''}, not ${JSON.stringify(this.o.model)}: pass one of them as --model`,
      );
    }
  }

  /** One model turn; `signal` aborts it (Ctrl-C). Throws ModelError, or the signal's AbortError. */
  async complete(messages: readonly ChatMessage[], tools: readonly FunctionTool[], signal?: AbortSignal): Promise<ModelReply> {
    const { model, apiKey, temperature, maxTokens, chatTemplateKwargs, timeoutMs } = this.o;
    const body = {
      model,
      messages,
      tools,
      tool_choice: 'auto',
      ...(temperature === null ? {} : { temperature }),
      ...(maxTokens === null ? {} : { max_tokens: maxTokens }),
      ...(chatTemplateKwargs === null ? {} : { chat_template_kwargs: chatTemplateKwargs }),
    };
    const deadline = AbortSignal.timeout(timeoutMs);
    const both = signal ? AbortSignal.any([signal, deadline]) : deadline;
    let res: Response;
    let read: Awaited<ReturnType<typeof readBoundedText>>;
    try {
      res = await fetch(this.endpoint, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json', ...(apiKey ? { authorization: `Bearer ${apiKey}` } : {}) },
        body: JSON.stringify(body),
        signal: both,
      });
      read = await readBoundedText(res, MODEL_REPLY_MAX_BYTES);
    } catch (e) {
      if (signal?.aborted) throw e;
      if (deadline.aborted) throw new ModelError('model_timeout', `the model did not answer within model_timeout (${timeoutMs / 1000} s)`);
      const err = e as Error & { cause?: { code?: string; message?: string } };
      throw new ModelError('model_unreachable', `cannot reach the model at ${this.endpoint}: ${err.cause?.message ?? err.cause?.code ?? err.message}`);
    }
    if ('over' in read) {
      throw new ModelError(
        'model_bad_reply',
        `the model endpoint answered HTTP ${res.status} with more than ${MODEL_REPLY_MAX_BYTES / 1024 / 1024} MiB, more than any chat completion: not read`,
      );
    }
    const text = read.text;
    if (!res.ok) {
      throw new ModelError('model_http_error', `the model endpoint answered HTTP ${res.status}: ${text.replace(/\s+/g, ' ').slice(0, 300)}`);
    }
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      throw new ModelError('model_bad_reply', `the model endpoint answered HTTP ${res.status} with no JSON: ${text.slice(0, 200)}`);
    }
    const parsed = ReplySchema.safeParse(json);
    if (!parsed.success) {
      const issue = parsed.error.issues[0]!;
      throw new ModelError('model_bad_reply', `the model's reply is not a chat completion (${describeIssue(issue, { root: 'body' })})`);
    }
    const choice = parsed.data.choices[0]!;
    const toolCalls = choice.message.tool_calls ?? [];
    const message: ModelReply['message'] = {
      role: 'assistant',
      content: choice.message.content ?? null,
      ...(toolCalls.length ? { tool_calls: toolCalls } : {}),
    };
    const u = parsed.data.usage;
    return {
      message,
      usage: u ? { prompt_tokens: u.prompt_tokens, completion_tokens: u.completion_tokens } : null,
      finishReason: choice.finish_reason ?? null,
    };
  }
}
