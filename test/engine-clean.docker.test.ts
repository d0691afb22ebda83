/** Runs last (see vitest.config.ts): the suite must leave no container, network or volume (an instance lock) behind. */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { expect, it } from 'vitest';
import { describeDocker } from './support/docker.js';
import { SNAPSHOT_FILE } from './support/docker-global-setup.js';

function ids(args: string[]): string[] {
  return execFileSync('docker', args, { encoding: 'utf8' })
    .split('\n')
    .map((s) => s.trim())
    .filter(Boolean);
}

describeDocker('the engine after the whole suite', () => {
  it('holds no container, network or volume that was not there before the suite', async () => {
    const before = JSON.parse(readFileSync(SNAPSHOT_FILE, 'utf8')) as { containers: string[]; networks: string[]; volumes: string[] };
    // Teardowns started by the last tests may still be finishing: give them a moment.
    let extra: { containers: string[]; networks: string[]; volumes: string[] } = { containers: [], networks: [], volumes: [] };
    for (let i = 0; i < 30; i++) {
      extra = {
        containers: ids(['ps', '-aq', '--no-trunc']).filter((id) => !before.containers.includes(id)),
        networks: ids(['network', 'ls', '-q', '--no-trunc']).filter((id) => !before.networks.includes(id)),
        volumes: ids(['volume', 'ls', '-q']).filter((id) => !before.volumes.includes(id)),
      };
      if (extra.containers.length === 0 && extra.networks.length === 0 && extra.volumes.length === 0) break;
      await new Promise((r) => setTimeout(r, 1000));
    }
    expect(extra).toEqual({ containers: [], networks: [], volumes: [] });
  });
});
