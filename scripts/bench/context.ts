/**
 * What every part of `npm run bench` shares, passed in rather than held in globals: the run's id,
 * the engine client, the base image, and progress lines on stderr.
 */
import Dockerode from 'dockerode';

export interface BenchContext {
  /** names this run's server instances (`<run>-<name>`) and labels its bare containers and networks (`bench=<run>`) */
  run: string;
  docker: Dockerode;
  /** the base image env images build FROM (--node-image) */
  nodeImage: string;
  /** performance.now() when the run began */
  startedAt: number;
  /** one line on stderr, stamped with the seconds since the run began */
  progress(msg: string): void;
}

export function benchContext(nodeImage: string): BenchContext {
  const startedAt = performance.now();
  return {
    run: `bench-${process.pid}`,
    docker: new Dockerode(),
    nodeImage,
    startedAt,
    progress: (msg) => process.stderr.write(`[${((performance.now() - startedAt) / 1000).toFixed(0).padStart(4)} s] ${msg}\n`),
  };
}

/** prints `what: count/total` every 5 s until the returned function is called */
export function ticker(ctx: BenchContext, what: string, count: () => number, total: number): () => void {
  const t = setInterval(() => ctx.progress(`  ${what}: ${count()}/${total}`), 5000);
  return () => clearInterval(t);
}
