// The env of this bundle: one episode per container, plain node:http, no npm packages.
// The server calls, in order: GET /health (until 200), POST /reset once, POST /tools/call per tool
// call, POST /finish at most once (after the last turn). Change TOOLS and scores() for your tasks.
import { createHmac, timingSafeEqual } from 'node:crypto';
import http from 'node:http';

const PORT = Number(process.env.PORT ?? 8000);
// Env identity: the server proves each request with this secret and expects a proof back, so an
// answer from another episode's env is never taken for this one's. Keep this part as it is.
const SECRET = process.env.OPENENV_ENV_SECRET || null;
delete process.env.OPENENV_ENV_SECRET;

/** this episode: set by /reset */
let episode = null; // { data, seed, hints, answer }

/** A tool's own error (bad arguments): the server passes it to the model as invalid_args. */
class InvalidArgs extends Error {}

const normalise = (s) => String(s).trim().toLowerCase();

// The tools: name -> (arguments) => the reply. Change these, and bundle.json's toolsets to match.
const TOOLS = {
  get_hint(args) {
    if (Object.keys(args).length > 0) throw new InvalidArgs('get_hint takes no arguments');
    episode.hints += 1;
    return { text: String(episode.data.hint ?? 'No hint for this one.') };
  },
  submit_answer(args) {
    const extra = Object.keys(args).filter((k) => k !== 'answer');
    if (extra.length > 0) throw new InvalidArgs(`unknown argument(s) ${extra.join(', ')}; submit_answer takes {"answer": string}`);
    if (typeof args.answer !== 'string') throw new InvalidArgs('"answer" must be a string');
    episode.answer = args.answer;
    return { text: `Submitted "${args.answer}".`, done: true, scores: scores() };
  },
};

/** The episode's scores: bundle.json declares each (its min, max and floor). */
function scores() {
  const correct = episode.answer !== null && normalise(episode.answer) === normalise(episode.data.answer) ? 1 : 0;
  return { correct };
}

function hmac(direction, nonce) {
  return createHmac('sha256', SECRET).update(`${direction}:${nonce}`).digest('hex');
}

/** 'none' (a person calling by hand), 'wrong' (meant for another env), else the proven nonce */
function identityOf(req) {
  const nonce = req.headers['x-openenv-nonce'];
  const auth = req.headers['x-openenv-auth'];
  if (nonce === undefined && auth === undefined) return 'none';
  if (typeof nonce !== 'string' || typeof auth !== 'string' || !nonce) return 'wrong';
  const got = Buffer.from(auth.toLowerCase());
  const want = Buffer.from(hmac('request', nonce));
  return got.length === want.length && timingSafeEqual(got, want) ? { nonce } : 'wrong';
}

function send(res, status, body) {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

function readJson(req) {
  return new Promise((resolve, reject) => {
    let text = '';
    req.setEncoding('utf8');
    req.on('data', (chunk) => (text += chunk));
    req.on('end', () => {
      try {
        resolve(text.trim() === '' ? {} : JSON.parse(text));
      } catch {
        reject(new InvalidArgs('the body is not JSON'));
      }
    });
    req.on('error', reject);
  });
}

async function route(req, res) {
  if (SECRET) {
    const id = identityOf(req);
    if (id === 'wrong') return send(res, 421, { error: 'misdirected', message: 'this request was meant for another env' });
    if (id !== 'none') res.setHeader('x-openenv-proof', hmac('response', id.nonce));
  }
  const key = `${req.method} ${(req.url ?? '/').split('?')[0]}`;
  if (key === 'GET /health') return send(res, 200, { status: 'healthy' });
  if (key === 'POST /reset') {
    const { data, seed } = await readJson(req);
    if (typeof data?.answer !== 'string') return send(res, 400, { error: 'invalid_data', message: 'data.answer must be a string' });
    // seed: use it for any randomness of yours, so that the same task and seed replay alike
    episode = { data, seed: seed ?? null, hints: 0, answer: null };
    return send(res, 200, {});
  }
  if (key === 'POST /tools/call') {
    if (!episode) return send(res, 409, { error: 'no_episode', message: 'POST /reset first' });
    const { name, arguments: args } = await readJson(req);
    const tool = Object.hasOwn(TOOLS, name) ? TOOLS[name] : undefined;
    if (!tool) return send(res, 404, { error: 'tool_not_found', message: `no tool "${name}"; the tools are ${Object.keys(TOOLS).join(', ')}` });
    try {
      return send(res, 200, tool(args ?? {}));
    } catch (err) {
      if (err instanceof InvalidArgs) return send(res, 400, { error: 'invalid_args', message: err.message });
      throw err;
    }
  }
  if (key === 'POST /finish') {
    if (!episode) return send(res, 409, { error: 'no_episode', message: 'POST /reset first' });
    return send(res, 200, { scores: scores() });
  }
  return send(res, 404, { error: 'not_found', message: `no route ${key}` });
}

http
  .createServer((req, res) => {
    route(req, res).catch((err) => send(res, err instanceof InvalidArgs ? 400 : 500, { error: 'internal', message: String(err?.message ?? err) }));
  })
  .listen(PORT, '0.0.0.0', () => console.log(`env listening on ${PORT}`));

// PID 1 in a container gets no default signal handling: exit on stop.
for (const sig of ['SIGTERM', 'SIGINT']) process.on(sig, () => process.exit(0));
