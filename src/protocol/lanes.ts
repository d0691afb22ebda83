/**
 * The admission queue's lanes, declared once: a reset's `priority` (reset data, the standard MCP
 * query), `--split-priority`'s values, the `lane` label of the queue metrics and the console's
 * waits per lane. Highest first; a reset that names none, of a split no rule names, is `normal`.
 */
import { z } from 'zod';

export const LANES = ['high', 'normal', 'low'] as const;
export const LaneSchema = z
  .enum(LANES)
  .describe('the lane a reset waits in for a slot: high before normal before low, each lower lane keeping a bounded share');
export type Lane = z.infer<typeof LaneSchema>;

export const DEFAULT_LANE: Lane = 'normal';

/** a count per lane (resets waiting in each) */
const count = z.number().int();
export const LaneCountsSchema = z.object({ high: count, normal: count, low: count } satisfies Record<Lane, typeof count>);
export type LaneCounts = z.infer<typeof LaneCountsSchema>;

/** 0 for the highest lane */
export function laneRank(lane: Lane): number {
  return LANES.indexOf(lane);
}
