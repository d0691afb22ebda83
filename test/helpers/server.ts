/**
 * Starts a real app on a loopback port for tests, with the fixture bundle and the offline base
 * image, under a unique instance name; `stop()` closes it (tearing every episode down).
 */
import { Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import type { FastifyInstance } from 'fastify';
import pino from 'pino';
import { afterAll, beforeAll, expect } from 'vitest';
import { buildApp, type AppOptions } from '../../src/app.js';
import { logRedaction } from '../../src/logging.js';
import { labelledResources, TEST_BUILD_ARGS, uniqueInstance } from './docker.js';

export const FIXTURE_BUNDLE = fileURLToPath(new URL('../fixtures/fixture-v1', import.meta.url));
export const INSTANCE_LABEL = 'io.openenv.bundle-server.instance';

export interface TestServer {
  app: FastifyInstance;
  url: string;
  instance: string;
  /** every log line the app wrote, as text */
  logs: () => string;
  stop: () => Promise<void>;
}

export async function startServer(options: AppOptions = {}, bundle: string = FIXTURE_BUNDLE): Promise<TestServer> {
  const instance = options.instance ?? uniqueInstance();
  let captured = '';
  const sink = new Writable({
    write(chunk, _enc, cb) {
      captured += chunk.toString();
      cb();
    },
  });
  const logger = pino({ level: 'info', redact: logRedaction }, sink);
  const app = await buildApp(bundle, { buildArgs: TEST_BUILD_ARGS, pingInterval: 0, logger, ...options, instance });
  await app.openenv.ready;
  await app.listen({ host: '127.0.0.1', port: 0 });
  const addr = app.server.address();
  const port = typeof addr === 'object' && addr ? addr.port : 0;
  return {
    app,
    url: `http://127.0.0.1:${port}`,
    instance,
    logs: () => captured,
    stop: () => app.close(),
  };
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
