/**
 * Which kind of episode network the Docker sandbox's stock makes (runtime.ts stockForShell): a
 * shell env's (hostless, not joined) only when every deploy of the bundle wants one.
 */
import { describe, expect, it } from 'vitest';
import type { LoadedBundle } from '../src/bundle/index.js';
import { stockForShell } from '../src/runtime.js';

const bundleOf = (...kinds: ('shell' | 'http')[]) =>
  ({ manifest: { envs: Object.fromEntries(kinds.map((kind, i) => [`e${i}`, kind === 'shell' ? { kind } : {}])) } }) as unknown as LoadedBundle;

describe('stockForShell', () => {
  it('a bundle of shell envs only, without the model gateway: the stock makes shell networks', () => {
    expect(stockForShell(bundleOf('shell', 'shell'), {})).toBe(true);
  });
  it('a mixed bundle, an http bundle, or envs with a model door (an http network): the http kind', () => {
    expect(stockForShell(bundleOf('shell', 'http'), {})).toBe(false);
    expect(stockForShell(bundleOf('http'), {})).toBe(false);
    expect(stockForShell(bundleOf('shell'), { modelUrl: 'http://127.0.0.1:9/v1' })).toBe(false);
    expect(stockForShell(bundleOf('shell'), { modelFromReset: true })).toBe(false);
    expect(stockForShell(bundleOf(), {})).toBe(false);
  });
});
