/**
 * `--record DIR`: every ended episode's transcript, one JSON line, appended to a daily file
 * `DIR/episodes-YYYY-MM-DD.jsonl` (UTC date of the episode's end). Writes go through a bounded
 * queue drained by one async writer: a full queue drops the line and counts it, a failed write
 * is logged and counted; neither ever blocks or fails an episode.
 */
import { appendFile, mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from 'pino';
import type { RecorderStats } from '../protocol/console.js';

export interface RecorderOptions {
  /** lines waiting to be written; past it new lines are dropped */
  maxQueue?: number;
  now?: () => number;
}

export function dailyFile(dir: string, at: number): string {
  return join(dir, `episodes-${new Date(at).toISOString().slice(0, 10)}.jsonl`);
}

export class EpisodeRecorder {
  private readonly queue: { file: string; line: string }[] = [];
  private writing: Promise<void> | null = null;
  private ready: Promise<boolean> | null = null;
  private readonly maxQueue: number;
  private readonly now: () => number;
  private written = 0;
  private dropped = 0;
  private failed = 0;
  private lastErrorLog = 0;

  constructor(
    readonly dir: string,
    private readonly log: Logger,
    opts: RecorderOptions = {},
  ) {
    this.maxQueue = opts.maxQueue ?? 1000;
    this.now = opts.now ?? Date.now;
  }

  stats(): RecorderStats {
    return { dir: this.dir, written: this.written, dropped: this.dropped, failed: this.failed, queued: this.queue.length };
  }

  /** Queues one record; false when it was dropped (queue full or not serializable). Never throws. */
  write(record: unknown): boolean {
    if (this.queue.length >= this.maxQueue) {
      this.dropped++;
      if (this.dropped === 1 || this.dropped % 100 === 0)
        this.log.warn({ event: 'record_dropped', dropped: this.dropped, dir: this.dir }, 'the --record queue is full: transcript lines are being dropped');
      return false;
    }
    let line: string;
    try {
      line = `${JSON.stringify(record)}\n`;
    } catch (e) {
      this.failed++;
      this.log.error({ event: 'record_failed', err: (e as Error).message }, 'a transcript could not be serialized');
      return false;
    }
    this.queue.push({ file: dailyFile(this.dir, this.now()), line });
    this.kick();
    return true;
  }

  private kick(): void {
    if (this.writing) return;
    this.writing = this.drain().finally(() => {
      this.writing = null;
      // a line queued between the last round and here
      if (this.queue.length) this.kick();
    });
  }

  /** Resolves once every queued line was written (or failed). */
  async flush(): Promise<void> {
    while (this.writing) await this.writing;
  }

  private async drain(): Promise<void> {
    this.ready ??= mkdir(this.dir, { recursive: true }).then(
      () => true,
      (e: Error) => {
        this.log.error({ event: 'record_failed', dir: this.dir, err: e.message }, 'cannot create the --record folder; will retry');
        this.ready = null;
        return false;
      },
    );
    await this.ready;
    while (this.queue.length) {
      // one append per file per round: consecutive lines for the same day go together
      const file = this.queue[0]!.file;
      let n = 0;
      while (n < this.queue.length && this.queue[n]!.file === file && n < 256) n++;
      const batch = this.queue.splice(0, n);
      try {
        await appendFile(file, batch.map((b) => b.line).join(''), { encoding: 'utf8', mode: 0o600 });
        this.written += batch.length;
      } catch (e) {
        this.failed += batch.length;
        if (this.now() - this.lastErrorLog > 10_000) {
          this.lastErrorLog = this.now();
          this.log.error(
            { event: 'record_failed', file, lines: batch.length, failed: this.failed, err: (e as Error).message },
            'cannot append transcripts to the --record file',
          );
        }
      }
    }
  }
}
