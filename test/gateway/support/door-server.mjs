// The gateway's side of the network tests, run the same way in both placements: as a process on
// the host, and as the process of a container attached to the episode networks (compose). It
// starts the built gateway (dist/gateway) with a door per episode on this namespace's own address
// in the episode's subnet, a scripted model upstream on 127.0.0.1, and stand-ins for the server's
// API port (bound where the test says, guarded by refuseEpisodeSources or not). Config comes in
// GATEWAY_TEST_CONFIG (JSON); it prints one JSON line when ready, then one per call record and
// end; it stops on SIGTERM, or when its stdin closes.
import { createServer } from 'node:http';
import { ModelGateway, ipv4Forwarding, refuseEpisodeSources, wildcardListenPorts } from '../../../dist/gateway/index.js';

const config = JSON.parse(process.env.GATEWAY_TEST_CONFIG ?? '{}');
const out = (obj) => process.stdout.write(JSON.stringify(obj) + '\n');

function listen(server, host, port = 0) {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve(server.address().port));
  });
}

// the model: "pong", whole or streamed in two pieces
const upstream = createServer((req, res) => {
  let body = '';
  req.on('data', (c) => (body += c));
  req.on('end', () => {
    if (req.url === '/v1/models') return void res.writeHead(200, { 'content-type': 'application/json' }).end('{"object":"list","data":[{"id":"pong-model"}]}');
    const parsed = JSON.parse(body || '{}');
    if (!parsed.stream) {
      const reply = {
        id: 'c',
        object: 'chat.completion',
        choices: [{ index: 0, message: { role: 'assistant', content: 'pong' }, finish_reason: 'stop' }],
        usage: { prompt_tokens: 3, completion_tokens: 1, total_tokens: 4 },
      };
      return void res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(reply));
    }
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    for (const piece of ['po', 'ng']) res.write(`data: ${JSON.stringify({ choices: [{ index: 0, delta: { content: piece } }] })}\n\n`);
    res.end('data: [DONE]\n\n');
  });
});
const upstreamPort = await listen(upstream, '127.0.0.1');

const gw = new ModelGateway({
  defaultUpstream: { base_url: `http://127.0.0.1:${upstreamPort}/v1`, headers: { authorization: 'Bearer upstream-only' }, model: 'pong-model' },
  limits: { port: config.port ?? 0 },
  observer: {
    call: (r) => out({ record: { episode_id: r.episode_id, api: r.api, status: r.status, outcome: r.outcome, refusal: r.refusal, stream: r.stream } }),
    ended: (episode, end) => out({ ended: { episode, ...end } }),
  },
});

const issued = {};
for (const ep of config.episodes ?? []) issued[ep.id] = await gw.issue(ep.id, { door: { subnet: ep.subnet, ...(ep.address ? { address: ep.address } : {}) } });

const apis = {};
for (const api of config.apis ?? []) {
  const server = createServer((_req, res) => res.writeHead(200, { 'content-type': 'text/plain' }).end('the server API answered'));
  if (api.guarded) refuseEpisodeSources(server, config.pool);
  apis[api.name] = { host: api.host, port: await listen(server, api.host) };
}

out({ ready: { issued, apis, ip_forward: ipv4Forwarding(), wildcard_ports: wildcardListenPorts() } });

const stop = async () => {
  await gw.close();
  process.exit(0);
};
process.on('SIGTERM', () => void stop());
if (config.stopOnStdinEnd) {
  process.stdin.on('end', () => void stop());
  process.stdin.resume();
}
