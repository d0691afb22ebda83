/**
 * The app on real Docker (its default sandbox), with the offline base image: `stop()` closes it
 * (tearing every episode down); suiteServer also checks nothing labelled with its instance is left
 * on the engine.
 */
import { afterAll, beforeAll, expect } from 'vitest';
import type { AppOptions } from '../../src/app.js';
import { FIXTURE_BUNDLE, startApp, type TestServer } from './app.js';
import { labelledResources, TEST_BUILD_ARGS } from './docker.js';

export { FIXTURE_BUNDLE, type TestServer } from './app.js';
export const INSTANCE_LABEL = 'io.openenv.bundle-server.instance';

export function startServer(options: AppOptions = {}, bundle: string = FIXTURE_BUNDLE): Promise<TestServer> {
  return startApp({ buildArgs: TEST_BUILD_ARGS, ...options }, bundle);
}

/**
 * One server for the enclosing suite: started before its tests, stopped after them (tearing every
 * episode down). With `checkLeftovers`, the suite also asserts nothing labelled with its instance
 * is left. The returned object is filled in by the time the first test runs.
 */
export function suiteServer(options: AppOptions = {}, { bundle = FIXTURE_BUNDLE, checkLeftovers = true } = {}): TestServer {
  const s = {} as TestServer;
  beforeAll(async () => {
    Object.assign(s, await startServer(options, bundle));
  });
  afterAll(async () => {
    if (!s.app) return;
    await s.stop();
    if (checkLeftovers) expect(labelledResources(`${INSTANCE_LABEL}=${s.instance}`)).toEqual({ containers: [], networks: [] });
  });
  return s;
}
