/**
 * The engine-free parts of the shell toolset and the verifier: output bounds, the end line found
 * however the stream is cut, the engine's frames split anywhere, commands encoded for the shell's
 * reading (checked with this machine's own bash), reward files, turn scores and min_reward, and how
 * the sandbox creates a shell env's container (the one path every env's container takes).
 */
import { execFileSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import type Dockerode from 'dockerode';
import { createEnvContainer, type ToolboxMount } from '../../src/sandbox/docker/containers.js';
import type { EnvSpec } from '../../src/sandbox/sandbox.js';
import { keeperCommand } from '../../src/sandbox/toolbox.js';
import { encodeCommand, FrameDemuxer, pathKind, PATH_MODE } from '../../src/tools/shell/index.js';
import { AgentIntervals, BoundedOutput, EndMarkerScanner, startTimeOf } from '../../src/container/index.js';
import { DEFAULT_TURN_REWARD, combineTurnScores, meetsMinReward, parseRewardJson, parseRewardText } from '../../src/verifier/index.js';

describe('BoundedOutput', () => {
  it('keeps everything under its bounds, and the head, a mark and the tail over them', () => {
    const small = new BoundedOutput(4, 4);
    small.push(Buffer.from('abc'));
    small.push(Buffer.from('defgh'));
    expect(small.render()).toEqual({ text: 'abcdefgh', totalBytes: 8, droppedBytes: 0 });
    const big = new BoundedOutput(4, 4);
    for (let i = 0; i < 1000; i++) big.push(Buffer.from('0123456789'));
    expect(big.render()).toEqual({
      text: '0123\n[... 9992 bytes dropped: the output was 10000 bytes; its first 4 and last 4 are shown ...]\n6789',
      totalBytes: 10000,
      droppedBytes: 9992,
    });
  });

  it('cuts at character boundaries and replaces what is not UTF-8', () => {
    const o = new BoundedOutput(3, 3);
    o.push(Buffer.from('éééééé'));
    const r = o.render();
    expect(r.text).toBe('é\n[... 8 bytes dropped: the output was 12 bytes; its first 2 and last 2 are shown ...]\né');
    const bad = new BoundedOutput(100, 100);
    bad.push(Buffer.from([0x61, 0xff, 0x62]));
    expect(bad.render().text).toBe('a\uFFFDb');
  });
});

describe('EndMarkerScanner', () => {
  it('finds the end line however the stream is cut, and passes on what follows', () => {
    const stream = Buffer.from('output line\nno newline at end\n__OE_END abc123 7 /tmp/some dir\nlater');
    for (let cut = 1; cut < stream.length; cut++) {
      const out = new BoundedOutput(1000, 1000);
      const s = new EndMarkerScanner('abc123', out);
      expect(s.push(stream.subarray(0, cut)) && cut < 49).toBe(false);
      s.push(stream.subarray(cut));
      expect(s.end).toEqual({ exitCode: 7, rest: '/tmp/some dir' });
      expect(out.render().text).toBe('output line\nno newline at end');
      expect(s.leftover.toString()).toBe('later');
    }
  });

  it('is not fooled by another nonce, and gives back what it held when the stream ends without the line', () => {
    const out = new BoundedOutput(1000, 1000);
    const s = new EndMarkerScanner('abc123', out);
    expect(s.push(Buffer.from('\n__OE_END other 0 /\n\n__OE_END abc'))).toBe(false);
    s.flush();
    expect(out.render().text).toBe('\n__OE_END other 0 /\n\n__OE_END abc');
  });
});

describe('FrameDemuxer', () => {
  it('splits stdout and stderr frames cut anywhere', () => {
    const frame = (type: number, text: string) => {
      const h = Buffer.alloc(8);
      h[0] = type;
      h.writeUInt32BE(Buffer.byteLength(text), 4);
      return Buffer.concat([h, Buffer.from(text)]);
    };
    const all = Buffer.concat([frame(1, 'hello '), frame(2, 'oops'), frame(1, 'world'), frame(1, '')]);
    for (let cut = 0; cut <= all.length; cut++) {
      const got = { 1: '', 2: '' };
      const d = new FrameDemuxer((s, p) => (got[s] += p.toString()));
      d.push(all.subarray(0, cut));
      d.push(all.subarray(cut));
      expect(got).toEqual({ 1: 'hello world', 2: 'oops' });
    }
  });
});

describe('encodeCommand', () => {
  it("gives bash's printf %b the exact bytes back: quotes, backslashes, newlines, UTF-8, control bytes", () => {
    const commands = [
      'echo "a b" \'c\' \\n $HOME `x`',
      'line1\nline2\r\n\ttab',
      'é ✓ 😀 \\x41 \\0101 %b %s',
      '\u0001\u001b[31m\u007f',
      'ends with backslash \\',
    ];
    for (const c of commands) {
      const encoded = encodeCommand(c);
      expect(encoded).not.toMatch(/[\n\r]/);
      const back = execFileSync('bash', ['-c', 'printf -v x %b "$1"; printf %s "$x"', '_', encoded]);
      expect(back.toString('utf8')).toBe(c);
    }
  });
});

describe('reward files', () => {
  it('reads reward.txt as one number, reward.json as named numbers, and says what a malformed one holds', () => {
    expect(parseRewardText(' 0.75\n')).toEqual({ scores: { reward: 0.75 }, file: 'reward.txt' });
    expect(parseRewardText('1e0')).toEqual({ scores: { reward: 1 }, file: 'reward.txt' });
    expect(parseRewardText('')).toEqual({ problem: '/logs/verifier/reward.txt holds "", not one number' });
    expect(parseRewardText('NaN')).toMatchObject({ problem: expect.stringContaining('not one number') });
    expect(parseRewardJson('{"a": 1, "b": 0.5}')).toEqual({ scores: { a: 1, b: 0.5 }, file: 'reward.json' });
    expect(parseRewardJson('[1]')).toMatchObject({ problem: expect.stringContaining('not an object of named numbers') });
    expect(parseRewardJson('{"a": null}')).toEqual({ problem: '/logs/verifier/reward.json\'s "a" is null, not a finite number' });
  });
});

describe('turn scores', () => {
  it("mean (Harbor's, the default): over the verified turns, a missing score counting 0; an early stop leaves the unplayed turns out", () => {
    expect(DEFAULT_TURN_REWARD).toBe('mean');
    expect(combineTurnScores('mean', [{ reward: 1 }, { reward: 0.5 }], 2)).toEqual({ reward: 0.75 });
    // three steps, step 1 passed, step 2 under its min_reward: Harbor's 0.5, not 1/3
    expect(combineTurnScores('mean', [{ reward: 1 }, { reward: 0 }], 3)).toEqual({ reward: 0.5 });
    expect(combineTurnScores('mean', [{ reward: 0.8 }], 3)).toEqual({ reward: 0.8 });
    // per score: a verified turn that did not report a score counts 0 for it (reward.json's keys)
    expect(combineTurnScores('mean', [{ a: 1 }, { b: 1 }], 3)).toEqual({ a: 0.5, b: 0.5 });
    expect(combineTurnScores('mean', [{ correctness: 1, format: 0.5 }, { correctness: 0.5 }], 2)).toEqual({ correctness: 0.75, format: 0.25 });
  });

  it("final (Harbor's): the last verified turn's scores as reported, the turn that stopped the episode when one did", () => {
    expect(combineTurnScores('final', [{ reward: 0 }, { reward: 0.5 }], 2)).toEqual({ reward: 0.5 });
    expect(combineTurnScores('final', [{ reward: 1 }], 2)).toEqual({ reward: 1 });
    expect(combineTurnScores('final', [{ reward: 1 }, { reward: 0.25 }], 3)).toEqual({ reward: 0.25 });
    // verbatim: a score only an earlier turn reported is not carried
    expect(combineTurnScores('final', [{ a: 1, b: 1 }, { a: 0.5 }], 2)).toEqual({ a: 0.5 });
  });

  it('mean_all_turns and final_or_zero (ours, named by a task): an unplayed turn counts 0, so an early stop never pays', () => {
    expect(combineTurnScores('mean_all_turns', [{ reward: 1 }, { reward: 0 }], 3)).toEqual({ reward: 1 / 3 });
    expect(combineTurnScores('mean_all_turns', [{ reward: 0.8 }], 3)).toEqual({ reward: 0.8 / 3 });
    expect(combineTurnScores('mean_all_turns', [{ a: 1 }, { b: 1 }], 2)).toEqual({ a: 0.5, b: 0.5 });
    expect(combineTurnScores('mean_all_turns', [{ reward: 1 }, { reward: 0.5 }], 2)).toEqual(combineTurnScores('mean', [{ reward: 1 }, { reward: 0.5 }], 2));
    expect(combineTurnScores('final_or_zero', [{ reward: 1 }], 2)).toEqual({ reward: 0 });
    expect(combineTurnScores('final_or_zero', [{ reward: 0 }, { reward: 0.5 }], 2)).toEqual({ reward: 0.5 });
    expect(combineTurnScores('final_or_zero', [{ a: 1, b: 1 }, { a: 0.5 }], 2)).toEqual({ a: 0.5, b: 0 });
  });

  it('refuses more turn scores than turns, and a task none of whose turns was verified', () => {
    expect(() => combineTurnScores('mean', [{}, {}, {}], 2)).toThrow(/3 turn score\(s\) for a task of 2/);
    expect(() => combineTurnScores('mean', [], 2)).toThrow(/no turn of the task was verified/);
    expect(() => combineTurnScores('final', [null], 2)).toThrow(/no turn of the task was verified/);
  });

  it('min_reward: a number gates the reward of the turn, a table each score it names', () => {
    const mean = (s: Record<string, number>) => Object.values(s).reduce((a, b) => a + b, 0) / Object.values(s).length;
    expect(meetsMinReward({ a: 1, b: 0 }, 0.5, mean)).toEqual({ ok: true });
    expect(meetsMinReward({ a: 1, b: 0 }, 0.6, mean)).toEqual({ ok: false, why: "the turn's reward 0.5 is under its min_reward 0.6" });
    expect(meetsMinReward({ reward: 1 }, { reward: 1 }, mean)).toEqual({ ok: true });
    expect(meetsMinReward({ correctness: 0.4 }, { correctness: 0.5 }, mean)).toEqual({
      ok: false,
      why: 'the turn\'s score "correctness" is 0.4, under its min_reward 0.5',
    });
    expect(meetsMinReward({ other: 1 }, { reward: 0 }, mean)).toEqual({
      ok: false,
      why: 'the turn reported no score "reward", which min_reward requires to be at least 0',
    });
  });
});

describe('a shell env container', () => {
  /** the create options the sandbox sends the engine for `env` (a fake engine keeps them) */
  const toolbox: ToolboxMount = { volume: 'openenv-toolbox-i', dir: '/.openenv-toolbox-0123456789ab' };
  async function createOptions(
    env: Partial<EnvSpec>,
    opts: { storageLimit?: boolean; toolbox?: ToolboxMount } = { toolbox },
  ): Promise<Dockerode.ContainerCreateOptions> {
    let sent: Dockerode.ContainerCreateOptions | null = null;
    const docker = { createContainer: async (o: Dockerode.ContainerCreateOptions) => ((sent = o), {}) } as unknown as Dockerode;
    const spec: EnvSpec = {
      name: 'task',
      image: 'img:1',
      port: 8080,
      readyPath: '/health',
      deployTimeoutMs: 60_000,
      resources: { memoryMb: 256, cpus: 0.5, pids: 64 },
      environment: { A: '1' },
      kind: 'shell',
      ...env,
    };
    const network = { id: 'net-id', name: 'net', subnet: {} } as never;
    await createEnvContainer(docker, { instance: 'i', bundle: 'b', episode: 'ep', env: 'task' }, spec, network, 'secret', opts);
    return sent!;
  }

  it("runs the toolbox's keeper as process 1 instead of the image command, its toolbox mounted read-only, on its network only, limited and locked down, without PORT or the env secret", async () => {
    const o = await createOptions({ workdir: '/app', resources: { memoryMb: 256, cpus: 0.5, pids: 64, storageMb: 1024 } }, { storageLimit: true, toolbox });
    expect(o).toMatchObject({ Image: 'img:1', Cmd: keeperCommand(`${toolbox.dir}/busybox`), Env: ['A=1'], WorkingDir: '/app' });
    expect(o.Entrypoint).toBeUndefined();
    expect(o.Labels).toMatchObject({ 'io.openenv.bundle-server.episode': 'ep', 'io.openenv.bundle-server.env': 'task' });
    expect(o.HostConfig!.Mounts).toEqual([{ Type: 'volume', Source: toolbox.volume, Target: toolbox.dir, ReadOnly: true }]);
    expect(o.HostConfig).toMatchObject({
      NetworkMode: 'net',
      // the keeper reaps, and no process of the container can signal it (the engine's init could be left by its child)
      Init: false,
      Memory: 256 * 1024 * 1024,
      MemorySwap: 256 * 1024 * 1024,
      NanoCpus: 5e8,
      CapDrop: ['ALL'],
      SecurityOpt: expect.arrayContaining(['no-new-privileges:true']),
      RestartPolicy: { Name: 'no' },
      StorageOpt: { size: '1024M' },
    });
    expect(o.HostConfig!.PidsLimit).toBeGreaterThanOrEqual(64);
    expect(o.NetworkingConfig).toEqual({ EndpointsConfig: { net: {} } });
    // the storage limit only where the engine can keep it
    expect((await createOptions({ resources: { memoryMb: 6, cpus: 1, pids: 1, storageMb: 5 } })).HostConfig!.StorageOpt).toBeUndefined();
    // a shell env without its toolbox is refused: nothing could hold it up or stop its agent
    await expect(createOptions({}, {})).rejects.toThrow(/needs the toolbox/);
    // an http env keeps its image's command and the engine's init, and gets PORT and the secret
    const http = await createOptions({ kind: 'http', workdir: '/app' });
    expect(http.Cmd).toBeUndefined();
    expect(http.HostConfig!.Init).toBe(true);
    expect(http.WorkingDir).toBeUndefined();
    expect(http.Env).toEqual(expect.arrayContaining(['A=1', 'PORT=8080']));
    expect(http.Env).toHaveLength(3);
  });

  it("reads the engine's file modes", () => {
    expect(pathKind(0o644)).toBe('file');
    expect(pathKind(PATH_MODE.dir + 0o755)).toBe('dir');
    expect(pathKind(PATH_MODE.symlink + 0o777)).toBe('symlink');
    expect(pathKind(PATH_MODE.namedPipe + 0o600)).toBe('other');
  });
});

describe('stopping the agent: the container clock', () => {
  it('reads field 22 of a /proc/<pid>/stat line, whatever the command name holds', () => {
    const fields = (comm: string) => `42 (${comm}) S 1 42 42 0 -1 4194560 100 0 0 0 0 0 0 0 20 0 1 0 1755595 2367488 130 18446744073709551615`;
    expect(startTimeOf(fields('bash'))).toBe(1755595);
    expect(startTimeOf(fields('a ) b (c'))).toBe(1755595);
    expect(() => startTimeOf('not a stat line')).toThrow(/not a \/proc/);
  });

  it("tells the agent's processes by the marks of its parts, a mark's own tick split by who was already there", () => {
    const mark = (tick: number, ...before: string[]) => ({ tick, before: new Set(before) });
    const iv = new AgentIntervals();
    expect(iv.isAgents(5, 100)).toBe(false);
    // the agent's part begins at tick 10, where a setup daemon (pid 7) had started within the same tick
    iv.begin(mark(10, '7:10'));
    iv.begin(mark(11));
    // it pauses at tick 20 (a turn's setup), where the agent's pid 30 had started within that tick
    iv.pause(mark(20, '30:20'));
    iv.pause(mark(21));
    iv.begin(mark(40));
    expect(iv.isAgents(1, 0)).toBe(false); // process 1, the image's
    expect(iv.isAgents(7, 10)).toBe(false); // the setup's, same tick as the begin
    expect(iv.isAgents(8, 10)).toBe(true); // the agent's first, same tick as the begin
    expect(iv.isAgents(9, 15)).toBe(true);
    expect(iv.isAgents(30, 20)).toBe(true); // the agent's, same tick as the pause
    expect(iv.isAgents(31, 20)).toBe(false); // the setup's, after the pause within its tick
    expect(iv.isAgents(32, 25)).toBe(false); // the setup's
    expect(iv.isAgents(33, 40)).toBe(true); // the second part is open
    expect(iv.isAgents(34, 99999)).toBe(true);
  });
});
