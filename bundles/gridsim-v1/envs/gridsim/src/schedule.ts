/**
 * The schedule a model submits: exactly 24 integers, hour ending 1…24, each in [-k_dis, +k_ch].
 * Positive charges (buys) that many units, negative sells, 0 idles. `3.0` counts as 3, and a JSON
 * string holding the array is accepted too. Anything else gets an error saying what is wrong.
 */
import type { Battery } from './battery.js';

export const HOURS_PER_DAY = 24;

export type ParseResult = { ok: true; schedule: number[] } | { ok: false; error: string };

function describe(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'an array';
  if (typeof v === 'string') return `the string ${JSON.stringify(v.length > 40 ? `${v.slice(0, 40)}…` : v)}`;
  if (typeof v === 'object') return 'an object';
  return JSON.stringify(v) ?? String(v);
}

/** Parses a schedule for `battery`; the error names the hour, the value and the bounds. */
export function parseSchedule(input: unknown, battery: Pick<Battery, 'k_ch' | 'k_dis'>): ParseResult {
  let value = input;
  if (typeof value === 'string') {
    try {
      value = JSON.parse(value);
    } catch {
      return {
        ok: false,
        error: `schedule is a string that is not valid JSON; send an array of ${HOURS_PER_DAY} integers, e.g. [0, 0, 3, ...]`,
      };
    }
    if (!Array.isArray(value)) {
      return { ok: false, error: `schedule is a JSON string holding ${describe(value)}, not an array of ${HOURS_PER_DAY} integers` };
    }
  }
  if (!Array.isArray(value)) {
    return { ok: false, error: `schedule must be an array of ${HOURS_PER_DAY} integers (one per hour ending 1…24), got ${describe(value)}` };
  }
  if (value.length !== HOURS_PER_DAY) {
    return {
      ok: false,
      error: `schedule must have exactly ${HOURS_PER_DAY} entries (one per hour ending 1…24), got ${value.length}`,
    };
  }
  const lo = -battery.k_dis;
  const hi = battery.k_ch;
  const schedule: number[] = [];
  for (let i = 0; i < value.length; i++) {
    const v: unknown = value[i];
    const hour = i + 1;
    if (typeof v !== 'number' || !Number.isInteger(v)) {
      return { ok: false, error: `hour ${hour}: ${describe(v)} is not an integer; every entry must be a whole number of units` };
    }
    if (v < lo || v > hi) {
      return {
        ok: false,
        error: `hour ${hour}: ${v} is out of bounds [${lo}, +${hi}] (at most ${battery.k_dis} units sold or ${battery.k_ch} charged in an hour)`,
      };
    }
    schedule.push(v === 0 ? 0 : v); // normalises -0
  }
  return { ok: true, schedule };
}
