/**
 * A task's golden solution is for `check` alone: no client ever reads it. The fixture, its first
 * task's golden solution carrying a marker, is served with --record; an episode of that task is
 * played over /ws; the marker is in none of what the server answers or writes: /tasks, /bundle,
 * /toolsets, the reset observation, the steps, the console's routes (transcripts included) and
 * the --record file.
 */
import { cp, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FIXTURE_BUNDLE } from '../support/app.js';
import { startProcessServer, type ProcessServer } from '../support/process-server.js';
import { WsClient } from '../../scripts/lib/ws-client.js';

const MARKER = 'golden-marker-7f3a-never-served';

describe('golden solutions are never served', () => {
  let tmp: string;
  let s: ProcessServer;
  const seen: string[] = [];
  const get = async (p: string) => {
    const res = await fetch(`${s.url}${p}`);
    expect(res.status, p).toBe(200);
    const text = await res.text();
    seen.push(`${p}: ${text}`);
    return text;
  };

  beforeAll(async () => {
    tmp = await mkdtemp(path.join(tmpdir(), 'openenv-golden-'));
    const bundle = path.join(tmp, 'bundle');
    await cp(FIXTURE_BUNDLE, bundle, { recursive: true });
    const file = path.join(bundle, 'tasks/train.jsonl');
    const lines = (await readFile(file, 'utf8')).split('\n');
    const first = JSON.parse(lines[0] as string) as Record<string, unknown>;
    first.golden = [
      { tool: 'echo', arguments: { text: MARKER } },
      { tool: 'end_turn', arguments: { answer: MARKER } },
    ];
    lines[0] = JSON.stringify(first);
    await writeFile(file, lines.join('\n'));
    s = await startProcessServer({ record: path.join(tmp, 'record') }, { bundle });
  });
  afterAll(async () => {
    await s?.stop();
    await rm(tmp, { recursive: true, force: true });
  });

  it('is in no route, observation, transcript or record', async () => {
    // the bundle as loaded holds it: check plays it
    expect(s.app.openenv.bundle.byId.get('fx-echo-0')?.golden?.[0]?.arguments).toEqual({ text: MARKER });

    for (const p of ['/tasks', '/tasks?split=train', '/tasks/fx-echo-0', '/bundle', '/toolsets', '/metadata', '/schema', '/console/tasks', '/console/overview'])
      await get(p);
    const ws = await WsClient.open(s.url);
    const reset = await ws.reset({ task_id: 'fx-echo-0', seed: 1 });
    const id = reset.data.observation.episode_id as string;
    const step = await ws.call('echo', { text: 'hello' });
    const end = await ws.call('end_turn');
    expect(end.data.done).toBe(true);
    seen.push(JSON.stringify([reset, step, end]));
    await ws.close();
    await get('/console/episodes');
    await get(`/console/episodes/${id}`);
    await s.stop();
    const recorded = await readdir(path.join(tmp, 'record'));
    expect(recorded.length).toBe(1);
    const record = await readFile(path.join(tmp, 'record', recorded[0] as string), 'utf8');
    expect(record).toContain(id);
    seen.push(record);

    for (const text of seen) {
      expect(text).not.toContain(MARKER);
      expect(text).not.toContain('"golden"');
    }
  });
});
