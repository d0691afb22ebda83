/**
 * EnvInspector's look after a failed call: it looks again while the env still runs (the engine may
 * mark a dropped env exited a moment later), and the first look that settles the matter is the
 * answer. A fork bomb's process count swings under its limit: a look between its forks must not
 * overrule an earlier one that found it at the limit (CI once ended such an episode
 * env_unreachable, retryable, from its last look alone).
 */
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { EnvInspector } from '../../src/episodes/diagnosis.js';
import type { EnvDiagnosis, EnvHandle } from '../../src/sandbox/sandbox.js';

const handle = { episodeId: 'e1', containerId: 'c1' } as unknown as EnvHandle;
const running: EnvDiagnosis = { running: true, exitCode: null, oomKilled: false, logTail: '' };

function inspector(looks: EnvDiagnosis[]): { inspector: EnvInspector; asked: () => number } {
  let asked = 0;
  const sandbox = { diagnose: async () => looks[Math.min(asked++, looks.length - 1)]! };
  return { inspector: new EnvInspector(sandbox, () => handle, { episode_id: 'e1', task_id: 't' }, pino({ level: 'silent' })), asked: () => asked };
}

describe('EnvInspector', () => {
  it('a look that finds the processes at the pids limit is the answer, whatever later looks would read', async () => {
    const atLimit = { ...running, pidsAtLimit: 'its processes held 127 of its pids limit of 128: no new process could start' };
    const { inspector: i, asked } = inspector([running, atLimit, running]);
    expect(await i.verdict()).toMatchObject({ reason: 'env_pids_exhausted', what: atLimit.pidsAtLimit });
    expect(asked()).toBe(2);
  });

  it('an env that runs and answers nothing through every look is unreachable; one that exited is the answer at once', async () => {
    const still = inspector([running]);
    expect((await still.inspector.verdict()).reason).toBe('env_unreachable');
    expect(still.asked()).toBe(10);
    const exited = inspector([running, { ...running, running: false, exitCode: 3 }]);
    expect(await exited.inspector.verdict()).toMatchObject({ reason: 'env_crashed' });
    expect(exited.asked()).toBe(2);
  });
});
