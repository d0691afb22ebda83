/**
 * A transcript's bound: what the history keeps of each event, and how many bytes a transcript
 * holds, counted exactly as the JSON the console, the download and --record write. A payload past
 * the bound is replaced by a truncation mark (protocol/console.ts) saying its original size.
 */
import { TRANSCRIPT_BOUNDS } from '../defaults.js';
import { jsonBytes } from '../util/json.js';
import type { Transcript, TranscriptEvent, TruncationMark } from './console.js';

export interface TranscriptBounds {
  /** a payload field of more JSON bytes than this is replaced by a mark */
  fieldBytes: number;
  /** a transcript's JSON bytes past which every payload is a mark */
  transcriptBytes: number;
  /** characters of the original JSON a mark keeps */
  headChars: number;
}

/** the fields of each event that carry what the env or the model said */
const PAYLOAD_FIELDS: Record<TranscriptEvent['kind'], readonly string[]> = {
  reset: ['messages'],
  tool_call: ['arguments', 'result', 'error'],
  list_tools: [],
  model_call: ['request', 'response'],
  verifier: ['output'],
  harness: ['output'],
  end: ['scores', 'failure'],
};

function mark(text: string | null, bytes: number | null, headChars: number): TruncationMark {
  return {
    truncated: true,
    original_bytes: bytes,
    head: text === null ? '' : text.slice(0, headChars),
  };
}

/**
 * The event as the history keeps it (a copy when a field was cut; the original is not touched, so
 * the observation the model gets stays whole) and its exact JSON size. `used`: the JSON bytes the
 * transcript holds already.
 */
export function boundEvent(ev: TranscriptEvent, used: number, bounds: TranscriptBounds = TRANSCRIPT_BOUNDS): { event: TranscriptEvent; bytes: number } {
  const full = used >= bounds.transcriptBytes;
  let out: Record<string, unknown> | null = null;
  for (const field of PAYLOAD_FIELDS[ev.kind]) {
    const value = (ev as Record<string, unknown>)[field];
    if (value === null || value === undefined) continue;
    let text: string | null;
    try {
      text = JSON.stringify(value) ?? null;
    } catch {
      // a value with no JSON (too large for a string, a cycle): kept as a mark that says so
      text = null;
    }
    const bytes = text === null ? null : Buffer.byteLength(text, 'utf8');
    if (bytes !== null && bytes <= bounds.fieldBytes && !full) continue;
    out ??= { ...ev };
    out[field] = mark(text, bytes, full ? 0 : bounds.headChars);
  }
  const event = (out ?? ev) as TranscriptEvent;
  const bytes = jsonBytes(event)!;
  if (!full && used + bytes > bounds.transcriptBytes && PAYLOAD_FIELDS[ev.kind].length > 0) {
    // this event takes the transcript past its bound: it is kept as marks too
    return boundEvent(ev, bounds.transcriptBytes, bounds);
  }
  return { event, bytes };
}

/**
 * The transcript's JSON bytes from its header and its events' sizes (as boundEvent counted them),
 * without writing it out again: what the history's byte bound adds up.
 */
export function transcriptBytes(t: Transcript, eventBytes: number): number {
  const header = jsonBytes({ ...t, events: [] })!;
  const commas = Math.max(0, t.events.length - 1);
  return header + eventBytes + commas;
}
