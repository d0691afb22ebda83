/**
 * The shell toolset's `bash` call latency against a bare dockerode exec of the same command, in
 * the same run on the same container (a shell env of the local Debian base, on an internal network
 * of its own): the baseline is what any exec-based shell pays at least (exec create, start, read
 * to the end, inspect for the exit code); the `bash` call goes through the persistent shell
 * (write one line, read to the end line, apply the state file). Calls alternate between the two so
 * both see the same engine. Needs a Docker engine and docker/make-local-debian-base.sh's image;
 * run it under the team's lock on a quiet engine:
 *
 *   flock /tmp/openenv-docker.lock npx tsx scripts/shell-bench.ts [--calls 200] [--command 'echo hello']
 *
 * Prints the p50 and p95 of each and their ratio (target: within 1.2x of the bare exec), and one
 * JSON line for `npm run bench` to take up. Removes what it made.
 */
import { parseArgs } from 'node:util';
import Docker from 'dockerode';
import { ShellToolset, shellEnvContainerOptions } from '../src/tools/shell/index.js';
import { percentile } from './bench/stats.js';

const { values } = parseArgs({
  options: {
    calls: { type: 'string', default: '200' },
    warmup: { type: 'string', default: '10' },
    command: { type: 'string', default: 'echo hello' },
    image: { type: 'string', default: 'openenv-local/debian:bookworm' },
  },
});
const calls = Number(values.calls);
const warmup = Number(values.warmup);
const command = values.command!;

/** exec create + start + read to the end + inspect: what any exec-based call costs */
async function bareExec(container: Docker.Container): Promise<number> {
  const started = performance.now();
  const exec = await container.exec({ Cmd: ['bash', '-c', command], AttachStdout: true, AttachStderr: true, Tty: false });
  const stream = await exec.start({ hijack: true, stdin: false });
  await new Promise<void>((resolve, reject) => {
    stream.on('data', () => {});
    stream.on('end', resolve);
    stream.on('error', reject);
  });
  const info = await exec.inspect();
  if (info.ExitCode !== 0) throw new Error(`the bare exec exited ${info.ExitCode}`);
  return performance.now() - started;
}

async function shellCall(shell: ShellToolset): Promise<number> {
  const started = performance.now();
  const r = await shell.call('bash', { command });
  if (r.kind !== 'reply' || r.reply.result.exit_code !== 0) throw new Error(`the bash call failed: ${JSON.stringify(r)}`);
  return performance.now() - started;
}

async function main(): Promise<void> {
  const docker = new Docker();
  const tag = `shell-bench-${process.pid}`;
  const labels = { 'io.openenv.bench.shell': tag };
  await docker.createNetwork({ Name: `openenv-${tag}`, Internal: true, Labels: labels });
  let id: string | null = null;
  try {
    const options = shellEnvContainerOptions(
      { image: values.image!, environment: {}, memoryMb: 512, cpus: 1, pids: 256, workdir: '/app' },
      { name: `openenv-${tag}`, labels, networkName: `openenv-${tag}` },
    );
    const container = await docker.createContainer(options);
    id = container.id;
    await container.start();
    const { DockerContainerExec } = await import('../src/tools/shell/index.js');
    const shell = new ShellToolset(new DockerContainerExec(docker, id), { workdir: '/app' });
    for (let i = 0; i < warmup; i++) {
      await bareExec(container);
      await shellCall(shell);
    }
    const bare: number[] = [];
    const viaShell: number[] = [];
    for (let i = 0; i < calls; i++) {
      // alternate which goes first, so neither always follows the other
      if (i % 2 === 0) {
        bare.push(await bareExec(container));
        viaShell.push(await shellCall(shell));
      } else {
        viaShell.push(await shellCall(shell));
        bare.push(await bareExec(container));
      }
    }
    await shell.close();
    const fig = (xs: number[]) => ({ p50_ms: +percentile(xs, 50).toFixed(2), p95_ms: +percentile(xs, 95).toFixed(2) });
    const result = {
      command,
      calls,
      bare_exec: fig(bare),
      bash_call: fig(viaShell),
      ratio_p50: +(percentile(viaShell, 50) / percentile(bare, 50)).toFixed(3),
      ratio_p95: +(percentile(viaShell, 95) / percentile(bare, 95)).toFixed(3),
    };
    console.log(`bash call vs bare dockerode exec of \`${command}\`, ${calls} calls each, alternating:`);
    console.log(`  bare exec  p50 ${result.bare_exec.p50_ms} ms   p95 ${result.bare_exec.p95_ms} ms`);
    console.log(`  bash call  p50 ${result.bash_call.p50_ms} ms   p95 ${result.bash_call.p95_ms} ms`);
    console.log(`  ratio      p50 ${result.ratio_p50}x   p95 ${result.ratio_p95}x   (target: at most 1.2x)`);
    console.log(JSON.stringify({ shell_bench: result }));
  } finally {
    if (id) await docker.getContainer(id).remove({ force: true, v: true });
    await docker.getNetwork(`openenv-${tag}`).remove();
  }
}

await main();
