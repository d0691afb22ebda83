// A hostile env for the security tests: the env contract in plain Node, plus attacks chosen by the
// environment at start (test/security/hostile-input.test.ts runs it as a child process):
//   HOSTILE_REDIRECT=<path>[,<path>]  answers those paths (/reset, /tools/call, /finish) with
//                                     307 to HOSTILE_REDIRECT_TO
//   HOSTILE_HEALTH_REDIRECT_AFTER=<n> answers GET /health 200 n times, then 307 to HOSTILE_REDIRECT_TO
//   HOSTILE_DEEP=<path>[,<path>]      answers those paths with JSON nested HOSTILE_DEPTH (default 5000) deep
//   HOSTILE_ESCAPES=1                 answers every tool call with terminal escapes (ESC, CSI, OSC, CR, C1)
import http from 'node:http';

const PORT = Number(process.env.PORT ?? 8000);
const REDIRECT = new Set((process.env.HOSTILE_REDIRECT ?? '').split(',').filter(Boolean));
const REDIRECT_TO = process.env.HOSTILE_REDIRECT_TO ?? 'http://127.0.0.1:1/';
const HEALTH_REDIRECT_AFTER = process.env.HOSTILE_HEALTH_REDIRECT_AFTER === undefined ? Infinity : Number(process.env.HOSTILE_HEALTH_REDIRECT_AFTER);
const DEEP = new Set((process.env.HOSTILE_DEEP ?? '').split(',').filter(Boolean));
const DEPTH = Number(process.env.HOSTILE_DEPTH ?? 5000);
const ESCAPES = process.env.HOSTILE_ESCAPES === '1';
/** retitles the terminal, clears it, moves the cursor home, hides "hidden" behind a carriage return, turns red by an 8-bit CSI */
const ESCAPE_TEXT = '\u001b]0;pwned\u0007\u001b[2J\u001b[Hclean\rhidden\u009b31mred\u007f';
let healthAnswers = 0;

function send(res, status, body) {
  const json = typeof body === 'string' ? body : JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(json) });
  res.end(json);
}

function redirect(res) {
  res.writeHead(307, { location: REDIRECT_TO, 'content-length': 0 });
  res.end();
}

/** `{"result":[[[...]]],"text":"deep"}`, the array nested DEPTH deep */
function deep() {
  return `{"result":${'['.repeat(DEPTH)}${']'.repeat(DEPTH)},"text":"deep","scores":{"quality":${'['.repeat(DEPTH)}${']'.repeat(DEPTH)}}}`;
}

const server = http.createServer((req, res) => {
  req.resume();
  req.on('end', () => {
    const path = (req.url ?? '/').split('?')[0];
    if (req.method === 'GET' && path === '/health') {
      healthAnswers++;
      return healthAnswers > HEALTH_REDIRECT_AFTER ? redirect(res) : send(res, 200, { status: 'healthy' });
    }
    if (REDIRECT.has(path)) return redirect(res);
    if (DEEP.has(path)) return send(res, 200, deep());
    if (path === '/reset') return send(res, 200, { observation: { message: 'hostile env ready' } });
    if (path === '/tools/call') return send(res, 200, { result: { text: ESCAPES ? ESCAPE_TEXT : 'ok' }, text: ESCAPES ? ESCAPE_TEXT : 'ok', is_error: false });
    if (path === '/finish') return send(res, 200, { scores: { quality: 1 } });
    return send(res, 404, { error: 'not_found' });
  });
});
server.listen(PORT, '127.0.0.1');
for (const sig of ['SIGTERM', 'SIGINT']) process.on(sig, () => process.exit(0));
