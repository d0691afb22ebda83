/** The server pings; a peer that misses two pings is dropped and its episode torn down. */
import WebSocket from 'ws';
import { expect, it } from 'vitest';
import { describeDocker, waitFor } from '../support/docker.js';
import { suiteServer } from '../support/docker-server.js';

describeDocker('WebSocket pings', () => {
  const s = suiteServer({ pingInterval: 0.3 }, { checkLeftovers: false });

  function open(autoPong: boolean): Promise<WebSocket> {
    const ws = new WebSocket(`${s.url.replace('http', 'ws')}/ws`, { autoPong });
    return new Promise((resolve, reject) => {
      ws.once('open', () => resolve(ws));
      ws.once('error', reject);
    });
  }

  it('a peer that answers pings stays; one that misses two is dropped with its episode', async () => {
    const good = await open(true);
    const mute = await open(false);
    let pings = 0;
    mute.on('ping', () => pings++);
    const reply = new Promise((r) => mute.once('message', r));
    mute.send(JSON.stringify({ type: 'reset', data: { task_id: 'fx-echo-0' } }));
    await reply;
    const closed = new Promise<number>((r) => mute.once('close', (code) => r(code)));
    const code = await closed;
    expect(pings).toBeGreaterThanOrEqual(2);
    expect(code).toBe(1006); // terminated, no close frame
    await waitFor(() => s.app.openenv.manager.list().length === 0 && s.app.openenv.admission.activeCount === 0);
    expect(good.readyState).toBe(WebSocket.OPEN);
    good.close();
  });
});
