import { describe, expect, it } from 'vitest';
import type { BuiltinTools } from '../../../src/episodes/builtin-tools.js';
import { ShellToolsetPlay } from '../../../src/episodes/plays/shell-toolset.js';
import { ContainerGoneError } from '../../../src/sandbox/container-exec.js';
import { bundle, fakeCaller, fakeHost, playEnvOf, task } from './host.js';

function fakeBuiltin(fail?: Error) {
  const seen = { calls: [] as string[], interrupted: [] as string[], closed: 0 };
  const builtin = {
    has: (name: string) => name === 'exec_command',
    async call(name: string) {
      seen.calls.push(name);
      if (fail) throw fail;
      return { observation: { tool_name: name, result: null, error: null }, reward: null, done: false };
    },
    interrupt: (why: string) => seen.interrupted.push(why),
    close: async () => void seen.closed++,
  } as unknown as BuiltinTools;
  return { builtin, seen };
}

describe('ShellToolsetPlay', () => {
  it("serves its built-in tools in the container and the env's own through the env", async () => {
    const caller = fakeCaller({ '/reset': () => ({ status: 200, body: {} }), '/tools/call': () => ({ status: 200, body: { text: 'env' } }) });
    const { host } = fakeHost(task(), bundle({ builtin: true }), caller);
    const { builtin, seen } = fakeBuiltin();
    const play = new ShellToolsetPlay(host);
    expect(play.tools.map((t) => t.name)).toEqual(['echo', 'exec_command']);
    await play.attach(playEnvOf({ builtin }));
    await play.call('exec_command', { cmd: 'ls' });
    await play.call('echo', {});
    expect(seen.calls).toEqual(['exec_command']);
    expect(caller.calls.map((c) => c.path)).toEqual(['/reset', '/tools/call']);
  });

  it("a shell that cannot run is the env's failure", async () => {
    const { host, state } = fakeHost(task(), bundle({ builtin: true, kind: 'shell' }));
    const play = new ShellToolsetPlay(host);
    await play.attach(playEnvOf({ builtin: fakeBuiltin(new ContainerGoneError('gone')).builtin }));
    const out = await play.call('exec_command', {});
    expect(out.done).toBe(true);
    expect(state.failure).toMatchObject({
      reason: 'env_crashed',
      phase: 'tool',
      message: "tool `exec_command` failed in the env's container: gone (the env exited)",
    });
  });

  it('stops its command in flight and closes its shell', async () => {
    const { host } = fakeHost(task(), bundle({ builtin: true, kind: 'shell' }));
    const { builtin, seen } = fakeBuiltin();
    const play = new ShellToolsetPlay(host);
    await play.attach(playEnvOf({ builtin }));
    play.interrupt('budget');
    await play.close();
    expect(seen).toMatchObject({ interrupted: ['budget'], closed: 1 });
  });
});
