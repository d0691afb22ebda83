/** What check plays: the sample of tasks, and the arguments it makes to break a tool's schema. */
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { sampleTasks } from '../../src/authoring/check/tally.js';
import { newValidator, violatingArguments } from '../../src/authoring/json-schema.js';
import { loadBundle } from '../../src/bundle/index.js';

const GRIDSIM = fileURLToPath(new URL('../../bundles/gridsim-v1', import.meta.url));

describe('sampleTasks', () => {
  it('spreads N tasks over each split and toolset, first and last included; all takes every task; --split keeps one', async () => {
    const b = await loadBundle(GRIDSIM);
    const three = sampleTasks(b, 3);
    expect(three.filter((t) => t.split === 'train').map((t) => t.index)).toEqual([0, 1000, 1999]);
    expect(three.filter((t) => t.split === 'wiring').map((t) => t.index)).toEqual([0, 2, 3]);
    expect(sampleTasks(b, 'all')).toHaveLength(2204);
    expect(new Set(sampleTasks(b, 2, 'eval').map((t) => t.split))).toEqual(new Set(['eval']));
    expect(sampleTasks(b, 1, 'eval').map((t) => t.index)).toEqual([0]);
  });
});

describe('violatingArguments', () => {
  const ajv = newValidator();
  const refused = (schema: Record<string, unknown>) => {
    const validate = ajv.compile(schema);
    const args = violatingArguments(schema, validate);
    if (args !== null) expect(validate(args)).toBe(false);
    return args;
  };
  it('makes arguments the schema refuses: an unknown field, a missing required one, a wrong type', () => {
    expect(refused({ type: 'object', properties: {}, additionalProperties: false })).toEqual({ openenv_check_unknown_field: true });
    expect(refused({ type: 'object', properties: { n: { type: 'integer' } }, required: ['n'] })).toEqual({});
    expect(refused({ type: 'object', properties: { text: { type: 'string' } } })).toEqual({ text: 12345 });
  });
  it('gives up on a schema that accepts any object', () => {
    expect(refused({ type: 'object' })).toBeNull();
  });
});
