/** Just what the console's history reads of an episode (src/console/history.ts), with its teardown in the test's hands. */
import type { Episode } from '../../src/episodes/episode.js';

/** its mutable parts typed as a test writes them (`answering` too, via Object.assign: Episode's is a getter) */
export type FakeEpisode = Episode & { steps: number; phase: string; endReason: string | null; envId: string };

export function fakeEpisode(id: string, taskId = 'big-task'): { ep: FakeEpisode; tearDown: () => void } {
  let tornDown!: () => void;
  const ep = {
    id,
    envId: id,
    clientLabel: null,
    task: { task_id: taskId, split: 'train', index: 0, toolset: 'default', groups: {} },
    transport: 'ws',
    phase: 'running',
    createdAt: Date.now(),
    turn: 1,
    steps: 0,
    seed: null,
    endReason: null as string | null,
    reward: null as number | null,
    scores: null,
    failure: null,
    answering: false,
    timings: () => ({ queued_s: 0, deploy_s: 0.1, running_s: 1 }),
    tornDown: new Promise<void>((r) => (tornDown = r)),
  };
  return { ep: ep as unknown as FakeEpisode, tearDown: () => tornDown() };
}
