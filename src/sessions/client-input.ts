/**
 * What a client sent, parsed once for every transport: a /ws text frame, reset data (a /ws reset,
 * OpenEnv's `openenv/session/create`, a standard session's query). Anything malformed is a
 * BadInputError with OpenEnv's code; the shapes themselves are src/protocol/frames.ts's.
 */
import { BadInputError } from '../errors.js';
import { isPlainObject } from '../util/json.js';
import { ActionSchema, CLIENT_FRAME_DATA, ResetDataSchema, type ClientFrame, type ResetData } from '../protocol/frames.js';
import { describeZod } from '../protocol/zod-issues.js';

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
  const data = Object.hasOwn(CLIENT_FRAME_DATA, type) ? CLIENT_FRAME_DATA[type as ClientFrame['type']] : undefined;
  if (!data) {
    throw new BadInputError('UNKNOWN_TYPE', `unknown frame type "${type}"; expected one of reset, step, state, close, mcp`);
  }
  const extra = Object.keys(raw).filter((k) => k !== 'type' && (k !== 'data' || data === 'none'));
  if (extra.length > 0) {
    throw new BadInputError('VALIDATION_ERROR', `unexpected key(s) ${extra.map((k) => `"${k}"`).join(', ')} in a "${type}" frame`);
  }
  if (type === 'state' || type === 'close') return { type };
  if (type === 'mcp') {
    if (!('data' in raw)) throw new BadInputError('VALIDATION_ERROR', 'an "mcp" frame needs "data" (a JSON-RPC request)');
    return { type, data: raw.data };
  }
  if (type === 'reset') {
    const given = raw.data ?? {};
    if (!isPlainObject(given)) throw new BadInputError('VALIDATION_ERROR', 'reset "data" must be an object');
    const parsed = ResetDataSchema.safeParse(given);
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

/** Reset data that did not come in a /ws frame: an `openenv/session/create`'s params, a standard session's query. */
export function parseResetData(body: unknown): ResetData {
  const data = body ?? {};
  if (!isPlainObject(data)) throw new BadInputError('VALIDATION_ERROR', 'the reset body must be a JSON object');
  const parsed = ResetDataSchema.safeParse(data);
  if (!parsed.success) throw new BadInputError('VALIDATION_ERROR', describeZod(parsed.error, 'body'));
  return parsed.data;
}
