/**
 * What this thread holds: its JS heap and its buffers. Not the process's RSS: the fast layer runs
 * test files in worker threads of one process, so RSS counts every other file's memory too.
 */
export function heldBytes(): number {
  const m = process.memoryUsage();
  return m.heapUsed + m.arrayBuffers;
}
