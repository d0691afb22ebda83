/** 40 concurrent episodes on a stock engine (default address pools stop near 30 networks). */
import { execFileSync } from 'node:child_process';
import { expect, it } from 'vitest';
import { describeDocker, labelledResources, waitFor } from '../support/docker.js';
import { INSTANCE_LABEL, suiteServer } from '../support/docker-server.js';
import { WsClient } from '../../scripts/lib/ws-client.js';

describeDocker('40 concurrent episodes', () => {
  const s = suiteServer({ maxConcurrentEnvs: 40 });

  it('all 40 deploy into networks of their own at once and score', async () => {
    const clients = await Promise.all(Array.from({ length: 40 }, () => WsClient.open(s.url)));
    const resets = await Promise.all(clients.map((c, i) => c.reset({ split: 'train', index: i % 4 }, 300_000)));
    for (const r of resets) expect(r.type).toBe('observation');
    // every one is running at the same time, each on its own network
    expect(s.app.openenv.admission.activeCount).toBe(40);
    expect(s.app.openenv.sandbox.networksInUse()).toBe(40);
    // 40 env containers on 40 networks, one each (taken from the network stock or made at reset)
    const envs = labelledResources(`${INSTANCE_LABEL}=${s.instance}`).containers;
    expect(envs).toHaveLength(40);
    const nets = envs.map((id) =>
      Object.keys(JSON.parse(execFileSync('docker', ['inspect', '-f', '{{json .NetworkSettings.Networks}}', id], { encoding: 'utf8' }))),
    );
    for (const n of nets) expect(n).toHaveLength(1);
    expect(new Set(nets.flat()).size).toBe(40);
    // fx-echo-2 wants finish_now; the others end their one turn
    const ends = await Promise.all(clients.map((c, i) => (i % 4 === 2 ? c.call('finish_now', { score: 0.75 }) : c.call('end_turn', {}))));
    for (const e of ends) {
      expect(e.data.done).toBe(true);
      expect(typeof e.data.reward).toBe('number');
    }
    await Promise.all(clients.map((c) => c.close()));
    // a slot frees once its env container is removed; its network goes after, off the slot
    await waitFor(() => s.app.openenv.admission.activeCount === 0, 120_000);
    await waitFor(() => s.app.openenv.sandbox.networksInUse() === 0, 120_000, 'every episode network removed');
  }, 600_000);
});
