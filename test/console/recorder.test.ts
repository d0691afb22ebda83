/**
 * The rollout log never corrupts. A write cut short by a full disk leaves the
 * file at its last complete line (pandas' read_json(lines=True) reads it whole), counted and
 * logged; a --record path that is a file, or cannot be created, is refused at start.
 */
import { spawnSync } from 'node:child_process';
import { appendFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import * as fsp from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { checkRecordDir, dailyFile, EpisodeRecorder, type RecorderFs } from '../../src/console/recorder.js';
import { FIXTURE_BUNDLE } from '../support/app.js';
import { captureLog } from '../support/log-capture.js';
import { SERVE_JS } from '../support/serve-process.js';

const dir = mkdtempSync(join(tmpdir(), 'openenv-recorder-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/**
 * A disk that fills: while `full`, an append writes what fits (`room` bytes) and fails with
 * ENOSPC, as write(2) does; truncate still works (it frees space).
 */
function fillingDisk(room: number) {
  const state = { full: false, room, truncateFails: false };
  const fs: RecorderFs = {
    appendFile: async (file, data, opts) => {
      if (!state.full) return fsp.appendFile(file, data, opts);
      appendFileSync(file, data.slice(0, state.room));
      throw Object.assign(new Error('ENOSPC: no space left on device, write'), { code: 'ENOSPC' });
    },
    stat: (f) => fsp.stat(f),
    truncate: async (f, l) => {
      if (state.truncateFails) throw Object.assign(new Error('EIO: i/o error'), { code: 'EIO' });
      return fsp.truncate(f, l);
    },
    mkdir: (d, o) => fsp.mkdir(d, o),
  };
  return { fs, state };
}

/** every line of the file, each parsed: throws on a line that is not one JSON record */
function readLines(file: string): { episode_id: string }[] {
  const text = readFileSync(file, 'utf8');
  expect(text.endsWith('\n')).toBe(true);
  return text
    .slice(0, -1)
    .split('\n')
    .map((l) => JSON.parse(l) as { episode_id: string });
}

describe('the rollout log never corrupts', () => {
  it('a write cut short by ENOSPC is cut back to the last complete line; the next record is whole; counted and logged', async () => {
    const at = Date.UTC(2026, 11, 1);
    const log = captureLog({ level: 'info' });
    const disk = fillingDisk(37);
    const r = new EpisodeRecorder(join(dir, 'enospc'), log.logger, { now: () => at, fs: disk.fs });
    r.write({ episode_id: 'ep-1', pad: 'a'.repeat(100) });
    await r.flush();
    disk.state.full = true;
    r.write({ episode_id: 'ep-2', pad: 'b'.repeat(100) });
    await r.flush();
    disk.state.full = false;
    r.write({ episode_id: 'ep-3', pad: 'c'.repeat(100) });
    await r.flush();
    const lines = readLines(dailyFile(join(dir, 'enospc'), at));
    expect(lines.map((l) => l.episode_id)).toEqual(['ep-1', 'ep-3']);
    expect(r.stats()).toMatchObject({ written: 2, failed: 1 });
    expect(log.text()).toMatch(/"event":"record_failed".*ENOSPC.*its last complete line/);
  });

  it('when the cut back fails too, the next record starts on a fresh line', async () => {
    const at = Date.UTC(2026, 11, 2);
    const disk = fillingDisk(20);
    const log = captureLog({ level: 'info' });
    const r = new EpisodeRecorder(join(dir, 'eio'), log.logger, { now: () => at, fs: disk.fs });
    r.write({ episode_id: 'ep-1' });
    await r.flush();
    disk.state.full = true;
    disk.state.truncateFails = true;
    r.write({ episode_id: 'ep-2', pad: 'x'.repeat(100) });
    await r.flush();
    disk.state.full = false;
    r.write({ episode_id: 'ep-3' });
    await r.flush();
    const text = readFileSync(dailyFile(join(dir, 'eio'), at), 'utf8');
    const lines = text.slice(0, -1).split('\n');
    // the cut line stands alone (one bad line, not two records joined): the others parse
    expect(lines).toHaveLength(3);
    expect(JSON.parse(lines[0]!)).toEqual({ episode_id: 'ep-1' });
    expect(() => JSON.parse(lines[1]!)).toThrow();
    expect(JSON.parse(lines[2]!)).toEqual({ episode_id: 'ep-3' });
    expect(log.text()).toMatch(/nor cut it back: the next record starts on a fresh line/);
  });

  it('a --record path that is a file, or under a file, is refused at start with a clear message', async () => {
    const file = join(dir, 'a-file');
    writeFileSync(file, 'x');
    await expect(checkRecordDir(file)).rejects.toThrow(/--record .*a-file is a file, not a folder/);
    await expect(checkRecordDir(join(file, 'sub'))).rejects.toThrow(/--record .*cannot create the folder \(ENOTDIR\)/);
    await expect(checkRecordDir(join(dir, 'fresh', 'folder'))).resolves.toBeUndefined();

    // the process: exit 2 before anything else starts (no engine needed to say so)
    const run = spawnSync(process.execPath, [SERVE_JS, FIXTURE_BUNDLE, '--record', file], { encoding: 'utf8', timeout: 30_000 });
    expect(run.status).toBe(2);
    expect(run.stderr).toMatch(/error: --record .*a-file is a file, not a folder/);
  });
});
