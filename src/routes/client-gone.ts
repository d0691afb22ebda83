/**
 * An AbortSignal that fires when an HTTP client goes away before its reply was sent (a reset that
 * waits for a slot is then taken out of the queue instead of deploying for no one).
 */
import type { FastifyReply } from 'fastify';

export async function withClientGone<T>(reply: FastifyReply, fn: (clientGone: AbortSignal) => Promise<T>): Promise<T> {
  const gone = new AbortController();
  const onClose = () => {
    if (!reply.raw.writableFinished) gone.abort();
  };
  reply.raw.on('close', onClose);
  try {
    return await fn(gone.signal);
  } finally {
    reply.raw.off('close', onClose);
  }
}

/** Nothing to answer: the client left. */
export function dropReply(reply: FastifyReply): void {
  reply.hijack();
  reply.raw.destroy();
}
