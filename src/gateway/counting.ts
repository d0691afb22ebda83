/**
 * What a forwarded call counts against its episode's token budget: the usage its upstream
 * reported for the whole call, else an estimate from the bytes the call sent and received (at
 * GATEWAY.estimatedTokensPerByte, a bound for any tokenizer's text), never less than what was
 * reported so far, and, for a reply its harness abandoned that never ended, never less than the
 * reply could have been. A 4xx of the upstream counts what it reports (nothing: the model did not
 * run).
 */
import { GATEWAY } from '../defaults.js';
import type { Usage } from './reassembly.js';

export interface Counted {
  usage: Usage | null;
  estimated: boolean;
}

export interface CallTraffic {
  /** the usage the upstream reported (perhaps only so far) */
  reported: Usage | null;
  /** `reported` is the whole call's: the reply ended, or its API's last usage came */
  final: boolean;
  upstreamStatus: number | null;
  /** bytes of the request sent upstream */
  sent: number;
  /** bytes of the reply received from the upstream (the harness got these, or would have) */
  received: number;
  /** reply tokens the upstream may have made that never came back (a reply cut before its end) */
  unseen: number;
}

/** tokens at most in `bytes` bytes of text */
export function tokensOfBytes(bytes: number): number {
  return Math.ceil(bytes * GATEWAY.estimatedTokensPerByte);
}

export function countCall(t: CallTraffic): Counted {
  const s = t.upstreamStatus;
  if (s !== null && s >= 400 && s < 500) return { usage: t.reported, estimated: false };
  if (t.reported && t.final) return { usage: t.reported, estimated: false };
  const input = Math.max(tokensOfBytes(t.sent), t.reported?.input_tokens ?? 0);
  const output = Math.max(tokensOfBytes(t.received), t.unseen, t.reported?.output_tokens ?? 0);
  return { usage: { input_tokens: input, output_tokens: output, total_tokens: input + output }, estimated: true };
}
