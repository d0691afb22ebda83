/**
 * What the swarm tests add to the lab's driver (scripts/lib/swarm-lab.ts): in CI the lab must come
 * up (the tests fail otherwise); elsewhere, without root or the tools, the suites skip loudly.
 */
import { describe, it } from 'vitest';
import { followContainerLives } from '../../scripts/lib/container-lives.js';
import { dk, LAB_PROBLEM, sock } from '../../scripts/lib/swarm-lab.js';
import { LABELS } from '../../src/sandbox/sandbox.js';
import { IN_CI } from './docker.js';

/** `describe` for suites that need the swarm lab: fails in CI when it cannot run, skips loudly elsewhere */
export function describeSwarm(name: string, fn: () => void): void {
  if (LAB_PROBLEM === null) {
    describe(name, fn);
    return;
  }
  if (IN_CI) {
    describe(name, () => {
      it('needs the swarm lab', () => {
        throw new Error(`CI is set but the swarm lab cannot run (${LAB_PROBLEM}): swarm tests must run in CI`);
      });
    });
    return;
  }
  console.warn(`\n\n!!! SWARM LAB UNAVAILABLE (${LAB_PROBLEM}): skipping "${name}". It runs (and must pass) in CI. !!!\n`);
  describe.skip(`${name} [SKIPPED: ${LAB_PROBLEM}]`, fn);
}

/**
 * Every container start and die of an instance on every node, read live from the nodes' own event
 * streams (all nodes share this machine's clock), so the most envs ever running at once is exact:
 * sampling the nodes one after another can count a container that just died on one node beside
 * one that just started on another, and a bounded query afterwards replays only the last 256
 * events a node buffered. `stop()`, called once no container of the instance is left, resolves
 * with that most; it rejects, saying so, when the count cannot be trusted: a node's stream broke,
 * or a node's starts and dies do not match (a die the stream dropped would count a container
 * alive ever after, and read as the cap broken).
 */
export function watchContainerLives(instance: string, nodes: number): { stop: () => Promise<number> } {
  const hosts = Object.fromEntries(Array.from({ length: nodes }, (_, i) => [`n${i + 1}`, sock(i + 1)]));
  const lives = followContainerLives(`${LABELS.instance}=${instance}`, hosts);
  return {
    stop: async () => {
      const seen = await lives.stop();
      const unmatched = Object.entries(seen.perNode).filter(([, n]) => n.starts !== n.dies);
      if (seen.broken.length > 0 || unmatched.length > 0)
        throw new Error(
          `the container count cannot be trusted (peak ${seen.peak}): ${[...seen.broken, ...unmatched.map(([name, n]) => `${name}: ${n.starts} starts, ${n.dies} dies`)].join('; ')}`,
        );
      console.log(
        `[container lives] peak ${seen.peak} across the nodes; ${Object.entries(seen.perNode)
          .map(([name, n]) => `${name}: ${n.starts} started, peak ${n.peak}`)
          .join(', ')}`,
      );
      return seen.peak;
    },
  };
}

/**
 * episode → the lab node its env's container started on, from each node's engine events since
 * `since` (unix seconds; its service may be gone by now); with `verifiers`, the node of its clean
 * verifier's container instead (whose env label ends in `-verifier`)
 */
export async function startedOn(instance: string, since: number, nodes: number, verifiers = false): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  for (let n = 1; n <= nodes; n++) {
    const lines = await dk(n, [
      'events',
      '--since',
      String(since),
      '--until',
      String(Math.ceil(Date.now() / 1000)),
      '--filter',
      'type=container',
      '--filter',
      'event=start',
      '--filter',
      `label=${LABELS.instance}=${instance}`,
      '--format',
      `{{index .Actor.Attributes "${LABELS.episode}"}} {{index .Actor.Attributes "${LABELS.env}"}}`,
    ]);
    for (const l of lines.split('\n').filter(Boolean)) {
      const [episode, env] = l.trim().split(' ');
      if (episode && (env?.endsWith('-verifier') ?? false) === verifiers) out.set(episode, n);
    }
  }
  return out;
}
