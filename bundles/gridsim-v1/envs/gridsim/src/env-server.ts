/**
 * The GridSim env's HTTP server (the env contract of docs/bundle-format.md), node:http only so the
 * env image needs no npm package. One server serves one episode at a time; a new /reset replaces
 * it. With the episode's secret it proves it is the episode's env on every answer.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { DataError } from './battery.js';
import { Episode } from './episode.js';
import { parseTaskData } from './task.js';

const MAX_BODY_BYTES = 1 << 20;
const LEVELS = { debug: 10, info: 20, warn: 30, error: 40, silent: 100 } as const;
type Level = keyof typeof LEVELS;

export interface EnvServerOptions {
  /** debug, info, warn, error or silent; default info */
  logLevel?: string;
  /** where log lines go; default stdout */
  write?: (line: string) => void;
  /** the episode's OPENENV_ENV_SECRET: requests that prove another secret get 421, ours get a proof */
  secret?: string;
}

/** 'none' (no proof asked), 'wrong' (another env's secret), or the nonce to prove ours with */
function identityOf(req: IncomingMessage, secret: string): 'none' | 'wrong' | { nonce: string } {
  const nonce = req.headers['x-openenv-nonce'];
  const auth = req.headers['x-openenv-auth'];
  if (nonce === undefined && auth === undefined) return 'none';
  if (typeof nonce !== 'string' || typeof auth !== 'string' || !nonce) return 'wrong';
  const got = Buffer.from(auth.toLowerCase());
  const want = Buffer.from(hmac(secret, 'request', nonce));
  return got.length === want.length && timingSafeEqual(got, want) ? { nonce } : 'wrong';
}

function hmac(secret: string, direction: 'request' | 'response', nonce: string): string {
  return createHmac('sha256', secret).update(`${direction}:${nonce}`).digest('hex');
}

class HttpError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

function readJson(req: IncomingMessage): Promise<unknown> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > MAX_BODY_BYTES) {
        reject(new HttpError(413, 'body_too_large', `request body over ${MAX_BODY_BYTES} bytes`));
        req.destroy();
        return;
      }
      chunks.push(chunk);
    });
    req.on('error', reject);
    req.on('end', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      if (text.trim() === '') return resolve({});
      try {
        resolve(JSON.parse(text));
      } catch {
        reject(new HttpError(400, 'invalid_json', 'request body is not valid JSON'));
      }
    });
  });
}

function send(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

function asObject(x: unknown, what: string): Record<string, unknown> {
  if (typeof x !== 'object' || x === null || Array.isArray(x)) throw new HttpError(400, 'invalid_request', `${what} must be a JSON object`);
  return x as Record<string, unknown>;
}

export function createEnvServer(options: EnvServerOptions = {}): Server {
  const threshold = LEVELS[(options.logLevel ?? 'info') as Level] ?? LEVELS.info;
  const write = options.write ?? ((line: string) => process.stdout.write(`${line}\n`));
  const log = (level: Exclude<Level, 'silent'>, msg: string, extra: Record<string, unknown> = {}) => {
    if (LEVELS[level] >= threshold) write(JSON.stringify({ level, msg, ...extra }));
  };
  let episode: Episode | null = null;

  const route = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const path = (req.url ?? '/').split('?')[0];
    const method = req.method ?? 'GET';
    if (path === '/health' && method === 'GET') return send(res, 200, { status: 'healthy' });
    if (path === '/state' && method === 'GET') return send(res, 200, episode ? episode.state() : { task_id: null, done: false });
    if (path === '/reset' && method === 'POST') {
      const body = asObject(await readJson(req), 'the reset body');
      const taskId = typeof body.task_id === 'string' ? body.task_id : '';
      const seed = typeof body.seed === 'number' && Number.isInteger(body.seed) ? body.seed : null;
      let task;
      try {
        task = parseTaskData(body.data);
      } catch (e) {
        if (e instanceof DataError) throw new HttpError(400, 'invalid_data', `task ${taskId || '(no task_id)'}: ${e.message}`);
        throw e;
      }
      episode = new Episode(taskId, task, seed);
      log('info', 'reset', { task_id: taskId });
      return send(res, 200, {});
    }
    if (path === '/tools/call' && method === 'POST') {
      const body = asObject(await readJson(req), 'the tool call body');
      if (!episode) throw new HttpError(409, 'no_episode', 'no episode: POST /reset first');
      if (typeof body.name !== 'string') throw new HttpError(400, 'invalid_request', '"name" must be the tool name, a string');
      const reply = episode.call(body.name, body.arguments);
      log('debug', 'tool', { tool: body.name, is_error: reply.is_error, done: reply.done });
      if (reply.scores) log('info', 'submitted', { task_id: episode.taskId, scores: reply.scores });
      return send(res, 200, reply);
    }
    if (path === '/finish' && method === 'POST') {
      await readJson(req);
      if (!episode) throw new HttpError(409, 'no_episode', 'no episode: POST /reset first');
      const out = episode.finish();
      log('info', 'finish', { task_id: episode.taskId, scores: out.scores });
      return send(res, 200, out);
    }
    if (['/health', '/state', '/reset', '/tools/call', '/finish'].includes(path ?? '')) {
      throw new HttpError(405, 'method_not_allowed', `${method} ${path} is not served`);
    }
    throw new HttpError(404, 'not_found', `no route ${method} ${path}`);
  };

  return createServer((req, res) => {
    if (options.secret) {
      const id = identityOf(req, options.secret);
      if (id === 'wrong')
        return send(res, 421, { error: 'misdirected', message: "this request proves another env's secret: it was meant for another episode" });
      if (id !== 'none') res.setHeader('x-openenv-proof', hmac(options.secret, 'response', id.nonce));
    }
    route(req, res).catch((e: unknown) => {
      if (e instanceof HttpError) {
        log('warn', 'bad request', { code: e.code, message: e.message });
        if (!res.headersSent) send(res, e.status, { error: e.code, message: e.message });
        return;
      }
      log('error', 'internal error', { message: e instanceof Error ? e.message : String(e) });
      if (!res.headersSent) send(res, 500, { error: 'internal', message: 'the env failed to handle the request' });
    });
  });
}
