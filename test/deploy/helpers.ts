/**
 * What the deployment tests add to scripts/lib/ws-client.ts: GET over https with a trusted
 * self-signed CA, and one fixture episode played to its end.
 */
import https from 'node:https';
import type { WsClient } from '../../scripts/lib/ws-client.js';

/** GET over http(s) with an optional trusted CA; the body as text */
export function get(
  url: string,
  o: { token?: string; ca?: string | Buffer } = {},
): Promise<{ status: number; headers: Record<string, unknown>; body: string }> {
  const headers: Record<string, string> = o.token ? { authorization: `Bearer ${o.token}` } : {};
  if (url.startsWith('http://')) {
    return fetch(url, { headers, signal: AbortSignal.timeout(30_000) }).then(async (r) => ({
      status: r.status,
      headers: Object.fromEntries(r.headers),
      body: await r.text(),
    }));
  }
  return new Promise((resolve, reject) => {
    const req = https.get(url, { headers, ca: o.ca, timeout: 30_000 }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error(`GET ${url} timed out`)));
    req.on('error', reject);
  });
}

/** plays the fixture's fx-echo-0 to its end: reset, echo, end_turn; returns the frames */
export async function playEchoEpisode(c: WsClient, taskId = 'fx-echo-0'): Promise<{ reset: any; echo: any; end: any }> {
  const reset = await c.reset({ task_id: taskId });
  const echo = await c.call('echo', { text: 'hello' });
  const end = await c.call('end_turn', { answer: 'hello' });
  return { reset, echo, end };
}
