/** Plays a task of a served bundle over /ws, as a client does: reset, then calls, each reply kept. */
import { expect } from 'vitest';
import { ServerSession, clientFrames } from '../../src/client/session.js';
import type { ServerFrame } from '../../src/protocol/frames.js';

/** replies as the wire has them (read loosely: the tests look into results) */

type Reply = { observation: any; reward: number | null; done: boolean };

/** generous: a verifier may run for a while, and the engine is shared */
const REPLY_MS = 300_000;

export interface Played {
  episodeId: string;

  reset: { tools: { name: string }[]; messages: { role: string; content: string }[]; [k: string]: any };
  steps: Reply[];
  /** the last reply (the reset's when no call was made) */
  last: Reply;
  /** the steps that got an error or an is_error result */
  errors(): Reply[];
  call(tool: string, args?: Record<string, unknown>): Promise<Reply>;
  close(): Promise<void>;
}

function reply(f: ServerFrame): Reply {
  if (f.type !== 'observation') throw new Error(`expected an observation, got ${JSON.stringify(f).slice(0, 500)}`);
  return f.data as Reply;
}

export async function playOverWs(httpUrl: string, taskId: string, calls: { tool: string; arguments?: Record<string, unknown> }[]): Promise<Played> {
  const session = await ServerSession.open(`${httpUrl.replace(/^http/, 'ws')}/ws`);
  const first = reply(await session.request(clientFrames.reset({ task_id: taskId }), { timeoutMs: REPLY_MS }));
  expect(first.done).toBe(false);
  const steps: Reply[] = [];
  const played: Played = {
    episodeId: first.observation.episode_id as string,
    reset: first.observation,
    steps,
    last: first,
    errors: () => steps.filter((s) => s.observation.error != null || s.observation.result?.is_error === true),
    call: async (tool, args = {}) => {
      const r = reply(await session.request(clientFrames.call(tool, args), { timeoutMs: REPLY_MS }));
      steps.push(r);
      played.last = r;
      return r;
    },
    close: async () => {
      session.send(clientFrames.close());
      session.ws.close();
    },
  };
  for (const c of calls) {
    const r = await played.call(c.tool, c.arguments ?? {});
    if (r.done) break;
  }
  return played;
}
