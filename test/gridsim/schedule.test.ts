/** Schedule parsing: each malformed input gets an error saying what is wrong. */
import { describe, expect, it } from 'vitest';
import { archetype } from '../../bundles/gridsim-v1/envs/gridsim/src/battery.js';
import { parseSchedule } from '../../bundles/gridsim-v1/envs/gridsim/src/schedule.js';

const b = archetype('2h-a'); // bounds [-3, +3]
const zeros = () => new Array<number>(24).fill(0);

function error(input: unknown): string {
  const r = parseSchedule(input, b);
  if (r.ok) throw new Error(`expected an error for ${JSON.stringify(input)}`);
  return r.error;
}

describe('parseSchedule', () => {
  it('accepts 24 integers within the bounds', () => {
    const s = [3, 3, -3, -3, ...new Array<number>(20).fill(0)];
    expect(parseSchedule(s, b)).toEqual({ ok: true, schedule: s });
  });
  it('accepts 3.0 as 3 and normalises -0', () => {
    const s = zeros();
    s[4] = 3.0;
    s[5] = -0;
    const r = parseSchedule(s, b);
    expect(r.ok && r.schedule[4]).toBe(3);
    expect(r.ok && Object.is(r.schedule[5], 0)).toBe(true);
    // as JSON text too: "3.0" parses to the number 3
    expect(parseSchedule(JSON.parse(`[${['3.0', ...new Array<string>(23).fill('0')].join(',')}]`), b)).toMatchObject({ ok: true });
  });
  it('accepts a JSON string holding the array', () => {
    const r = parseSchedule('[1, 2, 3.0, -3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, -3]', b);
    expect(r).toEqual({ ok: true, schedule: [1, 2, 3, -3, ...new Array<number>(19).fill(0), -3] });
  });
  it('wrong length: says how many entries it got', () => {
    expect(error([1, 2, 3])).toBe('schedule must have exactly 24 entries (one per hour ending 1…24), got 3');
    expect(error(new Array<number>(25).fill(0))).toMatch(/exactly 24 entries.*got 25/);
    expect(error([])).toMatch(/got 0$/);
    expect(error(JSON.stringify(new Array<number>(23).fill(0)))).toMatch(/got 23$/);
  });
  it('non-integers: names the hour and the value', () => {
    const s: unknown[] = zeros();
    s[6] = 1.5;
    expect(error(s)).toBe('hour 7: 1.5 is not an integer; every entry must be a whole number of units');
    s[6] = '2';
    expect(error(s)).toMatch(/^hour 7: the string "2" is not an integer/);
    s[6] = null;
    expect(error(s)).toMatch(/^hour 7: null is not an integer/);
    s[6] = [1];
    expect(error(s)).toMatch(/^hour 7: an array is not an integer/);
  });
  it('out of bounds: names the hour, the value and the bounds', () => {
    const s = zeros();
    s[11] = 4;
    expect(error(s)).toBe('hour 12: 4 is out of bounds [-3, +3] (at most 3 units sold or 3 charged in an hour)');
    s[11] = 0;
    s[0] = -7;
    expect(error(s)).toMatch(/^hour 1: -7 is out of bounds \[-3, \+3\]/);
    // bounds follow the battery: k_ch and k_dis may differ
    const asym = { k_ch: 2, k_dis: 4 };
    const t = zeros();
    t[2] = -4;
    expect(parseSchedule(t, asym).ok).toBe(true);
    t[2] = 3;
    const r = parseSchedule(t, asym);
    expect(!r.ok && r.error).toMatch(/^hour 3: 3 is out of bounds \[-4, \+2\]/);
  });
  it('anything else: says what it got', () => {
    expect(error(undefined)).toMatch(/must be an array of 24 integers.*got undefined/);
    expect(error(42)).toMatch(/must be an array of 24 integers.*got 42/);
    expect(error({ schedule: zeros() })).toMatch(/got an object/);
    expect(error('0, 0, 0')).toMatch(/string that is not valid JSON/);
    expect(error('{"a": 1}')).toMatch(/JSON string holding an object, not an array/);
  });
});
