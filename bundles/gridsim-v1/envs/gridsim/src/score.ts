/**
 * The score: 0 with no submission or an infeasible one; otherwise
 * clamp(0.2 + 0.8 · profit / optimum, 0, 1) rounded to 6 decimals (half up). Computed in BigInt
 * from the integer profits, so idle is exactly 0.2 and the optimum exactly 1.
 */

/** score in millionths: round(10^6 · (0.2 + 0.8·profit/optimum)), clamped to [0, 10^6] */
export function scoreMillionths(profit: number, optimum: number): number {
  if (!Number.isSafeInteger(profit) || !Number.isSafeInteger(optimum)) throw new RangeError('profits must be safe integers');
  if (optimum <= 0) throw new RangeError(`optimum must be positive, got ${optimum}`);
  const o = BigInt(optimum);
  const num = 200_000n * o + 800_000n * BigInt(profit); // 10^6·(0.2·O + 0.8·P)
  if (num <= 0n) return 0;
  const rounded = (2n * num + o) / (2n * o); // floor(num/o + 1/2)
  return rounded > 1_000_000n ? 1_000_000 : Number(rounded);
}

export function score(profit: number, optimum: number): number {
  return scoreMillionths(profit, optimum) / 1_000_000;
}
