/**
 * Entry point of the GridSim env image: listens on $PORT (default 8000) on 0.0.0.0. Handles
 * SIGTERM itself, since node running as PID 1 in a container has no default signal handlers.
 */
import { createEnvServer } from './env-server.js';

const port = Number(process.env.PORT ?? 8000);
const host = process.env.HOST ?? '0.0.0.0';
// the episode's secret proves this env is the episode's own; it stays out of the environment
const secret = process.env.OPENENV_ENV_SECRET;
delete process.env.OPENENV_ENV_SECRET;
const server = createEnvServer({ logLevel: process.env.LOG_LEVEL ?? 'info', secret });
server.listen(port, host, () => {
  const address = server.address();
  const bound = typeof address === 'object' && address !== null ? address.port : port;
  process.stdout.write(`${JSON.stringify({ level: 'info', msg: 'gridsim env listening', host, port: bound })}\n`);
});
for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  process.on(signal, () => {
    server.close();
    process.exit(0);
  });
}
