/** A transcript's call time is the server's measure of the call: a tool that sleeps 0.2 s shows at least 200 ms, within the client's round trip. */
import { expect, it } from 'vitest';
import { processSuiteServer } from '../support/process-server.js';
import { WsClient } from '../../scripts/lib/ws-client.js';

const s = processSuiteServer({ maxConcurrentEnvs: 1 });

it('records how long each call took', async () => {
  const c = await WsClient.open(s.url);
  const reset = await c.reset({ task_id: 'fx-echo-0' });
  const id = reset.data.observation.episode_id as string;
  const sent = Date.now();
  await c.call('sleep', { seconds: 0.2 });
  const roundTrip = Date.now() - sent;
  await c.call('echo', { text: 'quick' });
  const t = s.app.openenv.history.transcript(id)!;
  const [slept] = t.events.filter((e) => e.kind === 'tool_call') as { ms: number }[];
  expect(slept!.ms).toBeGreaterThanOrEqual(200);
  expect(slept!.ms).toBeLessThanOrEqual(roundTrip);
  await c.close();
});
