/**
 * The one idle clock of every session kind: it runs only while the server owes the client
 * nothing (no frame or request of it in flight), and calls `onIdle` once it runs out.
 */
export class IdleClock {
  private pending = 0;
  private timer: NodeJS.Timeout | null = null;
  private stopped = false;

  constructor(
    readonly timeoutMs: number,
    private readonly onIdle: () => void,
  ) {}

  /** Something of the client's is being served: the clock stops until `end()`. */
  begin(): void {
    this.pending++;
    this.clear();
  }

  end(): void {
    this.pending = Math.max(0, this.pending - 1);
    this.arm();
  }

  /** Runs `fn` as one request of the client's. */
  async during<T>(fn: () => Promise<T>): Promise<T> {
    this.begin();
    try {
      return await fn();
    } finally {
      this.end();
    }
  }

  /** The client showed it is there (a read): start counting again. */
  arm(): void {
    this.clear();
    if (this.stopped || this.pending > 0) return;
    this.timer = setTimeout(() => {
      this.timer = null;
      if (!this.stopped) this.onIdle();
    }, this.timeoutMs);
    this.timer.unref?.();
  }

  stop(): void {
    this.stopped = true;
    this.clear();
  }

  private clear(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }
}
