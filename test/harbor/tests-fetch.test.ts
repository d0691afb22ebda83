/**
 * The import's note on tasks whose test.sh fetches at run time (src/authoring/harbor/tests-fetch.ts):
 * the words it reads as fetching, those it does not, a step's test.sh over the task's, and the
 * fixture and the shipped dataset as the import reads them.
 */
import { mkdtemp, mkdir, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testsFetchNotes } from '../../src/authoring/harbor/tests-fetch.js';
import { fetchesIn } from '../../src/verifier/index.js';
import { DATASET } from './helpers.js';

const FIXTURE = path.resolve(import.meta.dirname, '../fixtures/harbor-tasks/needs-network');

describe('what a test.sh fetches', () => {
  it('the standard Terminal-Bench shape: apt-get, curl | sh, uvx', () => {
    const script =
      'apt-get update\napt-get install -y curl\ncurl -LsSf https://astral.sh/uv/0.9.5/install.sh | sh\nsource $HOME/.local/bin/env\nuvx -p 3.13 -w pytest==8.4.1 pytest /tests/test_outputs.py -rA\n';
    expect(fetchesIn(script)).toEqual(['apt-get install', 'apt-get update', 'curl … | sh', 'uvx']);
  });

  it('pip, uv pip, wget, npm, and a command continued over lines', () => {
    expect(fetchesIn('pip3 install --quiet \\\n  pytest requests\npython3 -m pytest\n')).toEqual(['pip install']);
    expect(fetchesIn('uv pip install pytest\nuv run pytest\n')).toEqual(['uv', 'pip install']);
    expect(fetchesIn('wget -q https://example.com/data.csv\n')).toEqual(['wget']);
    expect(fetchesIn('cd /tests && npm ci && npx jest\n')).toEqual(['npm install']);
    expect(fetchesIn('apt-get -o Acquire::Retries=0 update\n')).toEqual(['apt-get update']);
  });

  it('nothing for a test.sh that runs what the image has, or names a fetcher only in a comment', () => {
    expect(fetchesIn('#!/bin/bash\n# we used to: pip install pytest\npython3 -m pytest /tests -q\ncurl -s http://localhost:8080/health\n')).toEqual([]);
    expect(fetchesIn('python3 /tests/check_pipeline.py\n')).toEqual([]);
  });
});

describe("the import's note", () => {
  let tmp: string;
  beforeAll(async () => {
    tmp = await mkdtemp(path.join(tmpdir(), 'tests-fetch-'));
  });
  afterAll(async () => {
    if (tmp) await rm(tmp, { recursive: true, force: true });
  });

  it('the needs-network fixture: one note naming what it fetches and the docs', async () => {
    const notes = await testsFetchNotes([{ step: null, tests: [path.join(FIXTURE, 'tests')] }]);
    expect(notes).toEqual([
      {
        field: 'tests/test.sh',
        message: expect.stringMatching(
          /^its tests fetch at run time \(apt-get install, apt-get update, curl … \| sh, uvx\): envs have no network here.*verifier_failed.*docs\/harbor\.md#tests-that-fetch/,
        ),
      },
    ]);
  });

  it("a step's own test.sh wins over the task's (as the import merges them)", async () => {
    const task = path.join(tmp, 'tests');
    const step = path.join(tmp, 'steps/two/tests');
    await mkdir(task, { recursive: true });
    await mkdir(step, { recursive: true });
    await writeFile(path.join(task, 'test.sh'), 'pip install pytest\npytest /tests\n');
    await writeFile(path.join(step, 'test.sh'), 'python3 -m pytest /tests\n');
    // step one has only the task's (fetches); step two its own (does not)
    const one = await testsFetchNotes([{ step: 'one', tests: [task] }]);
    expect(one.map((n) => n.field)).toEqual(["steps/one/tests/test.sh (or the task's)"]);
    expect(await testsFetchNotes([{ step: 'two', tests: [task, step] }])).toEqual([]);
  });

  it('no task of the shipped dataset fetches in its tests', async () => {
    for (const name of await readdir(DATASET, { withFileTypes: true })) {
      if (!name.isDirectory()) continue;
      expect(await testsFetchNotes([{ step: null, tests: [path.join(DATASET, name.name, 'tests')] }]), name.name).toEqual([]);
    }
  });
});
