/** The one doubling backoff: base, twice the last, capped; a reset starts over. */
import { describe, expect, it } from 'vitest';
import { Backoff } from '../src/util/backoff.js';

describe('Backoff', () => {
  it('doubles from the base up to the cap, and starts over after a reset', () => {
    const b = new Backoff(250, 1500);
    expect([b.next(), b.next(), b.next(), b.next(), b.next()]).toEqual([250, 500, 1000, 1500, 1500]);
    b.reset();
    expect(b.next()).toBe(250);
    const uncapped = new Backoff(100);
    expect([uncapped.next(), uncapped.next(), uncapped.next()]).toEqual([100, 200, 400]);
  });
});
