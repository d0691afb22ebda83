/**
 * The web console's page: the single-page app Vite builds into dist/web, served at /web/ with
 * @fastify/static. Its files carry no data and load without a token (auth.ts lets GET /web/*
 * through); every data request the page makes sends the bearer token itself. `GET /` from a
 * browser (Accept: text/html) is sent to the page. Redirects are relative (`web/`), so they work
 * behind a TLS proxy under any prefix and with --token-in-path's /t/<token>/.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import fastifyStatic from '@fastify/static';
import type { FastifyInstance, FastifyReply } from 'fastify';
import { ErrorBodySchema, WebAssetParamsSchema } from '../protocol/http.js';

/** dist/web beside the compiled server (dist/routes/web.js), or from the sources (src/routes/web.ts) */
export function findWebRoot(): string | null {
  for (const rel of ['../web', '../../dist/web']) {
    const dir = fileURLToPath(new URL(rel, import.meta.url));
    if (existsSync(join(dir, 'index.html'))) return dir;
  }
  return null;
}

/** what the page may load and reach: itself only (no CDN, no third party) */
export const WEB_CSP = [
  "default-src 'self'",
  "script-src 'self'",
  "connect-src 'self'",
  "img-src 'self' data: blob:",
  // the page positions elements with style attributes
  "style-src 'self' 'unsafe-inline'",
  "frame-ancestors 'none'",
  "base-uri 'self'",
  "form-action 'none'",
].join('; ');

const html = { description: 'a redirect to the web console (Location: web/)' };

export async function webRoutes(app: FastifyInstance, opts: { root?: string | null } = {}): Promise<void> {
  const root = opts.root === undefined ? findWebRoot() : opts.root;

  app.get(
    '/',
    {
      schema: {
        summary: 'A browser (Accept: text/html) is redirected to the web console; others get 404 (no token needed)',
        response: { 302: html, 404: ErrorBodySchema },
      },
    },
    async (req, reply) => {
      if (/\btext\/html\b/.test(req.headers.accept ?? '')) return reply.redirect('web/', 302);
      return reply.code(404).send({ error: 'not_found', message: 'no route GET /: the API is described at /openapi.json, the web console is at /web/' });
    },
  );
  app.get('/web', { schema: { summary: 'Redirects to /web/ (no token needed)', response: { 302: html } } }, async (_req, reply) => reply.redirect('web/', 302));

  const page = {
    summary: "The web console's page (no token needed: it carries no data)",
    description: 'A single-page app; its data requests use the /console/* routes with the bearer token.',
  };
  const asset = {
    summary: "The web console's scripts and styles (no token needed)",
    params: WebAssetParamsSchema,
  };
  if (!root) {
    app.log.warn('the web console is not built (no dist/web/index.html): run `npm run build`; /web/ answers 503');
    const notBuilt = async (_req: unknown, reply: FastifyReply) =>
      reply.code(503).type('text/plain; charset=utf-8').send('The web console is not built: run `npm run build` (it writes dist/web).\n');
    app.get('/web/', { schema: page }, notBuilt);
    app.get('/web/assets/:file', { schema: asset }, notBuilt);
    return;
  }
  await app.register(fastifyStatic, { root, serve: false, cacheControl: false });
  const send = (reply: FastifyReply, file: string) => {
    reply.header('content-security-policy', WEB_CSP);
    reply.header('x-content-type-options', 'nosniff');
    reply.header('referrer-policy', 'no-referrer');
    // hashed asset names never change; the page itself is checked every time
    reply.header('cache-control', file.startsWith('assets/') ? 'public, max-age=31536000, immutable' : 'no-cache');
    return reply.sendFile(file);
  };
  app.get('/web/', { schema: page }, async (_req, reply) => send(reply, 'index.html'));
  app.get<{ Params: { file: string } }>('/web/assets/:file', { schema: asset }, async (req, reply) => send(reply, `assets/${req.params.file}`));
}
