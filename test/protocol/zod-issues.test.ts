import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { describeIssue, describeIssues, describeZod, issueWhere } from '../../src/protocol/zod-issues.js';

const Schema = z.object({ task_id: z.string(), seeds: z.array(z.number()).optional() });
const failed = (v: unknown): z.ZodError => {
  const r = Schema.safeParse(v);
  if (r.success) throw new Error('expected a failure');
  return r.error;
};

describe('the one formatter of zod issues', () => {
  it('says every issue at its path under the prefix, the value itself by the prefix (frames, request bodies)', () => {
    expect(describeZod(failed({ seeds: [1, 'x'] }), 'data')).toBe('data.task_id: Required; data.seeds.1: Expected number, received string');
    expect(describeZod(failed(3), 'body')).toBe('body: Expected object, received number');
    expect(describeZod(failed({}), '')).toBe('task_id: Required');
  });

  it('says an issue at the value itself by its root name when there is no prefix (tool arguments, replies)', () => {
    const [root] = failed(null).issues;
    expect(issueWhere(root!, { root: 'arguments' })).toBe('arguments');
    expect(describeIssue(root!, { root: 'body' })).toBe('body: Expected object, received null');
    expect(describeIssues(failed({ task_id: 1 }), { root: '(root)' })).toBe('task_id: Expected string, received number');
    expect(describeIssues(failed([]), { root: '(root)' })).toBe('(root): Expected object, received array');
  });
});
