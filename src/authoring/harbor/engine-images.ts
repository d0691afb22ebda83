/** Which of the images an import's builds need the local Docker engine has (null when no engine answers). */
import Docker from 'dockerode';
import { imageExists } from '../../sandbox/docker/index.js';

/** how long the engine may take to answer before the images go unchecked */
const PING_TIMEOUT_MS = 3000;

export async function engineHasImages(refs: string[]): Promise<Set<string> | null> {
  const docker = new Docker();
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([docker.ping(), new Promise((_, reject) => (timer = setTimeout(() => reject(new Error('no answer')), PING_TIMEOUT_MS)))]);
  } catch {
    return null;
  } finally {
    clearTimeout(timer);
  }
  const present = new Set<string>();
  for (const ref of refs) if (await imageExists(docker, ref).catch(() => false)) present.add(ref);
  return present;
}
