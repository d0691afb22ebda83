/** Generic JSON helpers, on the ground floor: any room may use them, they import nothing. */

/** An object as JSON.parse makes one: not null, not an array. */
export function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * Whether a parsed JSON value nests deeper than `max` arrays or objects. Iterative: a value nested
 * 100,000 deep (which JSON.parse accepts) must not overflow the stack that checks it.
 */
export function jsonDepthExceeds(value: unknown, max: number): boolean {
  const stack: { v: unknown; depth: number }[] = [{ v: value, depth: 0 }];
  while (stack.length > 0) {
    const { v, depth } = stack.pop()!;
    if (typeof v !== 'object' || v === null) continue;
    if (depth + 1 > max) return true;
    for (const child of Array.isArray(v) ? v : Object.values(v)) {
      if (typeof child === 'object' && child !== null) stack.push({ v: child, depth: depth + 1 });
    }
  }
  return false;
}

/** UTF-8 bytes of a value's JSON; null when it has none (undefined) */
export function jsonBytes(value: unknown): number | null {
  const text = JSON.stringify(value);
  return text === undefined ? null : Buffer.byteLength(text, 'utf8');
}
