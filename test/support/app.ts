/**
 * Starts a real app on a loopback port for tests, with a bundle (the fixture by default), under a
 * unique instance name, its log captured. Whichever sandbox the options carry runs the envs:
 * docker-server.ts and process-server.ts pick one and check nothing is left after.
 */
import { fileURLToPath } from 'node:url';
import type { FastifyInstance } from 'fastify';
import { buildApp, type AppOptions } from '../../src/app.js';
import { logRedaction } from '../../src/logging.js';
import { uniqueInstance } from './instance.js';
import { captureLog } from './log-capture.js';

export const FIXTURE_BUNDLE = fileURLToPath(new URL('../fixtures/fixture-v1', import.meta.url));

export interface TestServer {
  app: FastifyInstance;
  url: string;
  instance: string;
  /** every log line the app wrote, as text */
  logs: () => string;
  stop: () => Promise<void>;
}

export async function startApp(options: AppOptions = {}, bundle: string = FIXTURE_BUNDLE): Promise<TestServer> {
  const instance = options.instance ?? uniqueInstance();
  const log = captureLog({ level: 'info', redact: logRedaction });
  const app = await buildApp(bundle, { pingInterval: 0, logger: log.logger, ...options, instance });
  try {
    await app.openenv.ready;
    // the suites written before images were made in the background expect them made (and their failures to fail the start)
    await app.openenv.imagesSettled;
    const failed = app.openenv.catalog.unavailable();
    if (failed.length > 0) throw new Error(failed.map((f) => `env "${f.env}": ${f.error}`).join('; '));
    await app.listen({ host: '127.0.0.1', port: 0 });
  } catch (e) {
    await app.close();
    throw e;
  }
  const addr = app.server.address();
  const port = typeof addr === 'object' && addr ? addr.port : 0;
  return {
    app,
    url: `http://127.0.0.1:${port}`,
    instance,
    logs: log.text,
    stop: () => app.close(),
  };
}
