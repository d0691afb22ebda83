/**
 * An image pulled from its registry by the engine, its progress followed: the engine's progress
 * stream says, per layer, how many bytes of how many it has; the sum over the layers seen is the
 * pull's progress. A failed pull arrives as an error line on a stream that ends normally.
 */
import type Dockerode from 'dockerode';
import { SandboxError, type PullProgress } from '../sandbox.js';
import { engineMessage } from './errors.js';
import { forEachProgressLine, progressFailure, type ProgressLine } from './progress.js';

interface PullLine extends ProgressLine {
  id?: string;
  progressDetail?: { current?: number; total?: number };
}

export async function pullImage(docker: Dockerode, ref: string, onProgress: (p: PullProgress) => void, signal?: AbortSignal): Promise<void> {
  let stream: NodeJS.ReadableStream;
  try {
    stream = await new Promise<NodeJS.ReadableStream>((resolve, reject) =>
      docker.pull(ref, signal ? { abortSignal: signal } : {}, (err: Error | null, s?: NodeJS.ReadableStream) =>
        err || !s ? reject(err ?? new Error('no stream')) : resolve(s),
      ),
    );
  } catch (err) {
    if (signal?.aborted) throw err;
    throw new SandboxError('no_image', `the Docker engine could not pull ${ref}: ${engineMessage(err)}`);
  }
  const layers = new Map<string, { current: number; total: number }>();
  let failure: string | null = null;
  const onAbort = () => (stream as NodeJS.ReadableStream & { destroy?: () => void }).destroy?.();
  signal?.addEventListener('abort', onAbort, { once: true });
  try {
    await forEachProgressLine(stream, (raw) => {
      const msg = raw as PullLine;
      const failed = progressFailure(msg, 'unknown pull error');
      if (failed !== null) {
        failure ??= failed;
        return;
      }
      if (msg.id && msg.progressDetail?.total) {
        const l = layers.get(msg.id) ?? { current: 0, total: 0 };
        l.total = msg.progressDetail.total;
        if (msg.status === 'Downloading') l.current = msg.progressDetail.current ?? l.current;
        layers.set(msg.id, l);
      } else if (msg.id && (msg.status === 'Download complete' || msg.status === 'Pull complete' || msg.status === 'Already exists')) {
        const l = layers.get(msg.id);
        if (l) l.current = l.total;
      }
      let current = 0;
      let total = 0;
      for (const l of layers.values()) {
        current += l.current;
        total += l.total;
      }
      onProgress({ status: msg.status ?? '', layers: layers.size, bytes: current, totalBytes: total });
    });
  } finally {
    signal?.removeEventListener('abort', onAbort);
  }
  if (signal?.aborted) throw signal.reason instanceof Error ? signal.reason : new Error('the pull was stopped');
  if (failure !== null) throw new SandboxError('no_image', `the Docker engine could not pull ${ref}: ${failure}`);
}
