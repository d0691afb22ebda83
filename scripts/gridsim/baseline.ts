/**
 * Prints GridSim's baseline figures over the eval split of a bundle: greedy mean (overall and per
 * battery duration), idle mean, optimum mean, share of greedy days losing money, and price
 * statistics of the generated train + eval days. Recomputed from the task files with the core.
 *
 *   npx tsx scripts/gridsim/baseline.ts [bundle dir]     (default: bundles/gridsim-v1)
 */
import { readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { formatReport, type Row } from './stats.js';

export function readRows(file: string): Row[] {
  return readFileSync(file, 'utf8')
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => JSON.parse(line) as Row);
}

export function reportFor(bundleDir: string): string {
  return formatReport(readRows(join(bundleDir, 'tasks/eval.jsonl')), readRows(join(bundleDir, 'tasks/train.jsonl')));
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const dir = resolve(process.argv[2] ?? join(dirname(fileURLToPath(import.meta.url)), '../../bundles/gridsim-v1'));
  process.stdout.write(`${reportFor(dir)}\n`);
}
