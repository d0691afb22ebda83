/**
 * Before any test: make the offline Node and Python base images the test images build FROM, and record what
 * the engine holds, so engine-clean.test.ts can prove the suite left it as it found it.
 */
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { DOCKER_AVAILABLE } from './docker.js';

export const SNAPSHOT_FILE = join(process.cwd(), 'node_modules', '.engine-snapshot.json');

function ids(args: string[]): string[] {
  return execFileSync('docker', args, { encoding: 'utf8' })
    .split('\n')
    .map((s) => s.trim())
    .filter(Boolean);
}

export default function setup(): void {
  if (!DOCKER_AVAILABLE) {
    writeFileSync(SNAPSHOT_FILE, JSON.stringify({ docker: false }));
    return;
  }
  execFileSync('bash', ['docker/make-local-node-base.sh'], { stdio: 'inherit' });
  execFileSync('bash', ['docker/make-local-python-base.sh'], { stdio: 'inherit' });
  writeFileSync(
    SNAPSHOT_FILE,
    JSON.stringify({
      docker: true,
      containers: ids(['ps', '-aq', '--no-trunc']),
      networks: ids(['network', 'ls', '-q', '--no-trunc']),
      volumes: ids(['volume', 'ls', '-q']),
    }),
  );
}
