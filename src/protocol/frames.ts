/**
 * What clients send, as zod schemas (reset data, actions, /ws frames), the frames the server
 * answers on /ws, and the parsers every transport uses (docs/protocol.md).
 */
import { z } from 'zod';
import { isPlainObject } from '../bundle/schema.js';
import { BadInputError } from '../errors.js';
import type { RpcResponse } from './jsonrpc.js';
import type { EpisodeState, StepOutcome } from './observations.js';

/** Reset data: known fields are checked, unknown ones ignored (OpenEnv clients pass any kwargs). */
export const ResetDataSchema = z
  .object({
    task_id: z.string().min(1).max(255).optional(),
    split: z.string().min(1).optional(),
    index: z.number().int().min(0).optional(),
    seed: z.number().int().min(0).optional(),
    episode_id: z.string().max(255).optional().describe('a client label, logged'),
    reset_timeout_s: z.number().positive().finite().optional().describe('wait at most this long for a slot (capped by the server)'),
  })
  .passthrough()
  .describe('reset data: a task by task_id, or split + index; neither: the default split, by seed or at random. Unknown fields are ignored.');
export type ResetData = z.infer<typeof ResetDataSchema>;

/** `arguments` is any JSON here: a non-object is the model's error, answered in the observation. */
export const ActionSchema = z
  .discriminatedUnion('type', [
    z.object({ type: z.literal('list_tools') }).passthrough(),
    z
      .object({
        type: z.literal('call_tool'),
        tool_name: z.string().min(1, 'tool_name must be a non-empty string'),
        arguments: z.unknown().optional().describe("the tool's parameters, a JSON object; anything else is answered with error_type invalid_args"),
      })
      .passthrough(),
  ])
  .describe('a step: list_tools, or call_tool (end_turn included)');
export type Action = z.infer<typeof ActionSchema>;

export type ClientFrame =
  { type: 'reset'; data: ResetData } | { type: 'step'; data: Action } | { type: 'state' } | { type: 'close' } | { type: 'mcp'; data: unknown };

/** Frames the server sends on /ws: exactly one per client frame. */
export type ServerFrame =
  | { type: 'observation'; data: StepOutcome }
  | { type: 'state'; data: EpisodeState }
  | { type: 'error'; data: { code: string; message: string; [detail: string]: unknown } }
  | { type: 'mcp'; data: RpcResponse };

const FRAME_KEYS: Record<ClientFrame['type'], { data: 'required' | 'optional' | 'none' }> = {
  reset: { data: 'optional' },
  step: { data: 'required' },
  state: { data: 'none' },
  close: { data: 'none' },
  mcp: { data: 'required' },
};

export function describeZod(err: z.ZodError, prefix: string): string {
  return err.issues
    .map((i) => {
      const where = [prefix, ...i.path.map(String)].filter(Boolean).join('.');
      return `${where}: ${i.message}`;
    })
    .join('; ');
}

/** Parses one text frame; throws BadInputError with OpenEnv's code on anything malformed. */
export function parseClientFrame(text: string): ClientFrame {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (e) {
    throw new BadInputError('INVALID_JSON', `frame is not valid JSON: ${(e as Error).message}`);
  }
  if (!isPlainObject(raw)) {
    throw new BadInputError('VALIDATION_ERROR', 'a frame must be a JSON object like {"type":"reset","data":{...}}');
  }
  const type = raw.type;
  if (typeof type !== 'string') {
    throw new BadInputError('VALIDATION_ERROR', 'the frame has no string "type" (one of reset, step, state, close)');
  }
  // own keys only: "constructor" or "__proto__" is no frame type
  const shape = Object.hasOwn(FRAME_KEYS, type) ? FRAME_KEYS[type as ClientFrame['type']] : undefined;
  if (!shape) {
    throw new BadInputError('UNKNOWN_TYPE', `unknown frame type "${type}"; expected one of reset, step, state, close, mcp`);
  }
  const extra = Object.keys(raw).filter((k) => k !== 'type' && (k !== 'data' || shape.data === 'none'));
  if (extra.length > 0) {
    throw new BadInputError('VALIDATION_ERROR', `unexpected key(s) ${extra.map((k) => `"${k}"`).join(', ')} in a "${type}" frame`);
  }
  if (type === 'state' || type === 'close') return { type };
  if (type === 'mcp') {
    if (!('data' in raw)) throw new BadInputError('VALIDATION_ERROR', 'an "mcp" frame needs "data" (a JSON-RPC request)');
    return { type, data: raw.data };
  }
  if (type === 'reset') {
    const data = raw.data ?? {};
    if (!isPlainObject(data)) throw new BadInputError('VALIDATION_ERROR', 'reset "data" must be an object');
    const parsed = ResetDataSchema.safeParse(data);
    if (!parsed.success) throw new BadInputError('VALIDATION_ERROR', describeZod(parsed.error, 'data'));
    return { type, data: parsed.data };
  }
  // step
  if (!isPlainObject(raw.data)) {
    throw new BadInputError('VALIDATION_ERROR', 'step "data" must be an action object like {"type":"call_tool","tool_name":...,"arguments":{...}}');
  }
  const parsed = ActionSchema.safeParse(raw.data);
  if (!parsed.success) throw new BadInputError('VALIDATION_ERROR', describeZod(parsed.error, 'data'));
  return { type: 'step', data: parsed.data };
}

export function parseResetData(body: unknown): ResetData {
  const data = body ?? {};
  if (!isPlainObject(data)) throw new BadInputError('VALIDATION_ERROR', 'the reset body must be a JSON object');
  const parsed = ResetDataSchema.safeParse(data);
  if (!parsed.success) throw new BadInputError('VALIDATION_ERROR', describeZod(parsed.error, 'body'));
  return parsed.data;
}

export function parseAction(body: unknown): Action {
  if (!isPlainObject(body)) {
    throw new BadInputError('VALIDATION_ERROR', 'an action must be a JSON object like {"type":"call_tool","tool_name":...,"arguments":{...}}');
  }
  const parsed = ActionSchema.safeParse(body);
  if (!parsed.success) throw new BadInputError('VALIDATION_ERROR', describeZod(parsed.error, 'action'));
  return parsed.data;
}

/**
 * Whether a parsed JSON value nests deeper than `max` arrays or objects. Iterative: a value nested
 * 100,000 deep (which JSON.parse accepts) must not overflow the stack that checks it.
 */
export function jsonDepthExceeds(value: unknown, max: number): boolean {
  const stack: { v: unknown; depth: number }[] = [{ v: value, depth: 0 }];
  while (stack.length > 0) {
    const { v, depth } = stack.pop()!;
    if (typeof v !== 'object' || v === null) continue;
    if (depth + 1 > max) return true;
    for (const child of Array.isArray(v) ? v : Object.values(v)) {
      if (typeof child === 'object' && child !== null) stack.push({ v: child, depth: depth + 1 });
    }
  }
  return false;
}
