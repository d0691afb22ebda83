/**
 * The egress allowlist's rules on the engine's host (docs/e2b.md, "The way back to the trainer"):
 * an env given destinations gets a routed bridge (not an internal one), and before its container
 * starts, two chains of its own, keyed by the server's instance and the env's id:
 *
 * - forwarded traffic (to other hosts): a jump from Docker's DOCKER-USER chain (which Docker runs
 *   before its own forwarding rules) for the env's subnet, to a chain that lets each allowed
 *   destination (address and TCP port) through to Docker's rules and rejects everything else;
 * - traffic to this host's own addresses (the bridge's gateway, the host's interfaces): a jump
 *   from INPUT for the same subnet, to a chain that accepts the allowed destinations that are
 *   this host's and rejects everything else: the server's API, the engine, any other port.
 *
 * Replies come back as established traffic to the subnet, which neither jump matches. The rules
 * are removed with the env; what a killed server left is removed at the next start of its
 * instance (the start sweep). It needs the host's network namespace and CAP_NET_ADMIN there:
 * `check()` says so before anything runs.
 */
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { SandboxError, type EgressDestination } from '../sandbox.js';
import type { SandboxLogger } from '../engine/logger.js';

/** runs iptables with its arguments; resolves with its stdout */
export type IptablesRun = (args: string[]) => Promise<string>;

const defaultRun: IptablesRun = (args) =>
  new Promise((resolve, reject) =>
    execFile('iptables', ['-w', ...args], { timeout: 30_000 }, (err, stdout, stderr) =>
      err ? reject(new Error(`iptables ${args.join(' ')}: ${stderr.trim() || err.message}`)) : resolve(stdout),
    ),
  );

const REJECT = ['-j', 'REJECT', '--reject-with', 'icmp-admin-prohibited'];

export class EgressRules {
  /** the chains' prefixes: this instance's, so one server's sweep never touches another's */
  private readonly forward: string;
  private readonly input: string;
  private readonly opened = new Map<string, string>();

  constructor(
    instance: string,
    private readonly log: SandboxLogger,
    private readonly run: IptablesRun = defaultRun,
  ) {
    const tag = createHash('sha256').update(instance).digest('hex').slice(0, 6);
    this.forward = `OEF${tag}`;
    this.input = `OEI${tag}`;
  }

  /** the chain names of one env (at most 28 characters, as iptables allows) */
  private chains(envId: string): { forward: string; input: string } {
    const key = createHash('sha256').update(envId).digest('hex').slice(0, 12);
    return { forward: `${this.forward}-${key}`, input: `${this.input}-${key}` };
  }

  /** rejects with what the host needs when the rules cannot be set here */
  async check(): Promise<void> {
    try {
      await this.run(['-S', 'DOCKER-USER']);
      await this.run(['-S', 'INPUT']);
    } catch (err) {
      throw new SandboxError(
        'engine_failed',
        `--egress-allow needs rules in Docker's DOCKER-USER chain and in INPUT, in the network namespace of the Docker engine's host, and could not read them (${(err as Error).message.slice(0, 300)}): ` +
          "run the server as root on the engine's host, or in a container with network_mode: host, cap_add: [NET_ADMIN], --in-container never and the iptables of the host's backend (docs/e2b.md); a swarm cannot serve it",
      );
    }
  }

  /** the env's rules, set before its container starts: `dests` open to its subnet, nothing else */
  async open(envId: string, subnet: string, dests: readonly EgressDestination[]): Promise<void> {
    const { forward, input } = this.chains(envId);
    this.opened.set(envId, subnet);
    await this.run(['-N', forward]);
    for (const d of dests) await this.run(['-A', forward, '-d', d.ip, '-p', 'tcp', '--dport', String(d.port), '-j', 'RETURN']);
    await this.run(['-A', forward, ...REJECT]);
    await this.run(['-N', input]);
    for (const d of dests) await this.run(['-A', input, '-d', d.ip, '-p', 'tcp', '--dport', String(d.port), '-j', 'ACCEPT']);
    await this.run(['-A', input, ...REJECT]);
    // the jumps last: the chains are whole before any packet is sent through them
    await this.run(['-I', 'DOCKER-USER', '1', '-s', subnet, '-j', forward]);
    await this.run(['-I', 'INPUT', '1', '-s', subnet, '-j', input]);
    this.log.info({ env: envId, subnet, destinations: dests.map((d) => `${d.ip}:${d.port}`) }, 'egress opened');
  }

  /** the env's rules removed (after its container is); nothing when it had none */
  async close(envId: string): Promise<void> {
    const subnet = this.opened.get(envId);
    if (subnet === undefined) return;
    const { forward, input } = this.chains(envId);
    await this.remove([
      ['DOCKER-USER', subnet, forward],
      ['INPUT', subnet, input],
    ]);
    this.opened.delete(envId);
  }

  /** every chain of this instance and the jumps to them (what a killed server left); their count */
  async sweep(): Promise<number> {
    let found: [string, string, string][];
    try {
      found = [...(await this.jumps('DOCKER-USER', this.forward)), ...(await this.jumps('INPUT', this.input))];
    } catch {
      // no rules to read: nothing of ours can be there
      return 0;
    }
    const chains = new Set((await this.run(['-S']).catch(() => '')).split('\n').flatMap((l) => /^-N (\S+)$/.exec(l)?.[1] ?? []));
    const ours = [...chains].filter((c) => c.startsWith(`${this.forward}-`) || c.startsWith(`${this.input}-`));
    await this.remove(found);
    for (const c of ours.filter((c) => !found.some((f) => f[2] === c))) await this.dropChain(c);
    if (ours.length > 0) this.log.info({ chains: ours }, 'removed egress rules a previous run of this instance left');
    return ours.length;
  }

  /** the jumps from `parent` to chains starting with `prefix`: [parent, source, chain] */
  private async jumps(parent: string, prefix: string): Promise<[string, string, string][]> {
    const out = await this.run(['-S', parent]);
    return out.split('\n').flatMap((l) => {
      const m = /^-A \S+ -s (\S+) -j (\S+)$/.exec(l.trim());
      return m && m[2]!.startsWith(`${prefix}-`) ? [[parent, m[1]!, m[2]!] as [string, string, string]] : [];
    });
  }

  private async remove(jumps: [string, string, string][]): Promise<void> {
    for (const [parent, source, chain] of jumps) {
      await this.run(['-D', parent, '-s', source, '-j', chain]).catch((e: unknown) =>
        this.log.warn({ err: (e as Error).message }, 'could not remove an egress jump'),
      );
      await this.dropChain(chain);
    }
  }

  private async dropChain(chain: string): Promise<void> {
    await this.run(['-F', chain]).catch(() => undefined);
    await this.run(['-X', chain]).catch((e: unknown) => this.log.warn({ err: (e as Error).message }, 'could not remove an egress chain'));
  }
}
