/** Findings a person can read: identical ones grouped, the ones met once first, problems before warnings. */
import { describe, expect, it } from 'vitest';
import { formatGroup, groupFindings, type Finding } from '../../src/authoring/findings.js';

const task = (id: string, line: number) => `task ${id} (tasks/train.jsonl line ${line})`;

describe('grouped findings', () => {
  it('puts problems before warnings, and in each the findings met once before the repeated ones, else in the order found', () => {
    const list: Finding[] = [
      { level: 'warning', where: 'task rows', message: 'no golden' },
      { level: 'problem', where: task('t-0', 1), message: 'scored 0' },
      { level: 'problem', where: task('t-1', 2), message: 'scored 0' },
      { level: 'problem', where: 'bundle.json, field "reward"', message: 'undeclared' },
      { level: 'problem', where: task('t-2', 3), message: 'scored 0' },
      { level: 'problem', where: 'tool x (toolset y)', message: 'accepted bad arguments' },
      { level: 'warning', where: 'a', message: 'twice' },
      { level: 'warning', where: 'b', message: 'twice' },
    ];
    const lines = groupFindings(list).map((g) => formatGroup(g));
    expect(lines).toEqual([
      'problem: bundle.json, field "reward": undeclared',
      'problem: tool x (toolset y): accepted bad arguments',
      'problem: 3 tasks: scored 0, e.g. t-0; t-1 …',
      'warning: task rows: no golden',
      'warning: 2 places: twice, e.g. a; b',
    ]);
  });
});
