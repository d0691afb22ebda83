/**
 * Docker-backed tests are real tests: in CI (CI set) they must run, so a missing engine fails
 * them; on a laptop without Docker they skip with a loud message.
 */
import { execFileSync } from 'node:child_process';
import { describe, it } from 'vitest';
import { LOCAL_NODE_IMAGE } from '../../scripts/lib/local-node-image.js';
import { IN_FAST_LAYER } from './layer.js';

export { uniqueInstance } from './instance.js';
export { waitFor } from '../../scripts/lib/wait.js';

function engineAnswers(): boolean {
  // the fast layer never asks the engine anything
  if (IN_FAST_LAYER) return false;
  try {
    execFileSync('docker', ['info', '--format', '{{.ServerVersion}}'], { stdio: 'pipe', timeout: 15_000 });
    return true;
  } catch {
    return false;
  }
}

export const DOCKER_AVAILABLE = engineAnswers();
export const IN_CI = Boolean(process.env.CI);

export { LOCAL_NODE_IMAGE };
export const TEST_BUILD_ARGS: Record<string, string> = { NODE_IMAGE: LOCAL_NODE_IMAGE };
/** the offline Python base (docker/make-local-python-base.sh), for Python envs: not in TEST_BUILD_ARGS, whose images it would all rename */
export const LOCAL_PYTHON_IMAGE = process.env.OPENENV_TEST_PYTHON_IMAGE ?? 'openenv-local/python:3';

let warned = false;

/** `describe` for suites that need a Docker engine. */
export function describeDocker(name: string, fn: () => void): void {
  if (IN_FAST_LAYER) {
    describe(name, () => {
      it('needs a Docker engine, so it belongs to the docker layer', () => {
        throw new Error('a Docker-backed suite in the fast layer: name its file *.docker.test.ts, or run it on the ProcessSandbox');
      });
    });
    return;
  }
  if (DOCKER_AVAILABLE) {
    describe(name, fn);
    return;
  }
  if (IN_CI) {
    describe(name, () => {
      it('needs a Docker engine', () => {
        throw new Error('CI is set but no Docker engine answers `docker info`: Docker tests must run in CI');
      });
    });
    return;
  }
  if (!warned) {
    warned = true;
    console.warn('\n\n!!! NO DOCKER ENGINE: skipping every Docker-backed test suite. They run (and must pass) in CI. !!!\n');
  }
  describe.skip(`${name} [SKIPPED: no Docker engine]`, fn);
}

/** ids of containers (all states) and networks carrying a label, via the CLI (independent of our code) */
export function labelledResources(label: string): { containers: string[]; networks: string[] } {
  const out = (args: string[]) =>
    execFileSync('docker', args, { encoding: 'utf8' })
      .split('\n')
      .map((s) => s.trim())
      .filter(Boolean);
  return {
    containers: out(['ps', '-aq', '--filter', `label=${label}`]),
    networks: out(['network', 'ls', '-q', '--filter', `label=${label}`]),
  };
}

/** the full ids of the networks a container is attached to */
export function containerNetworkIds(containerId: string): string[] {
  const nets = JSON.parse(execFileSync('docker', ['inspect', '-f', '{{json .NetworkSettings.Networks}}', containerId], { encoding: 'utf8' })) as Record<
    string,
    { NetworkID: string }
  >;
  return Object.values(nets).map((n) => n.NetworkID);
}

/** container ids labelled `label`, without blocking the event loop (the server under test shares it) */
export async function labelledContainersAsync(label: string): Promise<string[]> {
  const { execFile } = await import('node:child_process');
  return new Promise((resolve, reject) =>
    execFile('docker', ['ps', '-aq', '--filter', `label=${label}`], (err, out) => (err ? reject(err) : resolve(out.split('\n').filter(Boolean)))),
  );
}
