/**
 * The E2B tests' server: `dist/serve.js` as users run it, on the e2b-v1 fixture (a shell env of the
 * local Debian base with git, its template), with a token of the `e2b_` + 40 hex form the SDKs
 * check, and the SDK's environment pointed at it (E2B_API_URL, E2B_SANDBOX_URL, E2B_API_KEY, as
 * slime's example reads them).
 */
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { afterAll, beforeAll, expect } from 'vitest';
import { labelledResources, uniqueInstance } from '../support/docker.js';
import { spawnServer, type ServerProcess } from '../support/serve-process.js';

export const E2B_BUNDLE = path.resolve(import.meta.dirname, '../fixtures/e2b-v1');
export const TEMPLATE = 'debian-git';
/** the local Debian base (docker/make-local-debian-base.sh): the template's FROM, and an image a sandbox's metadata names */
export const LOCAL_DEBIAN_IMAGE = process.env.OPENENV_TEST_DEBIAN_IMAGE ?? 'openenv-local/debian:bookworm';

/** makes the local Debian base when the engine lacks it (the script is idempotent) */
export function ensureDebianBase(): void {
  execFileSync('bash', ['docker/make-local-debian-base.sh', LOCAL_DEBIAN_IMAGE], { stdio: 'pipe', cwd: path.resolve(import.meta.dirname, '../..') });
}
export const INSTANCE_LABEL = 'io.openenv.bundle-server.instance';

/** a token the SDKs take for an API key: `e2b_` and 40 lowercase hex characters */
export function e2bToken(): string {
  return `e2b_${randomBytes(20).toString('hex')}`;
}

export interface E2bServer {
  proc: ServerProcess;
  url: string;
  token: string;
  instance: string;
  /** what the SDK reads from the environment */
  env: { E2B_API_URL: string; E2B_SANDBOX_URL: string; E2B_API_KEY: string };
}

export async function startE2bServer(args: string[] = [], token = e2bToken()): Promise<E2bServer> {
  ensureDebianBase();
  const instance = uniqueInstance('e2b');
  const proc = await spawnServer(
    [E2B_BUNDLE, '--port', '0', '--instance', instance, '--build-arg', `DEBIAN_IMAGE=${LOCAL_DEBIAN_IMAGE}`, ...args],
    { AGENTENV_TOKEN: token },
    300_000,
  );
  const url = proc.url;
  return { proc, url, token, instance, env: { E2B_API_URL: `${url}/e2b`, E2B_SANDBOX_URL: `${url}/e2b/envd`, E2B_API_KEY: token } };
}

/**
 * One server for the enclosing suite, the SDK's environment set to it for the suite's tests;
 * afterwards SIGTERM, exit 0, and nothing labelled with its instance left on the engine.
 */
export function e2bSuiteServer(args: string[] = []): E2bServer {
  const s = {} as E2bServer;
  const saved: Record<string, string | undefined> = {};
  beforeAll(async () => {
    Object.assign(s, await startE2bServer(args));
    for (const [k, v] of Object.entries(s.env)) {
      saved[k] = process.env[k];
      process.env[k] = v;
    }
  });
  afterAll(async () => {
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
    if (!s.proc) return;
    s.proc.child.kill('SIGTERM');
    const { code } = await s.proc.exited;
    expect(code).toBe(0);
    expect(labelledResources(`${INSTANCE_LABEL}=${s.instance}`)).toEqual({ containers: [], networks: [] });
  });
  return s;
}

/** the containers labelled with a sandbox's id (its env id) on the engine */
export function sandboxContainers(sandboxId: string): string[] {
  return labelledResources(`io.openenv.bundle-server.episode=${sandboxId}`).containers;
}
