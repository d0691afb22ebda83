/**
 * What a call returned, for the record and the token budget: the usage of a reply, and a streamed
 * reply put back together into the shape the same call would have returned unstreamed (the text,
 * the tool calls, the stop reason, the usage), one reassembler per API's stream format.
 */
import type { ModelUsage } from '../protocol/model.js';
import { isObject } from './bounded-json.js';
import type { SseEvent } from './sse.js';

/** token counts in one shape, whatever the API called them */
export type Usage = ModelUsage;

export interface Reassembled {
  /** the reply as the unstreamed call would have returned it (as far as the stream said) */
  response: Record<string, unknown>;
  usage: Usage | null;
  /**
   * the usage is the whole call's, as its API reports it at the end (the chat usage chunk,
   * Anthropic's message_delta, the responses API's last event): a stream cut after it still
   * counts it; before it, the usage so far is not the whole call's
   */
  usageFinal: boolean;
  /** an error event the upstream sent inside the stream */
  streamError: string | null;
}

export interface StreamReassembler {
  event(e: SseEvent): void;
  result(): Reassembled;
}

const num = (v: unknown): number => (typeof v === 'number' && Number.isFinite(v) && v >= 0 ? v : 0);

function parseData(data: string): Record<string, unknown> | null {
  try {
    const v: unknown = JSON.parse(data);
    return isObject(v) ? v : null;
  } catch {
    return null;
  }
}

function errorText(v: unknown): string {
  if (isObject(v) && typeof v.message === 'string') return v.message;
  return typeof v === 'string' ? v : JSON.stringify(v);
}

/** the usage of an OpenAI reply, whose two APIs name the counts differently */
function openaiUsage(inputField: string, outputField: string): (body: unknown) => Usage | null {
  return (body) => {
    const u = isObject(body) ? body.usage : undefined;
    if (!isObject(u)) return null;
    const input = num(u[inputField]);
    const output = num(u[outputField]);
    return { input_tokens: input, output_tokens: output, total_tokens: num(u.total_tokens) || input + output };
  };
}

/** OpenAI chat completions: usage.prompt_tokens / completion_tokens */
export const openaiChatUsage = openaiUsage('prompt_tokens', 'completion_tokens');
/** OpenAI responses: usage.input_tokens / output_tokens */
export const openaiResponsesUsage = openaiUsage('input_tokens', 'output_tokens');

/** Anthropic messages: input_tokens plus the cached ones, output_tokens */
export function anthropicUsage(u: unknown): Usage | null {
  if (!isObject(u)) return null;
  const input = num(u.input_tokens) + num(u.cache_creation_input_tokens) + num(u.cache_read_input_tokens);
  const output = num(u.output_tokens);
  return { input_tokens: input, output_tokens: output, total_tokens: input + output };
}

export function anthropicMessageUsage(body: unknown): Usage | null {
  return isObject(body) ? anthropicUsage(body.usage) : null;
}

/** the map's value at `key`, made first when there is none */
function entry<K, V>(map: Map<K, V>, key: K, make: () => V): V {
  let v = map.get(key);
  if (v === undefined) {
    v = make();
    map.set(key, v);
  }
  return v;
}

interface ChoiceSoFar {
  role: string;
  content: string;
  reasoning: string;
  toolCalls: Map<number, { id: string; type: string; name: string; arguments: string }>;
  finishReason: unknown;
}

/** OpenAI chat chunks (`data: {choices: [{delta}]}` … `data: [DONE]`) back into a chat.completion */
export class OpenAIChatReassembler implements StreamReassembler {
  private readonly head: Record<string, unknown> = {};
  private readonly choices = new Map<number, ChoiceSoFar>();
  private usage: Usage | null = null;
  private usageFinal = false;
  private error: string | null = null;

  event(e: SseEvent): void {
    if (e.data === '[DONE]') return;
    const chunk = parseData(e.data);
    if (!chunk) return;
    if (chunk.error !== undefined) this.error = errorText(chunk.error);
    for (const k of ['id', 'created', 'model', 'system_fingerprint']) if (chunk[k] !== undefined && this.head[k] === undefined) this.head[k] = chunk[k];
    if (isObject(chunk.usage)) {
      this.usage = openaiChatUsage(chunk);
      // the usage chunk has no choices; a server's running counts (vLLM's continuous_usage_stats) ride on chunks that do
      if (!Array.isArray(chunk.choices) || chunk.choices.length === 0) this.usageFinal = true;
    }
    if (!Array.isArray(chunk.choices)) return;
    for (const c of chunk.choices as unknown[]) {
      if (!isObject(c)) continue;
      const so = entry(this.choices, num(c.index), () => ({ role: 'assistant', content: '', reasoning: '', toolCalls: new Map(), finishReason: null }));
      if (c.finish_reason !== undefined && c.finish_reason !== null) so.finishReason = c.finish_reason;
      const d = c.delta;
      if (!isObject(d)) continue;
      if (typeof d.role === 'string') so.role = d.role;
      if (typeof d.content === 'string') so.content += d.content;
      if (typeof d.reasoning_content === 'string') so.reasoning += d.reasoning_content;
      if (!Array.isArray(d.tool_calls)) continue;
      for (const t of d.tool_calls as unknown[]) {
        if (!isObject(t)) continue;
        const call = entry(so.toolCalls, num(t.index), () => ({ id: '', type: 'function', name: '', arguments: '' }));
        if (typeof t.id === 'string') call.id = t.id;
        if (typeof t.type === 'string') call.type = t.type;
        const f = t.function;
        if (isObject(f)) {
          if (typeof f.name === 'string') call.name += f.name;
          if (typeof f.arguments === 'string') call.arguments += f.arguments;
        }
      }
    }
  }

  result(): Reassembled {
    const choices = [...this.choices.entries()]
      .sort(([a], [b]) => a - b)
      .map(([index, so]) => {
        const message: Record<string, unknown> = { role: so.role, content: so.content === '' && so.toolCalls.size > 0 ? null : so.content };
        if (so.reasoning !== '') message.reasoning_content = so.reasoning;
        if (so.toolCalls.size > 0) {
          message.tool_calls = [...so.toolCalls.entries()]
            .sort(([a], [b]) => a - b)
            .map(([, t]) => ({ id: t.id, type: t.type, function: { name: t.name, arguments: t.arguments } }));
        }
        return { index, message, finish_reason: so.finishReason };
      });
    const response: Record<string, unknown> = { ...this.head, object: 'chat.completion', choices };
    if (this.usage)
      response.usage = { prompt_tokens: this.usage.input_tokens, completion_tokens: this.usage.output_tokens, total_tokens: this.usage.total_tokens };
    return { response, usage: this.usage, usageFinal: this.usageFinal, streamError: this.error };
  }
}

/** Anthropic message events (message_start, content_block_*, message_delta) back into a message */
export class AnthropicMessagesReassembler implements StreamReassembler {
  private message: Record<string, unknown> = { type: 'message', role: 'assistant' };
  private readonly blocks = new Map<number, Record<string, unknown> & { partialJson?: string }>();
  private usageFields: Record<string, unknown> = {};
  private usageFinal = false;
  private error: string | null = null;

  event(e: SseEvent): void {
    const d = parseData(e.data);
    if (!d) return;
    switch (d.type) {
      case 'message_start':
        if (isObject(d.message)) {
          this.message = { ...d.message };
          if (isObject(d.message.usage)) this.usageFields = { ...d.message.usage };
        }
        break;
      case 'content_block_start':
        if (isObject(d.content_block)) this.blocks.set(num(d.index), { ...d.content_block });
        break;
      case 'content_block_delta': {
        const b = this.blocks.get(num(d.index));
        const delta = d.delta;
        if (!b || !isObject(delta)) break;
        if (delta.type === 'text_delta' && typeof delta.text === 'string') b.text = String(b.text ?? '') + delta.text;
        else if (delta.type === 'thinking_delta' && typeof delta.thinking === 'string') b.thinking = String(b.thinking ?? '') + delta.thinking;
        else if (delta.type === 'signature_delta' && typeof delta.signature === 'string') b.signature = delta.signature;
        else if (delta.type === 'input_json_delta' && typeof delta.partial_json === 'string') b.partialJson = (b.partialJson ?? '') + delta.partial_json;
        break;
      }
      case 'message_delta':
        if (isObject(d.delta)) for (const k of ['stop_reason', 'stop_sequence']) if (d.delta[k] !== undefined) this.message[k] = d.delta[k];
        // message_delta's usage counts are cumulative: they replace message_start's
        if (isObject(d.usage)) {
          this.usageFields = { ...this.usageFields, ...Object.fromEntries(Object.entries(d.usage).filter(([, v]) => v !== null)) };
          this.usageFinal = true;
        }
        break;
      case 'error':
        this.error = errorText(d.error);
        break;
    }
  }

  result(): Reassembled {
    const content = [...this.blocks.entries()]
      .sort(([a], [b]) => a - b)
      .map(([, b]) => {
        const { partialJson, ...block } = b;
        if (partialJson !== undefined) {
          try {
            block.input = partialJson === '' ? {} : (JSON.parse(partialJson) as unknown);
          } catch {
            block.input_json = partialJson; // what the model wrote, though not JSON
          }
        }
        return block;
      });
    const usage = anthropicUsage(this.usageFields);
    return {
      response: { ...this.message, content, usage: this.usageFields },
      usage: Object.keys(this.usageFields).length ? usage : null,
      usageFinal: this.usageFinal,
      streamError: this.error,
    };
  }
}

/** OpenAI responses events: the final response.completed (or .incomplete, .failed) carries the whole response */
export class OpenAIResponsesReassembler implements StreamReassembler {
  private final: Record<string, unknown> | null = null;
  private text = '';
  private error: string | null = null;

  event(e: SseEvent): void {
    const d = parseData(e.data);
    if (!d) return;
    const type = typeof d.type === 'string' ? d.type : e.event;
    if ((type === 'response.completed' || type === 'response.incomplete' || type === 'response.failed') && isObject(d.response)) this.final = d.response;
    else if (type === 'response.output_text.delta' && typeof d.delta === 'string') this.text += d.delta;
    else if (type === 'error') this.error = errorText(d.error ?? d);
    if (type === 'response.failed' && isObject(d.response) && d.response.error) this.error = errorText(d.response.error);
  }

  result(): Reassembled {
    const response = this.final ?? { object: 'response', status: 'incomplete', output_text: this.text };
    const usage = openaiResponsesUsage(response);
    return { response, usage, usageFinal: this.final !== null && usage !== null, streamError: this.error };
  }
}
