/**
 * Env images for a swarm: the manager builds them (content-hash tags, as on one host), then pushes
 * them to a registry every node can pull from; services name them by digest, so every node runs
 * exactly the bytes that were built, whatever the tag points at later.
 */
import type Dockerode from 'dockerode';
import { SandboxError } from '../sandbox.js';
import { engineMessage, toSandboxError } from '../engine/errors.js';
import { forEachProgressLine, progressFailure } from '../engine/progress.js';

/** "openenv-bundle/x-y:abc" → { repo: "openenv-bundle/x-y", tag: "abc" } */
export function splitTag(ref: string): { repo: string; tag: string } {
  const slash = ref.lastIndexOf('/');
  const colon = ref.lastIndexOf(':');
  if (colon > slash) return { repo: ref.slice(0, colon), tag: ref.slice(colon + 1) };
  return { repo: ref, tag: 'latest' };
}

/** reads a push's progress stream: the digest the registry gave, or the error it ended with */
async function followPush(stream: NodeJS.ReadableStream, onLine?: (line: string) => void): Promise<{ digest: string | null; error: string | null }> {
  let digest: string | null = null;
  let error: string | null = null;
  await forEachProgressLine(stream, (msg) => {
    error ??= progressFailure(msg, 'unknown push error');
    if (msg.aux?.Digest) digest = msg.aux.Digest;
    if (msg.status && /digest: sha256:/.test(msg.status)) {
      onLine?.(msg.status);
      digest ??= /(sha256:[0-9a-f]{64})/.exec(msg.status)?.[1] ?? null;
    }
  });
  return { digest, error };
}

/**
 * Tags `localRef` as `<registry>/<repo>:<tag>`, pushes it (layers the registry has are skipped),
 * and returns `<registry>/<repo>:<tag>@sha256:…`, the reference services are created with.
 */
export async function pushToRegistry(docker: Dockerode, localRef: string, registry: string, onProgress?: (line: string) => void): Promise<string> {
  const { repo, tag } = splitTag(localRef);
  const remoteRepo = `${registry}/${repo}`;
  const remote = `${remoteRepo}:${tag}`;
  try {
    await docker.getImage(localRef).tag({ repo: remoteRepo, tag });
  } catch (err) {
    throw toSandboxError(err, `tagging image ${localRef} as ${remote}`);
  }
  onProgress?.(`pushing ${remote}`);
  let stream: NodeJS.ReadableStream;
  try {
    // an empty auth: the registry is anonymous (put credentials in the engine's own config otherwise)
    stream = (await docker.getImage(remote).push({ authconfig: {} } as object)) as NodeJS.ReadableStream;
  } catch (err) {
    throw new SandboxError('no_image', `cannot push ${remote} to the registry ${registry}: ${engineMessage(err)}`);
  }
  const { digest, error } = await followPush(stream, onProgress);
  if (error !== null) {
    throw new SandboxError(
      'no_image',
      `cannot push ${remote} to the registry ${registry}: ${error}` +
        (/http response to HTTPS client|certificate/i.test(error) ? ` (a registry without TLS must be in the engine's insecure-registries)` : ''),
    );
  }
  if (digest === null) throw new SandboxError('no_image', `the registry ${registry} did not report a digest for ${remote}`);
  return `${remote}@${digest}`;
}
