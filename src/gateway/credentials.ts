/**
 * An episode's credential: 32 random bytes, given to the env as its API key, compared in constant
 * time (both sides hashed to the same length first, so neither the content nor the length of a
 * wrong key changes how long the comparison takes). Harnesses send it the way their SDK does:
 * `Authorization: Bearer <key>` (OpenAI, Anthropic's auth-token form) or `x-api-key: <key>`.
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';

const PREFIX = 'oeg-';

export function newCredential(): string {
  return PREFIX + randomBytes(32).toString('base64url');
}

const digest = (s: string): Buffer => createHash('sha256').update(s, 'utf8').digest();

export class Credential {
  private readonly expected: Buffer;
  constructor(readonly value: string) {
    this.expected = digest(value);
  }

  /** the first presented key that is not this credential (a harness's own key, to go upstream), or null */
  otherThan(presented: readonly string[]): string | null {
    for (const p of presented) if (!timingSafeEqual(digest(p), this.expected)) return p;
    return null;
  }

  /** true when any of the presented keys is this credential */
  acceptsAny(presented: readonly string[]): boolean {
    let ok = false;
    // every presented key is compared, so which one matched does not show in the time taken
    for (const p of presented) ok = timingSafeEqual(digest(p), this.expected) || ok;
    return ok;
  }
}

/** the keys a request presents: the bearer token and the x-api-key header, when given */
export function presentedKeys(headers: IncomingHttpHeaders): string[] {
  const out: string[] = [];
  const auth = headers.authorization;
  if (typeof auth === 'string') {
    const m = /^Bearer\s+(\S+)\s*$/i.exec(auth);
    if (m?.[1]) out.push(m[1]);
  }
  const key = headers['x-api-key'];
  if (typeof key === 'string' && key !== '') out.push(key);
  return out;
}
