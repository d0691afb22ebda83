// generated from src/gridsim/env-server.ts by scripts/gridsim/build-env.ts — do not edit
/**
 * The GridSim env's HTTP server (PROTOCOL.md §6), node:http only so the env image needs no npm
 * package. One server serves one episode at a time; a new /reset replaces it.
 */
import { createServer } from 'node:http';
import { DataError } from './battery.mjs';
import { Episode } from './episode.mjs';
import { parseTaskData } from './task.mjs';
const MAX_BODY_BYTES = 1 << 20;
const LEVELS = { debug: 10, info: 20, warn: 30, error: 40, silent: 100 };
class HttpError extends Error {
    status;
    code;
    constructor(status, code, message) {
        super(message);
        this.status = status;
        this.code = code;
    }
}
function readJson(req) {
    return new Promise((resolve, reject) => {
        const chunks = [];
        let size = 0;
        req.on('data', (chunk) => {
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
            if (text.trim() === '')
                return resolve({});
            try {
                resolve(JSON.parse(text));
            }
            catch {
                reject(new HttpError(400, 'invalid_json', 'request body is not valid JSON'));
            }
        });
    });
}
function send(res, status, body) {
    const text = JSON.stringify(body);
    res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(text) });
    res.end(text);
}
function asObject(x, what) {
    if (typeof x !== 'object' || x === null || Array.isArray(x))
        throw new HttpError(400, 'invalid_request', `${what} must be a JSON object`);
    return x;
}
export function createEnvServer(options = {}) {
    const threshold = LEVELS[(options.logLevel ?? 'info')] ?? LEVELS.info;
    const write = options.write ?? ((line) => process.stdout.write(`${line}\n`));
    const log = (level, msg, extra = {}) => {
        if (LEVELS[level] >= threshold)
            write(JSON.stringify({ level, msg, ...extra }));
    };
    let episode = null;
    const route = async (req, res) => {
        const path = (req.url ?? '/').split('?')[0];
        const method = req.method ?? 'GET';
        if (path === '/health' && method === 'GET')
            return send(res, 200, { status: 'healthy' });
        if (path === '/state' && method === 'GET')
            return send(res, 200, episode ? episode.state() : { task_id: null, done: false });
        if (path === '/reset' && method === 'POST') {
            const body = asObject(await readJson(req), 'the reset body');
            const taskId = typeof body.task_id === 'string' ? body.task_id : '';
            const seed = typeof body.seed === 'number' && Number.isInteger(body.seed) ? body.seed : null;
            let task;
            try {
                task = parseTaskData(body.data);
            }
            catch (e) {
                if (e instanceof DataError)
                    throw new HttpError(400, 'invalid_data', `task ${taskId || '(no task_id)'}: ${e.message}`);
                throw e;
            }
            episode = new Episode(taskId, task, seed);
            log('info', 'reset', { task_id: taskId });
            return send(res, 200, {});
        }
        if (path === '/tools/call' && method === 'POST') {
            const body = asObject(await readJson(req), 'the tool call body');
            if (!episode)
                throw new HttpError(409, 'no_episode', 'no episode: POST /reset first');
            if (typeof body.name !== 'string')
                throw new HttpError(400, 'invalid_request', '"name" must be the tool name, a string');
            const reply = episode.call(body.name, body.arguments);
            log('debug', 'tool', { tool: body.name, is_error: reply.is_error, done: reply.done });
            if (reply.scores)
                log('info', 'submitted', { task_id: episode.taskId, scores: reply.scores });
            return send(res, 200, reply);
        }
        if (path === '/finish' && method === 'POST') {
            await readJson(req);
            if (!episode)
                throw new HttpError(409, 'no_episode', 'no episode: POST /reset first');
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
        route(req, res).catch((e) => {
            if (e instanceof HttpError) {
                log('warn', 'bad request', { code: e.code, message: e.message });
                if (!res.headersSent)
                    send(res, e.status, { error: e.code, message: e.message });
                return;
            }
            log('error', 'internal error', { message: e instanceof Error ? e.message : String(e) });
            if (!res.headersSent)
                send(res, 500, { error: 'internal', message: 'the env failed to handle the request' });
        });
    });
}
