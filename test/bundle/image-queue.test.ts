/** The env images' build queue: manifest order, a bound, a waited-for image first, a stop. */
import { describe, expect, it } from 'vitest';
import { ImageQueue } from '../../src/bundle/image-queue.js';

/** jobs that finish when told: `started` in the order they began */
function jobs() {
  const started: string[] = [];
  const finish = new Map<string, () => void>();
  const run = (key: string) => () =>
    new Promise<void>((r) => {
      started.push(key);
      finish.set(key, r);
    });
  const end = async (key: string) => {
    finish.get(key)!();
    // the queue starts the next one once the job's promise settles
    await new Promise((r) => setImmediate(r));
  };
  return { started, run, end };
}

describe('the image queue', () => {
  it('runs jobs in the order added, at most `limit` at once', async () => {
    const q = new ImageQueue(2);
    const j = jobs();
    for (const k of ['a', 'b', 'c', 'd']) q.add(k, j.run(k));
    expect(j.started).toEqual(['a', 'b']);
    expect(q.queued).toEqual(['c', 'd']);
    await j.end('b');
    expect(j.started).toEqual(['a', 'b', 'c']);
    expect(q.active.sort()).toEqual(['a', 'c']);
    await j.end('a');
    await j.end('c');
    await j.end('d');
    await q.idle();
    expect(j.started).toEqual(['a', 'b', 'c', 'd']);
  });

  it('starts a waited-for job at once beside the background ones; one running or unknown stays where it is', async () => {
    const q = new ImageQueue(1);
    const j = jobs();
    for (const k of ['a', 'b', 'c', 'd', 'e']) q.add(k, j.run(k));
    expect(q.first('d')).toBe(true);
    expect(q.first('a')).toBe(false);
    expect(q.first('zz')).toBe(false);
    // d runs beside a (the background bound is for background jobs)
    expect(j.started).toEqual(['a', 'd']);
    expect(q.queued).toEqual(['b', 'c', 'e']);
    // a second urgent one waits for the first (limit 1 urgent at once), first in line
    expect(q.first('e')).toBe(true);
    expect(q.queued).toEqual(['e', 'b', 'c']);
    await j.end('a');
    // no background job starts while an urgent one runs or waits
    expect(j.started).toEqual(['a', 'd']);
    await j.end('d');
    expect(j.started).toEqual(['a', 'd', 'e']);
    await j.end('e');
    expect(j.started).toEqual(['a', 'd', 'e', 'b']);
  });

  it('holds background jobs while an urgent one runs, then goes on in order within the bound', async () => {
    const q = new ImageQueue(2);
    const j = jobs();
    for (const k of ['a', 'b', 'c', 'd', 'e', 'f']) q.add(k, j.run(k));
    expect(j.started).toEqual(['a', 'b']);
    expect(q.first('f')).toBe(true);
    expect(j.started).toEqual(['a', 'b', 'f']);
    await j.end('a');
    await j.end('b');
    expect(j.started).toEqual(['a', 'b', 'f']);
    await j.end('f');
    expect(j.started).toEqual(['a', 'b', 'f', 'c', 'd']);
    expect(q.active.sort()).toEqual(['c', 'd']);
  });

  it('queues a key once; a failed job frees its place', async () => {
    const q = new ImageQueue(1);
    let runs = 0;
    q.add('a', () => {
      runs++;
      return Promise.reject(new Error('build failed'));
    });
    q.add('a', () => {
      runs++;
      return Promise.resolve();
    });
    const j = jobs();
    q.add('b', j.run('b'));
    await new Promise((r) => setImmediate(r));
    expect(runs).toBe(1);
    expect(j.started).toEqual(['b']);
  });

  it('once stopped starts nothing, names what it dropped, and is idle when the running ones end', async () => {
    const q = new ImageQueue(1);
    const j = jobs();
    for (const k of ['a', 'b', 'c']) q.add(k, j.run(k));
    expect(q.stop()).toEqual(['b', 'c']);
    let idle = false;
    void q.idle().then(() => (idle = true));
    await new Promise((r) => setImmediate(r));
    expect(idle).toBe(false);
    await j.end('a');
    expect(idle).toBe(true);
    q.add('d', j.run('d'));
    expect(j.started).toEqual(['a']);
  });

  it('refuses a bound below one', () => {
    expect(() => new ImageQueue(0)).toThrow(/at least one/);
  });
});
