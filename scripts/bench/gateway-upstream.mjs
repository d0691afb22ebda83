// The model upstream of the bench's gateway phase (scripts/bench/gateway.ts), in a process of its own (so its work does not share the
// measured event loop): a chat completion of about 500 bytes, or the same text streamed as
// STREAM_CHUNKS events written back to back. Prints its port on stdout once listening.
import { createServer } from 'node:http';

const CHUNKS = Number(process.env.STREAM_CHUNKS ?? 64);
const text = 'The quick brown fox jumps over the lazy dog. '.repeat(8);
const whole = JSON.stringify({
  id: 'c',
  object: 'chat.completion',
  created: 0,
  model: 'bench',
  choices: [{ index: 0, message: { role: 'assistant', content: text }, finish_reason: 'stop' }],
  usage: { prompt_tokens: 50, completion_tokens: 90, total_tokens: 140 },
});
const piece = Math.ceil(text.length / CHUNKS);
const events = [];
for (let i = 0; i < CHUNKS; i++)
  events.push(`data: ${JSON.stringify({ id: 'c', choices: [{ index: 0, delta: { content: text.slice(i * piece, (i + 1) * piece) } }] })}\n\n`);
events.push(
  `data: ${JSON.stringify({ id: 'c', choices: [], usage: { prompt_tokens: 50, completion_tokens: 90, total_tokens: 140 } })}\n\n`,
  'data: [DONE]\n\n',
);

const server = createServer((req, res) => {
  let body = '';
  req.on('data', (c) => (body += c));
  req.on('end', () => {
    if (!JSON.parse(body || '{}').stream)
      return void res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(whole) }).end(whole);
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    for (const e of events) res.write(e);
    res.end();
  });
});
server.keepAliveTimeout = 60_000;
server.listen(0, '127.0.0.1', () => process.stdout.write(`${server.address().port}\n`));
process.on('SIGTERM', () => process.exit(0));
