/** A free loopback port, for scripts and tests that start servers and envs. */
import { createServer } from 'node:net';

/** a port nothing listens on right now (another process may still take it before the env does) */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as { port: number };
      srv.close(() => resolve(port));
    });
  });
}
