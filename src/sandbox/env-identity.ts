/**
 * Env identity: which env answers a call. An env's address on its episode network is only a hint:
 * once the container is gone, another episode's env (on another server sharing the subnet pool),
 * or anything past the default route, may hold it. So each deploy gets a random secret, given to
 * the env as OPENENV_ENV_SECRET, and every exchange proves it, both ways, without sending it:
 *
 *   request:  x-openenv-nonce: <fresh random hex>
 *             x-openenv-auth:  hex(HMAC-SHA256(secret, "request:"  + nonce))
 *   response: x-openenv-proof: hex(HMAC-SHA256(secret, "response:" + nonce))
 *
 * A conforming env answers a request whose auth proves another secret with 421 Misdirected
 * Request, without acting on it, and adds the proof to the answer of every request proving its own.
 * (A request with no auth at all, from a person or a test calling the env directly, may be served
 * without a proof: servers always send one.) The
 * server checks every answer: a 421, a wrong proof, or no proof once the env has given one, means
 * another server answered, and the call fails as unreachable. Envs that never send a proof (they
 * predate this) keep working unchecked: the first answer with a proof opts the episode in.
 */
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';

export const ENV_SECRET_VAR = 'OPENENV_ENV_SECRET';
export const NONCE_HEADER = 'x-openenv-nonce';
export const AUTH_HEADER = 'x-openenv-auth';
export const PROOF_HEADER = 'x-openenv-proof';

export function newEnvSecret(): string {
  return randomBytes(32).toString('hex');
}

export function newNonce(): string {
  return randomBytes(16).toString('hex');
}

export function envProof(secret: string, nonce: string, direction: 'request' | 'response'): string {
  return createHmac('sha256', secret).update(`${direction}:${nonce}`).digest('hex');
}

/** constant-time comparison of a received proof with the expected one */
export function proofMatches(received: string, expected: string): boolean {
  const a = Buffer.from(received.trim().toLowerCase());
  const b = Buffer.from(expected);
  return a.length === b.length && timingSafeEqual(a, b);
}
