/**
 * A synthetic Harbor dataset for scale: N tasks sharing one base, each with a small layer of its
 * own, so each has its own image (scripts/lib/synthetic-dataset.ts says what a task is). Then
 * `openenv-bundle import harbor DIR --out BUNDLE` makes a bundle of it (docs/images.md).
 *   npx tsx scripts/synthetic-dataset.ts --count N --out DIR [--base IMAGE] [--seed N]
 * DIR must not exist or must be empty.
 */
import { readdir } from 'node:fs/promises';
import { parseArgs } from 'node:util';
import { SYNTHETIC_DEFAULTS, writeSyntheticDataset } from './lib/synthetic-dataset.js';

const USAGE = 'usage: tsx scripts/synthetic-dataset.ts --count N --out DIR [--base IMAGE] [--seed N]';

function fail(message: string): never {
  process.stderr.write(`error: ${message}\n${USAGE}\n`);
  process.exit(2);
}

const { values } = parseArgs({
  options: {
    count: { type: 'string' },
    out: { type: 'string' },
    base: { type: 'string', default: SYNTHETIC_DEFAULTS.base },
    seed: { type: 'string', default: String(SYNTHETIC_DEFAULTS.seed) },
  },
});
const count = Number(values.count);
const seed = Number(values.seed);
if (!Number.isInteger(count) || count < 1) fail('--count must be a whole number of at least 1');
if (!Number.isInteger(seed)) fail('--seed must be a whole number');
if (!values.out) fail('--out DIR is required');
const existing = await readdir(values.out).catch(() => []);
if (existing.length > 0) fail(`${values.out} is not empty`);

const started = Date.now();
const ids = await writeSyntheticDataset({ count, out: values.out, base: values.base, seed });
process.stdout.write(
  `wrote ${ids.length} Harbor task(s) FROM ${values.base} into ${values.out} in ${((Date.now() - started) / 1000).toFixed(1)} s\n` +
    `next: npx openenv-bundle import harbor ${values.out} --out BUNDLE${values.base === SYNTHETIC_DEFAULTS.base ? ' --base-image debian:bookworm=openenv-local/debian:bookworm' : ''}\n`,
);
