/**
 * A synthetic Harbor dataset for scale (scripts/synthetic-dataset.ts): N tasks that share one
 * base image, each with a small layer of its own (its numbers file), so each has an image of its
 * own, as a real dataset does. A task asks for the sum of its numbers in /app/answer.txt; its
 * solution computes it, and its verifier follows the shipped dataset's safe pattern
 * (docs/verifiers.md): it locks /tests, reads the agent's answer as `nobody`, and decides the
 * reward itself. The golden solution scores 1, doing nothing 0. The same count, seed and base
 * write the same files.
 */
import { createHash } from 'node:crypto';
import { chmod, mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';

export interface SyntheticOptions {
  count: number;
  out: string;
  /** the FROM of every task's Dockerfile (map it with import's --base-image where the engine lacks it) */
  base: string;
  /** changes every task's numbers, hence every image */
  seed: number;
  /** numbers per task */
  numbers?: number;
}

export const SYNTHETIC_DEFAULTS = { base: 'debian:bookworm', seed: 1, numbers: 20 } as const;

/** the task's id: `synth-00042` */
export function syntheticTaskId(i: number): string {
  return `synth-${String(i).padStart(5, '0')}`;
}

/** task i's numbers, from a hash of the seed and its index: whole numbers from -999 to 999 */
export function taskNumbers(seed: number, i: number, n: number = SYNTHETIC_DEFAULTS.numbers): number[] {
  const out: number[] = [];
  for (let k = 0; k < n; k++) {
    const h = createHash('sha256').update(`${seed}/${i}/${k}`).digest();
    out.push((h.readUInt32BE(0) % 1999) - 999);
  }
  return out;
}

const INSTRUCTION = `The file \`/app/numbers.txt\` holds whole numbers, one a line. Write their sum to
\`/app/answer.txt\`: the number alone, in decimal, on one line.
`;

const SOLVE = `#!/bin/bash
set -euo pipefail
awk '{ s += $1 } END { print s }' /app/numbers.txt > /app/answer.txt
`;

const TEST = `#!/bin/bash
# The verifier, in the shipped dataset's safe pattern (docs/verifiers.md): the tests locked, the
# agent's answer read as \`nobody\` (who can neither read them nor write the reward: a link from
# answer.txt to the expected sum reads nothing), at most 64 bytes of it, and the reward decided here.
chmod 0700 /tests && chmod 0755 /logs/verifier && cd / || exit 1
answer=$(timeout 30 setpriv --reuid=65534 --regid=65534 --clear-groups --no-new-privs -- head -c 64 /app/answer.txt)
reward=0
[[ -n "$answer" && "$answer" == "$(cat /tests/expected.txt)" ]] && reward=1
echo "$reward" > /logs/verifier/reward.txt
`;

/** a small task: short timeouts, small limits, no internet */
const TASK_TOML = `version = "1.0"
metadata = { category = "synthetic", tags = ["synthetic", "scale"], author_name = "OpenEnv bundle server" }
agent = { timeout_sec = 120.0 }
verifier = { timeout_sec = 60.0 }
environment = { cpus = 0.5, memory_mb = 256, storage_mb = 256, allow_internet = false, workdir = "/app" }
`;

/** Writes the tasks into `out` (made if missing); resolves with their ids. */
export async function writeSyntheticDataset(opts: SyntheticOptions): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < opts.count; i++) {
    const id = syntheticTaskId(i);
    const dir = path.join(opts.out, id);
    const numbers = taskNumbers(opts.seed, i, opts.numbers);
    const sum = numbers.reduce((a, b) => a + b, 0);
    for (const sub of ['environment', 'solution', 'tests']) await mkdir(path.join(dir, sub), { recursive: true });
    await writeFile(path.join(dir, 'instruction.md'), INSTRUCTION);
    await writeFile(path.join(dir, 'task.toml'), TASK_TOML);
    // the shared base, then a layer of the task's own
    await writeFile(path.join(dir, 'environment/Dockerfile'), `FROM ${opts.base}\nWORKDIR /app\nCOPY numbers.txt /app/numbers.txt\n`);
    await writeFile(path.join(dir, 'environment/numbers.txt'), `${numbers.join('\n')}\n`);
    await writeFile(path.join(dir, 'solution/solve.sh'), SOLVE);
    await writeFile(path.join(dir, 'tests/test.sh'), TEST);
    await writeFile(path.join(dir, 'tests/expected.txt'), `${sum}\n`);
    await chmod(path.join(dir, 'solution/solve.sh'), 0o755);
    await chmod(path.join(dir, 'tests/test.sh'), 0o755);
    ids.push(id);
  }
  return ids;
}
