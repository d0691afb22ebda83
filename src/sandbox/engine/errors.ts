/**
 * The one place that turns what dockerode throws into SandboxErrors. dockerode rejects with an
 * Error carrying `statusCode` and the engine's `json.message`; socket failures carry `code`.
 */
import { SandboxError } from '../sandbox.js';

interface EngineErrorShape {
  statusCode?: number;
  json?: unknown;
  code?: string;
  message?: string;
}

export function statusOf(err: unknown): number | undefined {
  return typeof err === 'object' && err !== null ? (err as EngineErrorShape).statusCode : undefined;
}

/** the engine's own words, without dockerode's "(HTTP code 404) no such container -" prefix */
export function engineMessage(err: unknown): string {
  if (typeof err !== 'object' || err === null) return String(err);
  const e = err as EngineErrorShape;
  const json = e.json;
  if (typeof json === 'object' && json !== null && typeof (json as { message?: unknown }).message === 'string') {
    return (json as { message: string }).message;
  }
  if (Buffer.isBuffer(json) && json.length > 0) return json.toString('utf8').trim();
  return (e.message ?? String(err)).trim();
}

export function isNotFound(err: unknown): boolean {
  return statusOf(err) === 404;
}

/** 409 on removal: the engine is already removing it */
export function isConflict(err: unknown): boolean {
  return statusOf(err) === 409;
}

/** runs a removal; "not found" (and what `alsoDone` accepts) means it is gone already, which is what was wanted */
export async function removeOrGone(remove: () => Promise<unknown>, alsoDone: (err: unknown) => boolean = () => false): Promise<void> {
  try {
    await remove();
  } catch (err) {
    if (isNotFound(err) || alsoDone(err)) return;
    throw err;
  }
}

export function isPoolOverlap(err: unknown): boolean {
  return /pool overlaps/i.test(engineMessage(err));
}

export { abortError, isAbortError, throwIfAborted } from '../../util/abort.js';

const UNREACHABLE = new Set(['ECONNREFUSED', 'ENOENT', 'EACCES', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'EHOSTUNREACH']);

/** `doing` says what we were doing, e.g. "creating the container of env `echo`" */
export function toSandboxError(err: unknown, doing: string): SandboxError {
  if (err instanceof SandboxError) return err;
  const code = typeof err === 'object' && err !== null ? (err as EngineErrorShape).code : undefined;
  if (code !== undefined && UNREACHABLE.has(code)) {
    return new SandboxError('engine_failed', `the Docker engine is unreachable (${code}) while ${doing}: is it running, and is its socket mounted?`);
  }
  const status = statusOf(err);
  const msg = engineMessage(err);
  if (status === 404 && /no such image|pull access denied|repository does not exist/i.test(msg)) {
    return new SandboxError('no_image', `the Docker engine has no image for ${doing}: ${msg}`);
  }
  return new SandboxError('engine_failed', `the Docker engine failed ${doing}${status ? ` (HTTP ${status})` : ''}: ${msg}`);
}
