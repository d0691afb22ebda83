/**
 * Reading the repository's Markdown as GitHub renders it, for the tests that hold README.md and
 * docs/ to the code: headings and their anchors, links, sections, tables and shell blocks. Fenced
 * code blocks are no prose: a `#` or a `](…)` inside one is neither a heading nor a link.
 */

/** The lines of `text` outside fenced code blocks (the fences themselves left out too). */
function proseLines(text: string): string[] {
  let fenced = false;
  return text.split('\n').filter((line) => {
    if (line.startsWith('```')) {
      fenced = !fenced;
      return false;
    }
    return !fenced;
  });
}

/** `text` without its fenced code blocks. */
export function proseOf(text: string): string {
  return proseLines(text).join('\n');
}

/** GitHub's anchor of a heading: lower case, links read as their text, punctuation dropped, spaces as hyphens. */
export function slugOf(heading: string): string {
  return heading
    .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
    .toLowerCase()
    .replace(/[^a-z0-9 _-]/g, '')
    .replace(/ /g, '-');
}

/** Every heading's anchor, a repeated one numbered as GitHub numbers it (`x`, `x-1`, `x-2`). */
export function anchorsOf(text: string): string[] {
  const seen = new Map<string, number>();
  const out: string[] = [];
  for (const line of proseLines(text)) {
    const m = /^#{1,6} (.+)$/.exec(line);
    if (!m) continue;
    const slug = slugOf(m[1]!.trim());
    const n = seen.get(slug) ?? 0;
    seen.set(slug, n + 1);
    out.push(n === 0 ? slug : `${slug}-${n}`);
  }
  return out;
}

/** The target of every inline link and image (`[text](target)`), outside code blocks. */
export function linksOf(text: string): string[] {
  return [...proseOf(text).matchAll(/\]\(([^)\s]+)\)/g)].map((m) => m[1]!);
}

/**
 * The section under the heading line `heading` (e.g. `## Options`), up to the next heading of its
 * level or above; throws when the text has no such heading.
 */
export function sectionOf(text: string, heading: string): string {
  const lines = text.split('\n');
  const at = lines.indexOf(heading);
  if (at === -1) throw new Error(`no heading "${heading}"`);
  const level = /^#+/.exec(heading)![0].length;
  let fenced = false;
  const rest = lines.slice(at + 1);
  const end = rest.findIndex((l) => {
    if (l.startsWith('```')) fenced = !fenced;
    return !fenced && new RegExp(`^#{1,${level}} `).test(l);
  });
  return rest.slice(0, end === -1 ? undefined : end).join('\n');
}

/** A table's rows after its header line `header` and the separator, as cells with backticks dropped and `\|` read as `|`. */
export function tableRowsOf(text: string, header: string): string[][] {
  const at = text.indexOf(header);
  if (at === -1) throw new Error(`no table headed ${header}`);
  const lines = text.slice(at).split('\n').slice(2);
  const end = lines.findIndex((l) => !l.startsWith('|'));
  return lines.slice(0, end === -1 ? undefined : end).map((l) =>
    l
      .slice(1, -1)
      .split(/(?<!\\)\|/)
      .map((c) => c.trim().replace(/`/g, '').replace(/\\\|/g, '|')),
  );
}

/** The fenced `sh` blocks of `text`, each as its lines' text. */
export function shBlocksOf(text: string): string[] {
  return [...text.matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => m[1]!);
}
