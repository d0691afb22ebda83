/**
 * The server's API never answers an episode's env. When the server runs in a container attached
 * to every episode network (compose), its API listens on every address of that container,
 * including the one each env reaches; on the host, only a --host other than 127.0.0.1 exposes it
 * on the bridge addresses. Either way, a connection whose source is in the episode subnet pool is
 * an env's: it is dropped before a byte of it is read (the token would refuse it anyway, but an
 * env gets no answer at all, not even /health).
 */
import type { Server } from 'node:net';
import { inSubnet, parseCidr, parseIPv4 } from '../util/cidr.js';

/** drops every connection to `server` from the subnet pool `pool` (CIDR); returns how many it dropped so far */
export function refuseEpisodeSources(server: Server, pool: string): () => number {
  const cidr = parseCidr(pool);
  if ('problem' in cidr) throw new Error(`the subnet pool: ${cidr.problem}`);
  let dropped = 0;
  server.on('connection', (socket) => {
    const a = socket.remoteAddress ?? '';
    const ip = parseIPv4(a.startsWith('::ffff:') ? a.slice(7) : a);
    if (ip !== null && inSubnet(ip, cidr)) {
      dropped++;
      socket.destroy();
    }
  });
  return () => dropped;
}
