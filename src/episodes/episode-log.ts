/**
 * The fields of an episode's log lines that take more than a line to say (pure): a tool call's
 * debug line and the line of its env's deploy (taken from the warm pool, or deployed for it).
 */
import type { Action } from '../protocol/frames.js';
import type { CallObservation, StepOutcome } from '../protocol/observations.js';
import { seconds3 } from '../util/time.js';

/** One debug line per tool call: which, how many argument bytes, how long, whether it failed. */
export function toolCallFields(action: Action & { type: 'call_tool' }, out: StepOutcome, ms: number, step: number): Record<string, unknown> {
  const obs = out.observation as Partial<CallObservation>;
  const args = action.arguments === undefined ? {} : action.arguments;
  let argBytes: number | null;
  try {
    argBytes = Buffer.byteLength(JSON.stringify(args) ?? '');
  } catch {
    argBytes = null; // nested too deep to serialise: refused as invalid_args anyway
  }
  const isError = obs.error != null || obs.result?.is_error === true;
  return {
    event: 'tool_call',
    tool: action.tool_name,
    arg_bytes: argBytes,
    ms,
    is_error: isError,
    ...(obs.error ? { error_type: obs.error.error_type } : {}),
    step,
    done: out.done,
  };
}

/** The deploy's line: how long it took, and for a pooled env its id and how long it waited in the pool. */
export function deployedLine(deployMs: number, pooled: { envId: string; waitedMs: number } | null): [Record<string, unknown>, string] {
  if (!pooled) return [{ event: 'deployed', deploy_s: seconds3(deployMs) }, 'env deployed'];
  return [
    { event: 'deployed', deploy_s: seconds3(deployMs), pooled: true, env_id: pooled.envId, pool_wait_s: seconds3(pooled.waitedMs) },
    'env taken from the warm pool',
  ];
}
