/**
 * Run by attach.test.ts INSIDE a container that has this checkout and the engine socket mounted,
 * i.e. where a containerised bundle server runs: `node --import tsx in-container.ts <cmd> ...`.
 * Prints one JSON line with what it saw.
 */
import Dockerode from 'dockerode';
import { DockerSandbox, detectOwnContainerId } from '../../../src/sandbox/docker/index.js';
import { SandboxError } from '../../../src/sandbox/sandbox.js';
import { echoSpec, post } from './fixture.js';

const [cmd, instance, episode, image] = process.argv.slice(2);
const docker = new Dockerode();
const own = await detectOwnContainerId(docker);
const sandbox = new DockerSandbox({ instance: instance ?? 'none', bundleName: 'fixture-v1', attachContainer: own });
const out: Record<string, unknown> = { own };
try {
  if (cmd === 'deploy') {
    const handle = await sandbox.deploy({ envId: episode!, env: echoSpec(image!) });
    out.handle = handle;
    out.health = (await fetch(`${handle.baseUrl}/health`)).status;
    await post(handle.baseUrl, '/reset', { task_id: 'fx-echo-0', data: {} });
    out.echo = (await post(handle.baseUrl, '/tools/call', { name: 'echo', arguments: { text: 'from inside' } })).json;
  } else if (cmd === 'crash') {
    const err = await sandbox.deploy({ envId: episode!, env: echoSpec(image!, { environment: { ECHO_EXIT_AT_START: '4' } }) }).catch((e: unknown) => e);
    out.reason = err instanceof SandboxError ? err.reason : String(err);
    out.networksInUse = sandbox.networksInUse();
  } else if (cmd === 'teardown') {
    await sandbox.teardown(episode!);
    out.ok = true;
  } else if (cmd === 'sweep') {
    out.swept = await sandbox.sweep();
  }
} finally {
  await sandbox.close();
}
console.log(JSON.stringify(out));
