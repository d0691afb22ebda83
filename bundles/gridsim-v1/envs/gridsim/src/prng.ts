/**
 * The one PRNG of GridSim: xoshiro128** (Blackman & Vigna), seeded from a string through FNV-1a
 * and splitmix32. Pinned here so the generated bundle is byte-for-byte reproducible on any
 * machine: only 32-bit integer operations, no Math.random.
 */

/** 32-bit FNV-1a of the UTF-16 code units of a string */
export function hashString(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

function splitmix32(state: { x: number }): number {
  state.x = (state.x + 0x9e3779b9) | 0;
  let z = state.x;
  z = Math.imul(z ^ (z >>> 16), 0x85ebca6b);
  z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35);
  return (z ^ (z >>> 16)) >>> 0;
}

export class Rng {
  private a: number;
  private b: number;
  private c: number;
  private d: number;

  /** every distinct seed string gives an independent stream */
  constructor(seed: string) {
    const sm = { x: hashString(seed) };
    this.a = splitmix32(sm);
    this.b = splitmix32(sm);
    this.c = splitmix32(sm);
    this.d = splitmix32(sm);
    if ((this.a | this.b | this.c | this.d) === 0) this.d = 1; // xoshiro must not start all-zero
  }

  /** next uint32 */
  nextU32(): number {
    const result = Math.imul(rotl(Math.imul(this.b, 5), 7), 9) >>> 0;
    const t = this.b << 9;
    this.c ^= this.a;
    this.d ^= this.b;
    this.b ^= this.c;
    this.a ^= this.d;
    this.c ^= t;
    this.d = rotl(this.d, 11);
    return result;
  }

  /** uniform in [0, 1), 32 bits of resolution */
  float(): number {
    return this.nextU32() / 4294967296;
  }

  /** uniform integer in [lo, hi] (inclusive), without modulo bias */
  int(lo: number, hi: number): number {
    const span = hi - lo + 1;
    if (!Number.isInteger(lo) || !Number.isInteger(hi) || span <= 0 || span > 4294967296) {
      throw new RangeError(`Rng.int: bad range [${lo}, ${hi}]`);
    }
    const limit = 4294967296 - (4294967296 % span);
    for (;;) {
      const x = this.nextU32();
      if (x < limit) return lo + (x % span);
    }
  }

  /** one element of a non-empty array, uniformly */
  pick<T>(items: readonly T[]): T {
    if (items.length === 0) throw new RangeError('Rng.pick: empty array');
    return items[this.int(0, items.length - 1)] as T;
  }

  /** true with probability p */
  chance(p: number): boolean {
    return this.float() < p;
  }

  /**
   * Approximately standard normal: the Irwin-Hall sum of 12 uniforms minus 6. Additions only,
   * so it is bit-identical everywhere; its tails stop at ±6, which suits prices.
   */
  normal(): number {
    let s = 0;
    for (let i = 0; i < 12; i++) s += this.float();
    return s - 6;
  }
}

function rotl(x: number, k: number): number {
  return (x << k) | (x >>> (32 - k));
}
