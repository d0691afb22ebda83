/**
 * The model APIs a harness calls through the gateway, declared once: the path a harness uses, the
 * path on the upstream (relative to its base URL), how an error is shaped for that API's clients,
 * where a reply says its usage, and how its stream is put back together.
 */
import type { ModelApi } from '../protocol/model.js';
import { isObject } from './bounded-json.js';
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
  /**
   * The request as it goes upstream: the episode's model (when the server names one) replaces the
   * harness's; an OpenAI chat stream asks for its usage (the token budget and the record need it).
   */
  prepare(body: Record<string, unknown>, model: string | undefined): Record<string, unknown>;
}

function withModel(body: Record<string, unknown>, model: string | undefined): Record<string, unknown> {
  return model === undefined ? body : { ...body, model };
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
    prepare(body, model) {
      const out = withModel(body, model);
      // a client that said nothing about stream_options gets the usage chunk; one that did is obeyed
      if (out.stream === true && out.stream_options === undefined) out.stream_options = { include_usage: true };
      return out;
    },
  },
  {
    name: 'openai.responses',
    method: 'POST',
    path: '/v1/responses',
    upstreamPath: '/responses',
    errors: 'openai',
    usage: openaiResponsesUsage,
    reassembler: () => new OpenAIResponsesReassembler(),
    prepare: withModel,
  },
  {
    name: 'anthropic.messages',
    method: 'POST',
    path: '/v1/messages',
    upstreamPath: '/messages',
    errors: 'anthropic',
    usage: anthropicMessageUsage,
    reassembler: () => new AnthropicMessagesReassembler(),
    prepare: withModel,
  },
  {
    name: 'openai.models',
    method: 'GET',
    path: '/v1/models',
    upstreamPath: '/models',
    errors: 'openai',
    usage: () => null,
    reassembler: () => new OpenAIChatReassembler(),
    prepare: (body) => body,
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
