/**
 * Bearer-token auth (docs/protocol.md, Auth): every request and WebSocket upgrade but `GET /health`
 * carries `Authorization: Bearer <token>`, compared in constant time. A refused upgrade gets the
 * 401 before it is upgraded. Registered on the root (fastify-plugin), so it guards every route.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';

/**
 * The shortest bearer token the server takes: shorter ones are guessed, and a token of a few
 * characters would make the log redaction (logging.ts) blank out those characters in every word.
 */
export const MIN_TOKEN_CHARS = 16;

function digest(s: string): Buffer {
  return createHash('sha256').update(s, 'utf8').digest();
}

/** Constant-time whatever the lengths: both sides are hashed to 32 bytes first. */
export function tokenMatches(given: string, expected: string): boolean {
  return timingSafeEqual(digest(given), digest(expected));
}

/** Why a token cannot guard the server (too short to be secret), or null when it can. */
export function tokenProblem(token: string): string | null {
  const n = [...token].length;
  if (n >= MIN_TOKEN_CHARS) return null;
  return `the token is ${n} character${n === 1 ? '' : 's'} long: a token shorter than ${MIN_TOKEN_CHARS} characters is guessed (and the log redaction would blank its characters out of every word); make one with \`openssl rand -hex 32\``;
}

export function bearerOf(header: string | undefined): string | null {
  if (!header) return null;
  const m = /^Bearer\s+(.+)$/i.exec(header.trim());
  return m ? m[1]!.trim() : null;
}

export const OPEN_PATHS = new Set(['/health']);

/**
 * GET (and HEAD) without a token: /health, and the web console's page (`/`, which only redirects
 * a browser, and /web/...: static files that carry no data; the page sends the token itself).
 */
export function isOpenPath(method: string, path: string): boolean {
  if (method !== 'GET' && method !== 'HEAD') return false;
  return OPEN_PATHS.has(path) || path === '/' || path === '/web' || path.startsWith('/web/');
}

/**
 * A refused request's body is never read: the connection closes once the refusal is written
 * (keep-alive would read and discard all of it first, however large).
 */
export function closeUnreadBody(reply: FastifyReply): FastifyReply {
  const h = reply.request.headers;
  if ((h['content-length'] !== undefined && h['content-length'] !== '0') || h['transfer-encoding'] !== undefined) reply.header('connection', 'close');
  return reply;
}

export function unauthorized(reply: FastifyReply, message: string): FastifyReply {
  return closeUnreadBody(reply).code(401).header('www-authenticate', 'Bearer').send({ error: 'unauthorized', message });
}

/** What the `/t/<token>/` prefix of a request's path said (set by the URL rewriter, before routing). */
export const PATH_TOKEN = Symbol('openenv.pathToken');
type WithPathToken = IncomingMessage & { [PATH_TOKEN]?: 'ok' | 'bad' };

/**
 * `--token-in-path`: a fastify `rewriteUrl` that strips a `/t/<token>` prefix before routing (for
 * HTTP requests and WebSocket upgrades alike) and records whether the token matched. Requests
 * without the prefix are left as they are (the bearer header still works).
 */
export function pathTokenRewriter(token: string): (req: IncomingMessage) => string {
  return (req) => {
    const url = req.url ?? '/';
    if (!url.startsWith('/t/')) return url;
    const rest = url.slice(3);
    const end = rest.search(/[/?#]/);
    const encoded = end < 0 ? rest : rest.slice(0, end);
    let given: string;
    try {
      given = decodeURIComponent(encoded);
    } catch {
      given = encoded;
    }
    (req as WithPathToken)[PATH_TOKEN] = tokenMatches(given, token) ? 'ok' : 'bad';
    const tail = end < 0 ? '' : rest.slice(end);
    return tail.startsWith('/') ? tail : `/${tail}`;
  };
}

export interface AuthOptions {
  token: string | null;
  /**
   * Paths whose routes guard themselves, in their own protocol's terms (E2B's API key and
   * sandbox access tokens, src/routes/e2b-*.ts): this hook leaves them to it.
   */
  ownGuard?: (path: string) => boolean;
}

async function auth(app: FastifyInstance, { token, ownGuard }: AuthOptions): Promise<void> {
  if (!token) return;
  app.addHook('onRequest', async (req: FastifyRequest, reply: FastifyReply) => {
    const byPath = (req.raw as WithPathToken)[PATH_TOKEN];
    if (byPath === 'bad') return unauthorized(reply, 'the token in the path (/t/<token>/...) is wrong');
    if (byPath === 'ok') return;
    const path = req.url.split('?')[0]!;
    if (isOpenPath(req.method, path) || ownGuard?.(path)) return;
    const given = bearerOf(req.headers.authorization);
    if (given === null) {
      return unauthorized(reply, 'this server needs "Authorization: Bearer <token>" (the token is in the server\'s token environment variable)');
    }
    if (!tokenMatches(given, token)) {
      return unauthorized(reply, 'the bearer token is wrong');
    }
  });
}

export default fp(auth, { name: 'auth' });
