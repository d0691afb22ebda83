/**
 * For the shell and verifier tests: a container made from an image with a shell env's create
 * options (src/tools/shell/container-options.ts), on an internal network of the test's own
 * (subnets from 10.236.0.0/16, which no other test file uses), and its removal. Everything is
 * labelled `io.openenv.test.shell=<instance>` so a test can find and remove what it made.
 */
import Docker from 'dockerode';
import { DockerContainerExec, shellEnvContainerOptions, type ShellEnvContainer } from '../../src/tools/shell/index.js';
import { uniqueInstance } from './instance.js';

export const SHELL_TEST_LABEL = 'io.openenv.test.shell';

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
export async function startShellContainer(image: string, env: Partial<Omit<ShellEnvContainer, 'image'>> = {}): Promise<ShellContainer> {
  const docker = new Docker();
  const instance = uniqueInstance('shell');
  const labels = { [SHELL_TEST_LABEL]: instance };
  const networkName = `openenv-test-${instance}`;
  await ownNetwork(docker, networkName, labels);
  const options = shellEnvContainerOptions(
    { image, environment: {}, memoryMb: 512, cpus: 1, pids: 256, ...env },
    { name: `openenv-test-${instance}`, labels, networkName },
  );
  let id: string | null = null;
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
  };
  try {
    const container = await docker.createContainer(options);
    id = container.id;
    await container.start();
  } catch (e) {
    await remove();
    throw e;
  }
  return { docker, id, exec: new DockerContainerExec(docker, id), networkName, remove };
}
