/** The engine's progress streams (an image build, a push): JSON objects, one a line. */
import { forEachLine } from '../../util/lines.js';

export interface ProgressLine {
  stream?: string;
  status?: string;
  progress?: string;
  error?: string;
  errorDetail?: { message?: string; code?: number };
  aux?: { Tag?: string; Digest?: string; Size?: number };
}

/** `onMessage` with each JSON line, `onText` with a line that is not JSON; blank lines are skipped */
export async function forEachProgressLine(
  stream: NodeJS.ReadableStream,
  onMessage: (msg: ProgressLine) => void,
  onText?: (text: string) => void,
): Promise<void> {
  await forEachLine(stream, (raw) => {
    const text = raw.trim();
    if (!text) return;
    let msg: ProgressLine;
    try {
      msg = JSON.parse(text) as ProgressLine;
    } catch {
      onText?.(text);
      return;
    }
    onMessage(msg);
  });
}

/** the failure a progress line reports (`unknown` when it says none), or null when it reports none */
export function progressFailure(msg: ProgressLine, unknown: string): string | null {
  if (msg.error === undefined && msg.errorDetail === undefined) return null;
  return (msg.errorDetail?.message ?? msg.error ?? unknown).trim();
}
