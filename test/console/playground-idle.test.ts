/**
 * An episode started from the console's playground (POST /console/playground) is bounded more
 * tightly than --idle-timeout: a closed tab cannot say it left. The idle clocks run on fake
 * timers here, so the bound is proven without waiting for it.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { CONSOLE_EPISODE_IDLE_S } from '../../src/defaults.js';
import { http } from '../routes/http.js';
import { startProcessServer } from '../support/process-server.js';

afterEach(() => {
  vi.useRealTimers();
});

describe('POST /console/playground', () => {
  it(`starts an /episodes episode whose idle bound is ${CONSOLE_EPISODE_IDLE_S} s, while one from POST /episodes keeps --idle-timeout`, async () => {
    const s = await startProcessServer({ idleTimeout: 1800, maxConcurrentEnvs: 2 });
    try {
      const console_ = await http(s.url, 'POST', '/console/playground', { task_id: 'fx-echo-0' });
      expect(console_.status).toBe(201);
      const plain = await http(s.url, 'POST', '/episodes', { task_id: 'fx-echo-1' });
      expect(plain.status).toBe(201);
      const mine = console_.body.episode_id as string;
      const other = plain.body.episode_id as string;
      // the console's episode plays over /episodes like any other
      const step = await http(s.url, 'POST', `/episodes/${mine}/step`, { type: 'call_tool', tool_name: 'echo', arguments: { text: 'hi' } });
      expect(step.status).toBe(200);

      vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
      // a read shows each client is there: both clocks start again, on the fake timers
      expect((await http(s.url, 'GET', `/episodes/${mine}`)).status).toBe(200);
      expect((await http(s.url, 'GET', `/episodes/${other}`)).status).toBe(200);
      vi.advanceTimersByTime(CONSOLE_EPISODE_IDLE_S * 1000 - 1000);
      expect(s.app.openenv.manager.get(mine)?.phase).toBe('running');
      vi.advanceTimersByTime(2000);
      vi.useRealTimers();
      await expect.poll(() => s.app.openenv.manager.get(mine), { timeout: 10_000 }).toBeUndefined();
      expect(s.app.openenv.manager.get(other)?.phase).toBe('running');
    } finally {
      vi.useRealTimers();
      await s.stop();
    }
  });

  it('refuses bad reset data with 400 and an unknown task with 404, as POST /episodes does', async () => {
    const s = await startProcessServer();
    try {
      expect((await http(s.url, 'POST', '/console/playground', { task_id: 7 })).status).toBe(400);
      const missing = await http(s.url, 'POST', '/console/playground', { task_id: 'no-such-task' });
      expect(missing.status).toBe(404);
      expect(s.app.openenv.admission.activeCount).toBe(0);
    } finally {
      await s.stop();
    }
  });
});
