/**
 * The import's mapping of Harbor 1.4's separate verifier environment, without Docker:
 * `environment_mode = "separate"` (the task's or a step's) becomes a clean verifier whose outputs
 * are /logs/artifacts and the declared artifacts' sources (paths or { source, destination });
 * a shared verifier drops the artifacts with a note; a verifier environment of its own, an
 * unknown mode, a relative artifact or one in the toolchain are refused by name. The shipped
 * fixture imports into a bundle that loads.
 */
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { importHarbor, type ImportOptions } from '../../src/authoring/harbor/index.js';
import { readTaskConfig } from '../../src/authoring/harbor/task-config.js';
import { loadBundle } from '../../src/bundle/index.js';

const FIXTURE = path.resolve(import.meta.dirname, '../fixtures/harbor-tasks/separate-verifier');
const made: string[] = [];
afterAll(() => {
  for (const d of made) rmSync(d, { recursive: true, force: true });
});
const temp = () => {
  const d = mkdtempSync(path.join(os.tmpdir(), 'harbor-separate-'));
  made.push(d);
  return d;
};
const read = (toml: string) => readTaskConfig(toml, { ignoreInternet: false });
const opts = (sources: string[], out: string): ImportOptions => ({ sources, out, baseImages: [], ignoreInternet: false, skipRefused: false, force: false });
const rows = (file: string) =>
  readFileSync(file, 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as Record<string, any>);

describe('task.toml: where the verifier runs', () => {
  it('"separate" is taken, with the artifacts\' sources (either form, normalised, once each)', () => {
    const r = read(
      'artifacts = ["/app/out.txt", { source = "/app/logs/", destination = "logs" }, "/app/./out.txt"]\n[verifier]\nenvironment_mode = "separate"\n',
    );
    expect(r.refusals).toEqual([]);
    expect(r.notes).toEqual([]);
    expect(r.config).toMatchObject({ verifierMode: 'separate', artifacts: ['/app/out.txt', '/app/logs/'] });
  });

  it('"shared" (or unsaid) keeps the verifier in place and notes the artifacts as not collected', () => {
    for (const toml of ['artifacts = ["/app/x"]\n[verifier]\nenvironment_mode = "shared"\n', 'artifacts = ["/app/x"]\n']) {
      const r = read(toml);
      expect(r.refusals).toEqual([]);
      expect(r.config!.verifierMode === undefined || r.config!.verifierMode === 'shared').toBe(true);
      expect(r.notes).toEqual([{ field: 'artifacts', message: 'not collected here (a shared verifier sees the whole container): dropped' }]);
    }
  });

  it('refuses by name: a verifier environment of its own, an unknown mode, artifacts that are relative or in the toolchain', () => {
    const r = read(
      'artifacts = ["out.txt", "/usr/local/bin/tool", "/", 3]\n[verifier]\nenvironment_mode = "elsewhere"\n[verifier.environment]\ndocker_image = "grader:1"\n',
    );
    expect(r.refusals).toEqual([
      { field: '[verifier] environment_mode', message: '"elsewhere": expected "shared" or "separate"' },
      { field: '[verifier] environment', message: expect.stringMatching(/^a verifier environment of its own .*a fresh container of the task's own image/) },
      { field: 'artifacts', message: 'expected an absolute path or a table with an absolute source, got "out.txt"' },
      { field: 'artifacts', message: expect.stringMatching(/^\/usr\/local\/bin\/tool holds or is within \/usr: a separate verifier takes the agent's work/) },
      { field: 'artifacts', message: expect.stringMatching(/^\/ is the whole filesystem/) },
      { field: 'artifacts', message: 'expected an absolute path or a table with an absolute source, got 3' },
    ]);
  });

  it('an empty [verifier.environment] adds nothing and is taken', () => {
    const r = read('[verifier]\nenvironment_mode = "separate"\n[verifier.environment]\n');
    expect(r.refusals).toEqual([]);
    expect(r.config!.verifierMode).toBe('separate');
  });

  it("a step's [steps.verifier] environment_mode and its artifacts", () => {
    const r = read(
      'schema_version = "1.4"\nartifacts = ["/app/shared.txt"]\n[[steps]]\nname = "one"\nartifacts = ["/app/one.txt"]\n[[steps]]\nname = "two"\nartifacts = ["/app/two.txt"]\n[steps.verifier]\nenvironment_mode = "separate"\n',
    );
    expect(r.refusals).toEqual([]);
    expect(r.config!.steps).toMatchObject([
      { name: 'one', artifacts: ['/app/one.txt'] },
      { name: 'two', verifierMode: 'separate', artifacts: ['/app/two.txt'] },
    ]);
    // step one's verifier is shared: its own artifacts are not collected; the task's go to step two's
    expect(r.notes).toEqual([{ field: '[[steps]] 1 artifacts', message: 'not collected here (a shared verifier sees the whole container): dropped' }]);
  });
});

describe('import: a separate verifier becomes a clean one', () => {
  it("the fixture: the row's verifier is clean with /logs/artifacts and /app/out.txt; the bundle loads", async () => {
    const out = path.join(temp(), 'out');
    const r = await importHarbor(opts([FIXTURE], out));
    expect(r.refused).toEqual([]);
    expect(r.written).toBe(true);
    const [row] = rows(path.join(out, 'tasks/train.jsonl'));
    expect(row!.verifier).toEqual({ tests: 'verifiers/separate-verifier', timeout_s: 60, mode: 'clean', outputs: ['/logs/artifacts', '/app/out.txt'] });
    const bundle = await loadBundle(out);
    expect(bundle.splits.train![0]!.verifier).toMatchObject({ mode: 'clean', outputs: ['/logs/artifacts', '/app/out.txt'], allow_changes: [], protect: [] });
  });

  it("a step's separate verifier: that turn's verifier is clean, given the task's and the step's artifacts; the other stays in place", async () => {
    const root = temp();
    const dir = path.join(root, 'two-steps');
    const files: Record<string, string> = {
      'task.toml':
        'schema_version = "1.4"\nartifacts = ["/app/shared.txt"]\n[environment]\nallow_internet = false\nworkdir = "/app"\n[[steps]]\nname = "one"\n[[steps]]\nname = "two"\nartifacts = [{ source = "/app/two.txt" }]\n[steps.verifier]\nenvironment_mode = "separate"\n',
      'environment/Dockerfile': 'FROM debian:bookworm\nWORKDIR /app\n',
    };
    for (const s of ['one', 'two']) {
      files[`steps/${s}/instruction.md`] = `Do ${s}.\n`;
      files[`steps/${s}/tests/test.sh`] = 'echo 1 > /logs/verifier/reward.txt\n';
      files[`steps/${s}/solution/solve.sh`] = `echo ${s} > /app/${s}.txt\n`;
    }
    for (const [rel, content] of Object.entries(files)) {
      mkdirSync(path.dirname(path.join(dir, rel)), { recursive: true });
      writeFileSync(path.join(dir, rel), content);
    }
    const out = path.join(root, 'out');
    const r = await importHarbor(opts([root], out));
    expect(r.refused).toEqual([]);
    const [row] = rows(path.join(out, 'tasks/train.jsonl'));
    expect(row!.per_turn[0].verifier.mode).toBeUndefined();
    expect(row!.per_turn[1].verifier).toMatchObject({ mode: 'clean', outputs: ['/logs/artifacts', '/app/shared.txt', '/app/two.txt'] });
    const bundle = await loadBundle(out);
    expect(bundle.splits.train![0]!.per_turn![1]!.verifier).toMatchObject({ mode: 'clean' });
  });
});

describe('a separate verifier and compose sidecars', () => {
  it('are refused together, naming the services: the clean container is on no network and would not reach them', async () => {
    const root = temp();
    const src = path.join(root, 'sidecar-separate');
    cpSync(path.resolve(import.meta.dirname, '../fixtures/harbor-tasks/compose-sidecar'), src, { recursive: true });
    const toml = path.join(src, 'task.toml');
    writeFileSync(toml, readFileSync(toml, 'utf8').replace(/^\[verifier\]$/m, '[verifier]\nenvironment_mode = "separate"'));
    expect(readFileSync(toml, 'utf8')).toContain('environment_mode = "separate"');
    const r = await importHarbor({ ...opts([src], path.join(root, 'out')), baseImages: [] });
    expect(r.written).toBe(false);
    expect(r.refused.flatMap((t) => t.findings.map((f) => `${f.field}: ${f.message}`))).toEqual([
      expect.stringMatching(/^\[verifier\] environment_mode: "separate" with the services beside main \(db\): .* on no network/),
    ]);
  });
});
