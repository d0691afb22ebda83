/**
 * A registry of a test's own: Debian's `docker-registry` (the distribution registry) on 127.0.0.1
 * and a free port, with its own data folder, removed when it stops. Docker trusts 127.0.0.0/8 as
 * an insecure registry by default, so the engine pushes and pulls over plain HTTP with no change
 * to the daemon.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { freePort } from '../../scripts/lib/free-port.js';
import { waitFor } from '../../scripts/lib/wait.js';

export interface LocalRegistry {
  /** `127.0.0.1:PORT` */
  address: string;
  stop(): void;
}

const listens = (port: number) =>
  new Promise<boolean>((resolve) => {
    const c = connect({ host: '127.0.0.1', port });
    c.once('connect', () => {
      c.destroy();
      resolve(true);
    });
    c.once('error', () => resolve(false));
  });

export async function startLocalRegistry(prefix: string): Promise<LocalRegistry> {
  const dir = mkdtempSync(path.join(tmpdir(), prefix));
  const port = await freePort();
  writeFileSync(
    path.join(dir, 'config.yml'),
    `version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: ${dir}/storage\nhttp:\n  addr: 127.0.0.1:${port}\n`,
  );
  const registry = spawn('docker-registry', ['serve', path.join(dir, 'config.yml')], { stdio: 'ignore' });
  const stop = () => {
    registry.kill('SIGTERM');
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    await waitFor(() => listens(port), 30_000, 'the registry listens');
  } catch (e) {
    stop();
    throw e;
  }
  return { address: `127.0.0.1:${port}`, stop };
}
