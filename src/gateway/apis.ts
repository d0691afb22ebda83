/**
 * The model APIs a harness calls through the gateway, declared once: the path a harness uses, the
 * path on the upstream (relative to its base URL), how an error is shaped for that API's clients,
 * where a reply says its usage, how the upstream is made to report it, which fields cap a reply's
 * tokens (and how they are lowered to what the budget leaves), and how its stream is put back
 * together.
 */
import type { ModelApi } from '../protocol/model.js';
import { isObject } from './bounded-json.js';
import type { SseEvent } from './sse.js';
import {
  AnthropicMessagesReassembler,
  OpenAIChatReassembler,
  OpenAIResponsesReassembler,
  anthropicMessageUsage,
  openaiChatUsage,
  openaiResponsesUsage,
  type StreamReassembler,
  type Usage,
} from './reassembly.js';

export type ApiName = ModelApi;

/** the most tokens a request lets its reply have: per choice (null: no cap, the model's own limit), times its choices */
export interface ReplyCap {
  cap: number | null;
  choices: number;
}

export interface ApiSpec {
  name: ApiName;
  method: 'GET' | 'POST';
  /** the gateway's path: what OPENAI_BASE_URL (…/v1) or ANTHROPIC_BASE_URL (no /v1) lead a client's SDK to */
  path: string;
  /** appended to the upstream's base URL (which ends in its own /v1, or wherever its API is) */
  upstreamPath: string;
  /** error bodies in the shape this API's clients read */
  errors: 'openai' | 'anthropic';
  usage(body: unknown): Usage | null;
  reassembler(): StreamReassembler;
  /** the reply cap the harness's request asks for */
  replyCap(body: Record<string, unknown>): ReplyCap;
  /**
   * The request as it goes upstream: the episode's model (when the server names one) replaces the
   * harness's; a stream asks for its usage wherever its API makes that a choice (the token budget
   * and the record need it); a reply cap above `cap` (what the budget leaves each choice) is lowered
   * to it. A cap is never added where the harness gave none: a server refuses one larger than its
   * model's context leaves (vLLM, SGLang) or than its model may write (OpenAI), which the gateway
   * cannot know.
   */
  prepare(body: Record<string, unknown>, model: string | undefined, cap: number | null): Record<string, unknown>;
  /** the events of a stream the harness did not ask for and does not get (null: it gets them all) */
  withheld(body: Record<string, unknown>): ((e: SseEvent) => boolean) | null;
}

function withModel(body: Record<string, unknown>, model: string | undefined): Record<string, unknown> {
  return model === undefined ? { ...body } : { ...body, model };
}

/** a token count a request gives: a positive integer, else none (null, absent, or what the upstream would refuse) */
function tokenCount(v: unknown): number | null {
  return typeof v === 'number' && Number.isSafeInteger(v) && v > 0 ? v : null;
}

/** the request's cap: the largest of `fields` it gives (a server reads the one it knows), with its choices */
function capOf(body: Record<string, unknown>, fields: readonly string[], choices = 1): ReplyCap {
  const caps = fields.map((f) => tokenCount(body[f])).filter((c): c is number => c !== null);
  return { cap: caps.length ? Math.max(...caps) : null, choices };
}

/** every cap of `fields` the request gives, lowered to `cap` */
function lowerCaps(out: Record<string, unknown>, fields: readonly string[], cap: number | null): void {
  if (cap === null) return;
  for (const f of fields) {
    const v = tokenCount(out[f]);
    if (v !== null && v > cap) out[f] = cap;
  }
}

const CHAT_CAPS = ['max_completion_tokens', 'max_tokens'] as const;

/** an OpenAI chat chunk that carries only the usage (its choices empty), as include_usage sends it before [DONE] */
function isChatUsageChunk(e: SseEvent): boolean {
  if (!e.data.includes('"usage"')) return false;
  try {
    const d: unknown = JSON.parse(e.data);
    return isObject(d) && isObject(d.usage) && Array.isArray(d.choices) && d.choices.length === 0;
  } catch {
    return false;
  }
}

/** the harness gets the usage chunk when it asked (include_usage), or said nothing of stream_options (the gateway has always sent it then) */
function chatHarnessWantsUsage(body: Record<string, unknown>): boolean {
  return body.stream_options === undefined || (isObject(body.stream_options) && body.stream_options.include_usage === true);
}

export const APIS: readonly ApiSpec[] = [
  {
    name: 'openai.chat',
    method: 'POST',
    path: '/v1/chat/completions',
    upstreamPath: '/chat/completions',
    errors: 'openai',
    usage: openaiChatUsage,
    reassembler: () => new OpenAIChatReassembler(),
    replyCap: (body) => capOf(body, CHAT_CAPS, tokenCount(body.n) ?? 1),
    prepare(body, model, cap) {
      const out = withModel(body, model);
      // always, whatever the harness said: a stream reports its usage only when asked (withheld below when the harness did not ask)
      if (out.stream === true) out.stream_options = { ...(isObject(out.stream_options) ? out.stream_options : {}), include_usage: true };
      lowerCaps(out, CHAT_CAPS, cap);
      return out;
    },
    withheld: (body) => (body.stream === true && !chatHarnessWantsUsage(body) ? isChatUsageChunk : null),
  },
  {
    name: 'openai.responses',
    method: 'POST',
    path: '/v1/responses',
    upstreamPath: '/responses',
    errors: 'openai',
    usage: openaiResponsesUsage,
    reassembler: () => new OpenAIResponsesReassembler(),
    // its replies and last stream event always carry the usage: nothing to ask for
    replyCap: (body) => capOf(body, ['max_output_tokens']),
    prepare(body, model, cap) {
      const out = withModel(body, model);
      lowerCaps(out, ['max_output_tokens'], cap);
      return out;
    },
    withheld: () => null,
  },
  {
    name: 'anthropic.messages',
    method: 'POST',
    path: '/v1/messages',
    upstreamPath: '/messages',
    errors: 'anthropic',
    usage: anthropicMessageUsage,
    reassembler: () => new AnthropicMessagesReassembler(),
    // its replies, message_start and message_delta always carry the usage: nothing to ask for
    replyCap: (body) => capOf(body, ['max_tokens']),
    prepare(body, model, cap) {
      const out = withModel(body, model);
      const asked = tokenCount(out.max_tokens);
      lowerCaps(out, ['max_tokens'], cap);
      // extended thinking's budget must stay under max_tokens, or the lowered request is refused
      const max = tokenCount(out.max_tokens);
      if (max !== null && max !== asked && isObject(out.thinking) && (tokenCount(out.thinking.budget_tokens) ?? 0) >= max) {
        out.thinking = { ...out.thinking, budget_tokens: Math.max(1, max - 1) };
      }
      return out;
    },
    withheld: () => null,
  },
  {
    // what Claude Code asks before its turns: the upstream counts a prompt, no model runs (not a call of the budget)
    name: 'anthropic.count_tokens',
    method: 'POST',
    path: '/v1/messages/count_tokens',
    upstreamPath: '/messages/count_tokens',
    errors: 'anthropic',
    usage: () => null,
    reassembler: () => new AnthropicMessagesReassembler(),
    replyCap: () => ({ cap: null, choices: 1 }),
    prepare: (body, model) => withModel(body, model),
    withheld: () => null,
  },
  {
    name: 'openai.models',
    method: 'GET',
    path: '/v1/models',
    upstreamPath: '/models',
    errors: 'openai',
    usage: () => null,
    reassembler: () => new OpenAIChatReassembler(),
    replyCap: () => ({ cap: null, choices: 1 }),
    prepare: (body) => body,
    withheld: () => null,
  },
];

/** the API a request's method and path ask for (the query string ignored) */
export function apiOf(method: string | undefined, url: string | undefined): ApiSpec | null {
  const path = (url ?? '').split('?')[0]!.replace(/\/+$/, '');
  return APIS.find((a) => a.method === method && a.path === path) ?? null;
}

/** an error body a client of `shape` understands */
export function errorBody(shape: 'openai' | 'anthropic', type: string, message: string): Record<string, unknown> {
  return shape === 'anthropic' ? { type: 'error', error: { type, message } } : { error: { message, type, code: type } };
}

/** GET /v1/models when the server names the episode's model: that one model */
export function modelList(model: string): Record<string, unknown> {
  return { object: 'list', data: [{ id: model, object: 'model', created: 0, owned_by: 'openenv' }] };
}

export function isStreamRequest(body: unknown): boolean {
  return isObject(body) && body.stream === true;
}
