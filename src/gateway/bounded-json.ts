/**
 * JSON a model or a harness wrote, read with bounds: the nesting depth is measured on the text
 * before anything is parsed (a deeply nested body costs a scan, never the parser's stack), and
 * the size was already bounded by whoever read the bytes.
 */

/** true when the JSON text nests arrays and objects deeper than `max` (strings are skipped) */
export function nestsDeeperThan(text: string, max: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c)
        i++; // a backslash: the next character is escaped
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x5b || c === 0x7b) {
      if (++depth > max) return true;
    } else if (c === 0x5d || c === 0x7d) depth--;
  }
  return false;
}

export type JsonRead = { ok: true; value: unknown } | { ok: false; problem: string };

/** the parsed value, or what is wrong with the text (a sentence for the caller's error) */
export function readJson(text: string, maxDepth: number): JsonRead {
  if (nestsDeeperThan(text, maxDepth)) return { ok: false, problem: `the JSON nests deeper than ${maxDepth} levels` };
  try {
    return { ok: true, value: JSON.parse(text) as unknown };
  } catch (err) {
    return { ok: false, problem: `not JSON: ${(err as Error).message}` };
  }
}

export function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
