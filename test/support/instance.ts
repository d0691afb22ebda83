/** unique per test run, so parallel or leftover runs never touch each other's resources */
export function uniqueInstance(prefix = 'test'): string {
  return `${prefix}-${process.pid}-${Math.random().toString(36).slice(2, 8)}`;
}
