/**
 * `--record DIR`: every ended episode's transcript, one JSON line, appended to a daily file
 * `DIR/episodes-YYYY-MM-DD.jsonl` (UTC date of the episode's end). Writes go through a bounded
 * queue drained by one async writer: a full queue drops the line and counts it, a failed write
 * is logged and counted; neither ever blocks or fails an episode.
 *
 * The file never holds a broken line: a write cut short (ENOSPC on a disk that fills, then frees)
 * is cut back to the last complete line; should that fail too, the next write starts on a fresh
 * line. A folder that cannot be written is refused at start (checkRecordDir), not found out at
 * the first ended episode.
 */
import { constants } from 'node:fs';
import * as fsp from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from 'pino';
import type { RecorderStats } from '../protocol/console.js';

/** the file operations the recorder uses (a test injects a disk that fills) */
export interface RecorderFs {
  appendFile(file: string, data: string, opts: { encoding: 'utf8'; mode: number }): Promise<void>;
  stat(file: string): Promise<{ size: number }>;
  truncate(file: string, len: number): Promise<void>;
  mkdir(dir: string, opts: { recursive: true }): Promise<unknown>;
}

export interface RecorderOptions {
  /** lines waiting to be written; past it new lines are dropped */
  maxQueue?: number;
  now?: () => number;
  fs?: RecorderFs;
}

/**
 * Refuses a --record folder the server could not write: a path that is a file, or a folder that
 * cannot be created or written to (read-only, permissions). Creates the folder when it is missing.
 */
export async function checkRecordDir(dir: string): Promise<void> {
  const why = (e: unknown) => (e as NodeJS.ErrnoException).code ?? (e as Error).message;
  const isFile = await fsp.stat(dir).then(
    (st) => !st.isDirectory(),
    () => false,
  );
  if (isFile) throw new Error(`--record ${dir} is a file, not a folder: give the folder the daily episodes-YYYY-MM-DD.jsonl files go in`);
  try {
    await fsp.mkdir(dir, { recursive: true });
  } catch (e) {
    throw new Error(`--record ${dir}: cannot create the folder (${why(e)}): give a folder the server can write to`, { cause: e });
  }
  const probe = join(dir, `.openenv-record-probe-${process.pid}`);
  try {
    await fsp.access(dir, constants.W_OK);
    await (await fsp.open(probe, 'wx', 0o600)).close();
    await fsp.unlink(probe);
  } catch (e) {
    throw new Error(`--record ${dir}: the folder is not writable (${why(e)})`, { cause: e });
  }
}

const realFs: RecorderFs = {
  appendFile: (f, d, o) => fsp.appendFile(f, d, o),
  stat: (f) => fsp.stat(f),
  truncate: (f, l) => fsp.truncate(f, l),
  mkdir: (d, o) => fsp.mkdir(d, o),
};

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
  /** files whose last write may have left a partial line that could not be cut back */
  private readonly broken = new Set<string>();
  private readonly fs: RecorderFs;

  constructor(
    readonly dir: string,
    private readonly log: Logger,
    opts: RecorderOptions = {},
  ) {
    this.maxQueue = opts.maxQueue ?? 1000;
    this.now = opts.now ?? Date.now;
    this.fs = opts.fs ?? realFs;
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
    this.ready ??= this.fs.mkdir(this.dir, { recursive: true }).then(
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
      // where the file's last complete line ends: a write cut short is cut back to it
      const before = await this.fs.stat(file).then(
        (st): number | null => st.size,
        (e: NodeJS.ErrnoException) => (e.code === 'ENOENT' ? 0 : null),
      );
      const text = batch.map((b) => b.line).join('');
      try {
        await this.fs.appendFile(file, this.broken.has(file) ? `\n${text}` : text, { encoding: 'utf8', mode: 0o600 });
        this.broken.delete(file);
        this.written += batch.length;
      } catch (e) {
        this.failed += batch.length;
        const repaired = await this.cutBack(file, before);
        if (this.now() - this.lastErrorLog > 10_000 || !repaired) {
          this.lastErrorLog = this.now();
          this.log.error(
            { event: 'record_failed', file, lines: batch.length, failed: this.failed, err: (e as Error).message, cut_back_to: repaired ? before : null },
            repaired
              ? 'cannot append transcripts to the --record file; it ends at its last complete line'
              : 'cannot append transcripts to the --record file, nor cut it back: the next record starts on a fresh line',
          );
        }
      }
    }
  }

  /** after a failed append: the file back to `size` bytes; false when that failed too (or its size was unknown) */
  private async cutBack(file: string, size: number | null): Promise<boolean> {
    try {
      if (size === null) throw new Error('the size before the write is unknown');
      const now = (await this.fs.stat(file)).size;
      if (now > size) await this.fs.truncate(file, size);
      return true;
    } catch {
      this.broken.add(file);
      return false;
    }
  }
}
