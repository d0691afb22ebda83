/** The server pings; a peer that misses two pings is dropped and its episode torn down. */
import WebSocket from 'ws';
import { describe, expect, it } from 'vitest';
import { processSuiteServer } from '../support/process-server.js';
import { waitFor } from '../../scripts/lib/wait.js';

describe('WebSocket pings', () => {
  const s = processSuiteServer({ pingInterval: 0.3 });

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
    // listening from the start: the drop (two missed pings, 0.6 to 0.9 s) may come before or
    // after the reset's reply, which this test therefore does not wait for
    const closed = new Promise<number>((r) => mute.once('close', (code) => r(code)));
    mute.send(JSON.stringify({ type: 'reset', data: { task_id: 'fx-echo-0' } }));
    const code = await closed;
    // the third tick finds two pings unanswered and drops the peer instead of pinging again
    expect(pings).toBe(2);
    expect(code).toBe(1006); // terminated, no close frame
    await waitFor(
      () => s.app.openenv.manager.list().length === 0 && s.app.openenv.admission.activeCount === 0 && s.sandbox.held().length === 0,
      30_000,
      'the episode torn down',
    );
    expect(good.readyState).toBe(WebSocket.OPEN);
    const goodClosed = new Promise((r) => good.once('close', r));
    good.close();
    await goodClosed;
  });
});
