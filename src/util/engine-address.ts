/**
 * A Docker engine's address as a person writes it (`--swarm-node-engine`): `unix:///PATH` or
 * `tcp://HOST:PORT` (plain HTTP). Parsed once here, for the option's check and for the client.
 */
export type EngineAddress = { socketPath: string } | { host: string; port: number };

/** the address's parts; throws a message saying what was expected */
export function parseEngineAddress(address: string): EngineAddress {
  const unix = /^unix:\/\/(\/.+)$/.exec(address);
  if (unix) return { socketPath: unix[1]! };
  const tcp = /^tcp:\/\/([A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\]):(\d{1,5})$/.exec(address);
  const port = Number(tcp?.[2]);
  if (tcp && port > 0 && port < 65536) return { host: tcp[1]!.replace(/^\[|\]$/g, ''), port };
  throw new Error(`expected a Docker engine address unix:///PATH or tcp://HOST:PORT, got "${address}"`);
}
