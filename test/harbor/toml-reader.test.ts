/** task.toml's tables read key by key (src/authoring/harbor/toml-reader.ts): typed reads, refusals, and what was not read. */
import { describe, expect, it } from 'vitest';
import { isTable, Reader } from '../../src/authoring/harbor/toml-reader.js';
import type { TaskNote } from '../../src/authoring/harbor/task-config.js';

describe('Reader', () => {
  it('reads numbers and strings in their type, refuses another, and names what was not read', () => {
    const out = { refusals: [] as TaskNote[], notes: [] as TaskNote[] };
    const r = new Reader({ a: 2, b: 'x', c: -1, d: 3, extra: true }, '', out);
    expect([r.number('a'), r.string('b'), r.number('c'), r.string('d'), r.number('missing')]).toEqual([2, 'x', undefined, undefined, undefined]);
    r.rest();
    expect(out.refusals).toEqual([
      { field: 'c', message: 'expected a number, got -1' },
      { field: 'd', message: 'expected a string, got 3' },
    ]);
    expect(out.notes).toEqual([{ field: 'extra', message: 'not supported by this import: dropped' }]);
  });
  it("names a table's keys by their path, a [[steps]] entry's as its own; reads an env's variables", () => {
    const out = { refusals: [] as TaskNote[], notes: [] as TaskNote[] };
    const top = new Reader({ verifier: { env: { OK: 'v', 'bad-name': 'v', HOST: '${HOME}', N: 1 } } }, '', out);
    const v = top.table_('verifier')!;
    expect(v.where).toBe('[verifier]');
    expect(v.vars('env')).toEqual({ OK: 'v' });
    expect(out.refusals.map((f) => f.field)).toEqual(['[verifier.env] bad-name', '[verifier.env] HOST', '[verifier.env] N']);
    const step = new Reader({ verifier: {} }, '[[steps]] 2 (build)', out);
    expect(step.table_('verifier')!.where).toBe('[[steps]] 2 (build) [steps.verifier]');
    expect(new Reader({ t: 1 }, '', out).table_('t')).toBeNull();
    expect([isTable({}), isTable([]), isTable(new Date()), isTable(null)]).toEqual([true, false, false, false]);
  });
});
