/**
 * For the shell and verifier tests: a container of an image made as the sandbox makes a shell
 * env's (createEnvContainer, src/sandbox/docker/containers.ts: the command that waits, the
 * lock-down), on an internal network of the test's own (subnets from 10.236.0.0/16, which no
 * other test file uses), and its removal. Its containers carry the bundle label SHELL_TEST_BUNDLE
 * (SHELL_TEST_LABEL selects them) and an instance of their own; the network is labelled
 * `io.openenv.test.shell=<instance>`.
 */
import Docker from 'dockerode';
import { createEnvContainer } from '../../src/sandbox/docker/containers.js';
import { findToolboxBinary, ToolboxVolume } from '../../src/sandbox/engine/toolbox-volume.js';
import { silentLogger } from '../../src/sandbox/engine/logger.js';
import { LABELS, type EnvResources, type EnvRuntime, type EnvSecurityAsk } from '../../src/sandbox/sandbox.js';
import { newToolboxDir, toolboxBinary } from '../../src/sandbox/toolbox.js';
import { DockerContainerExec } from '../../src/tools/shell/index.js';
import { uniqueInstance } from './instance.js';

const SHELL_TEST_BUNDLE = 'openenv-shell-test';
/** a `docker ps --filter label=…` selecting every container these helpers made */
export const SHELL_TEST_LABEL = `${LABELS.bundle}=${SHELL_TEST_BUNDLE}`;
const NETWORK_LABEL = 'io.openenv.test.shell';

/** what a test may set of the shell env (the rest: 512 MB, 1 CPU, 256 processes, no variables) */
export interface ShellEnvSettings extends Partial<EnvResources> {
  environment?: Record<string, string>;
  workdir?: string;
  runtime?: EnvRuntime;
  /** a bundle's security asks (a read-only root, a user, …) */
  security?: EnvSecurityAsk;
}

export interface ShellContainer {
  docker: Docker;
  id: string;
  exec: DockerContainerExec;
  networkName: string;
  remove(): Promise<void>;
}

async function ownNetwork(docker: Docker, name: string, labels: Record<string, string>): Promise<void> {
  for (let attempt = 0; ; attempt++) {
    const third = Math.floor(Math.random() * 256);
    const fourth = Math.floor(Math.random() * 16) * 16;
    try {
      await docker.createNetwork({
        Name: name,
        Driver: 'bridge',
        Internal: true,
        Labels: labels,
        IPAM: { Config: [{ Subnet: `10.236.${third}.${fourth}/28` }] },
      });
      return;
    } catch (e) {
      if (attempt < 20 && /overlap/i.test((e as Error).message)) continue;
      throw e;
    }
  }
}

/** Creates and starts a container of `image` as a shell env would have it. */
export async function startShellContainer(image: string, env: ShellEnvSettings = {}): Promise<ShellContainer> {
  const docker = new Docker();
  const instance = uniqueInstance('shell');
  const networkName = `openenv-test-${instance}`;
  await ownNetwork(docker, networkName, { [NETWORK_LABEL]: instance });
  const { environment = {}, workdir, runtime, security, ...resources } = env;
  let id: string | null = null;
  const arch = ((await docker.info()) as { Architecture?: string }).Architecture ?? '';
  const volume = new ToolboxVolume(docker, instance, await findToolboxBinary(undefined, arch), silentLogger);
  const toolboxDir = newToolboxDir();
  const remove = async () => {
    if (id)
      await docker
        .getContainer(id)
        .remove({ force: true, v: true })
        .catch(() => {});
    await docker
      .getNetwork(networkName)
      .remove()
      .catch(() => {});
    await volume.remove();
  };
  try {
    const network = { id: networkName, name: networkName, subnet: null as never };
    const container = await createEnvContainer(
      docker,
      { instance, bundle: SHELL_TEST_BUNDLE, episode: instance, env: 'shell' },
      {
        name: 'shell',
        image,
        port: 0,
        readyPath: '/',
        deployTimeoutMs: 60_000,
        resources: { memoryMb: 512, cpus: 1, pids: 256, ...resources },
        environment,
        kind: 'shell',
        ...(workdir !== undefined ? { workdir } : {}),
        ...(runtime !== undefined ? { runtime } : {}),
        ...(security !== undefined ? { security } : {}),
      },
      network,
      undefined,
      { toolbox: { volume: await volume.ensure(), dir: toolboxDir } },
    );
    id = container.id;
    await container.start();
  } catch (e) {
    await remove();
    throw e;
  }
  return { docker, id, exec: new DockerContainerExec(docker, id, toolboxBinary(toolboxDir)), networkName, remove };
}
