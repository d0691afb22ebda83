/**
 * One episode's door into the gateway: an HTTP listener bound to the server's own address on the
 * episode's network (never a wildcard), that drops every connection whose source is outside the
 * episode's subnet before a byte of it is read. The address is where the episode's env reaches the
 * server (the bridge's host address when the server runs on the host, the server container's
 * address on that network when it runs in one); the subnet check closes the door to every other
 * network, even one whose packets could reach the address (Linux answers for any of its addresses
 * on any interface).
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { inSubnet, localAddressIn, parseCidr, parseIPv4, type Cidr } from '../util/cidr.js';

/** where an episode's env reaches the gateway, and the sources it may come from */
export interface DoorSpec {
  /**
   * an IPv4 address of this process's host (or container) on the episode's network: on the host,
   * the bridge's address (the subnet's gateway); in a container, its address there. Left out: the
   * address of this namespace inside `subnet` (localAddressIn), which sees only interfaces that
   * are up and running (a bridge with no container attached yet is not)
   */
  address?: string;
  /** the episode network's subnet (CIDR): the only sources the door accepts */
  subnet: string;
}

export interface DoorLimits {
  port: number;
  maxConnections: number;
  requestReceiveMs: number;
}

export class DoorError extends Error {
  override readonly name = 'DoorError';
}

/** the IPv4 of a socket's peer, also when the stack reports it IPv4-mapped */
function peerIPv4(socket: Socket): number | null {
  const a = socket.remoteAddress ?? '';
  return parseIPv4(a.startsWith('::ffff:') ? a.slice(7) : a);
}

export function parseDoor(spec: DoorSpec): { address: string; subnet: Cidr } {
  const subnet = parseCidr(spec.subnet);
  if ('problem' in subnet) throw new DoorError(`the door's subnet: ${subnet.problem}`);
  const address = spec.address ?? localAddressIn(spec.subnet);
  if (address === null) throw new DoorError(`no address of this host (or container) is in the episode subnet ${spec.subnet}: is it attached to that network?`);
  const ip = parseIPv4(address);
  if (ip === null) throw new DoorError(`the door's address must be an IPv4 address, got ${JSON.stringify(address)}`);
  if (!inSubnet(ip, subnet)) throw new DoorError(`the door's address ${address} is not in its subnet ${spec.subnet}`);
  return { address, subnet };
}

export class Door {
  /** connections dropped for coming from outside the subnet */
  refusedSources = 0;
  private constructor(
    private readonly server: Server,
    readonly address: string,
    readonly port: number,
  ) {}

  static async open(spec: DoorSpec, limits: DoorLimits, handler: (req: IncomingMessage, res: ServerResponse) => void): Promise<Door> {
    const { address, subnet } = parseDoor(spec);
    const server = createServer({ requestTimeout: limits.requestReceiveMs, headersTimeout: Math.min(limits.requestReceiveMs, 30_000) }, handler);
    server.maxConnections = limits.maxConnections;
    let door: Door | null = null;
    server.on('connection', (socket: Socket) => {
      const ip = peerIPv4(socket);
      if (ip === null || !inSubnet(ip, subnet)) {
        if (door) door.refusedSources++;
        socket.destroy();
      }
    });
    await new Promise<void>((resolve, reject) => {
      const onError = (err: NodeJS.ErrnoException) => {
        const why =
          err.code === 'EADDRNOTAVAIL'
            ? `${address} is not an address of this host`
            : err.code === 'EADDRINUSE'
              ? `port ${limits.port} is taken on ${address} (another process listens there, or on every address)`
              : err.message;
        reject(new DoorError(`the model gateway could not listen on ${address}:${limits.port}: ${why}`));
      };
      server.once('error', onError);
      server.listen({ host: address, port: limits.port, exclusive: true }, () => {
        server.off('error', onError);
        resolve();
      });
    });
    door = new Door(server, address, (server.address() as AddressInfo).port);
    return door;
  }

  /** the base a harness is given: http://address:port */
  get origin(): string {
    return `http://${this.address}:${this.port}`;
  }

  /** stops listening and drops every connection, in the middle of a request or not */
  close(): Promise<void> {
    return new Promise((resolve) => {
      this.server.close(() => resolve());
      this.server.closeAllConnections();
    });
  }
}
