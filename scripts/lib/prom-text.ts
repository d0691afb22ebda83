/**
 * A strict reader of Prometheus' text exposition format (0.0.4), for tests and scripts: it throws on anything
 * a Prometheus server would refuse (or silently misread), and checks the rules a histogram or
 * counter family must keep. What it returns lets a test ask for one series' value.
 */

export type MetricType = 'counter' | 'gauge' | 'histogram' | 'summary' | 'untyped';

export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

export interface Family {
  name: string;
  type: MetricType;
  help: string;
  samples: Sample[];
}

const NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;
const TYPES = new Set<MetricType>(['counter', 'gauge', 'histogram', 'summary', 'untyped']);

/** as Prometheus reads it (Go's ParseFloat): Inf and NaN in any case (prom-client writes "Nan") */
function parseValue(text: string, line: number): number {
  if (/^\+?inf(inity)?$/i.test(text)) return Infinity;
  if (/^-inf(inity)?$/i.test(text)) return -Infinity;
  if (/^nan$/i.test(text)) return NaN;
  if (!/^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/.test(text)) throw new Error(`line ${line}: "${text}" is not a sample value`);
  return Number(text);
}

/** `{a="x",b="y"}` starting at `s[i] === '{'`; returns the labels and the index after `}` */
function parseLabels(s: string, i: number, line: number): [Record<string, string>, number] {
  const labels: Record<string, string> = {};
  i++; // '{'
  for (;;) {
    if (s[i] === '}') return [labels, i + 1];
    const m = /^([a-zA-Z_][a-zA-Z0-9_]*)="/.exec(s.slice(i));
    if (!m) throw new Error(`line ${line}: bad label at "${s.slice(i, i + 30)}"`);
    const name = m[1]!;
    if (name in labels) throw new Error(`line ${line}: label ${name} twice`);
    i += m[0].length;
    let value = '';
    for (;;) {
      const c = s[i];
      if (c === undefined) throw new Error(`line ${line}: unterminated label value`);
      if (c === '"') break;
      if (c === '\\') {
        const n = s[i + 1];
        if (n === 'n') value += '\n';
        else if (n === '\\' || n === '"') value += n;
        else throw new Error(`line ${line}: bad escape \\${n} in a label value`);
        i += 2;
        continue;
      }
      if (c === '\n') throw new Error(`line ${line}: raw newline in a label value`);
      value += c;
      i++;
    }
    labels[name] = value;
    i++; // closing quote
    if (s[i] === ',') i++;
    else if (s[i] !== '}') throw new Error(`line ${line}: expected , or } after label ${name}`);
  }
}

function familyOf(sample: string, families: Map<string, Family>): Family | undefined {
  const direct = families.get(sample);
  if (direct) return direct;
  for (const suffix of ['_bucket', '_sum', '_count']) {
    if (sample.endsWith(suffix)) {
      const f = families.get(sample.slice(0, -suffix.length));
      if (f && (f.type === 'histogram' || f.type === 'summary')) return f;
    }
  }
  return undefined;
}

/** Parses and validates a whole exposition; throws with the line number on the first problem. */
export function parsePrometheusText(text: string): Map<string, Family> {
  if (!text.endsWith('\n')) throw new Error('the exposition must end with a newline');
  const families = new Map<string, Family>();
  const seenSeries = new Set<string>();
  let current: Family | null = null;
  const lines = text.split('\n');
  lines.pop();
  lines.forEach((raw, idx) => {
    const line = idx + 1;
    if (raw.trim() === '') return;
    if (raw.startsWith('#')) {
      const m = /^# (HELP|TYPE) (\S+) ?(.*)$/.exec(raw);
      if (!m) return; // a plain comment
      const [, kind, name, rest] = m as unknown as [string, 'HELP' | 'TYPE', string, string];
      if (!NAME.test(name)) throw new Error(`line ${line}: bad metric name ${name}`);
      let f = families.get(name);
      if (!f) {
        f = { name, type: 'untyped', help: '', samples: [] };
        families.set(name, f);
      } else if (f.samples.length) {
        throw new Error(`line ${line}: ${kind} for ${name} after its samples`);
      }
      if (kind === 'TYPE') {
        if (!TYPES.has(rest as MetricType)) throw new Error(`line ${line}: unknown type ${rest}`);
        f.type = rest as MetricType;
      } else {
        f.help = rest;
      }
      current = f;
      return;
    }
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)/.exec(raw);
    if (!m) throw new Error(`line ${line}: not a sample: ${raw}`);
    const name = m[1]!;
    let i = name.length;
    let labels: Record<string, string> = {};
    if (raw[i] === '{') [labels, i] = parseLabels(raw, i, line);
    const rest = raw.slice(i);
    const vm = /^ (\S+)( -?\d+)?$/.exec(rest);
    if (!vm) throw new Error(`line ${line}: expected " <value> [timestamp]" after the series, got "${rest}"`);
    const value = parseValue(vm[1]!, line);
    const f = familyOf(name, families);
    if (!f) throw new Error(`line ${line}: sample ${name} has no # TYPE line before it`);
    if (f !== current) throw new Error(`line ${line}: sample ${name} is not grouped with its family`);
    const key = `${name}${JSON.stringify(Object.entries(labels).sort())}`;
    if (seenSeries.has(key)) throw new Error(`line ${line}: series ${key} twice`);
    seenSeries.add(key);
    for (const l of Object.keys(labels)) if (!LABEL_NAME.test(l) || l.startsWith('__')) throw new Error(`line ${line}: bad label name ${l}`);
    f.samples.push({ name, labels, value });
  });
  for (const f of families.values()) checkFamily(f);
  return families;
}

function checkFamily(f: Family): void {
  if (f.type === 'counter') {
    for (const s of f.samples) {
      if (!(s.value >= 0)) throw new Error(`counter ${s.name} is ${s.value}`);
    }
  }
  if (f.type !== 'histogram') return;
  // group the series by their labels other than `le`
  const groups = new Map<string, { buckets: [number, number][]; sum?: number; count?: number }>();
  for (const s of f.samples) {
    const { le, ...rest } = s.labels;
    const key = JSON.stringify(Object.entries(rest).sort());
    const g = groups.get(key) ?? { buckets: [] };
    groups.set(key, g);
    if (s.name === `${f.name}_bucket`) {
      if (le === undefined) throw new Error(`${s.name} without le`);
      g.buckets.push([le === '+Inf' ? Infinity : Number(le), s.value]);
    } else if (s.name === `${f.name}_sum`) g.sum = s.value;
    else if (s.name === `${f.name}_count`) g.count = s.value;
    else throw new Error(`histogram ${f.name} has a sample ${s.name}`);
  }
  for (const [key, g] of groups) {
    if (g.count === undefined || g.sum === undefined) throw new Error(`histogram ${f.name}${key} lacks _sum or _count`);
    const les = g.buckets.map(([le]) => le);
    if (les.some((le) => Number.isNaN(le))) throw new Error(`histogram ${f.name}${key}: an le is not a number`);
    if (les.at(-1) !== Infinity) throw new Error(`histogram ${f.name}${key}: no le="+Inf" bucket last`);
    for (let i = 1; i < g.buckets.length; i++) {
      if (!(g.buckets[i]![0] > g.buckets[i - 1]![0])) throw new Error(`histogram ${f.name}${key}: le not increasing`);
      if (g.buckets[i]![1] < g.buckets[i - 1]![1]) throw new Error(`histogram ${f.name}${key}: buckets not cumulative`);
    }
    if (g.buckets.at(-1)![1] !== g.count) throw new Error(`histogram ${f.name}${key}: +Inf bucket ${g.buckets.at(-1)![1]} != count ${g.count}`);
  }
}

/** the value of the one sample named `name` whose labels include `labels`; undefined when none */
export function valueOf(families: Map<string, Family>, name: string, labels: Record<string, string> = {}): number | undefined {
  const f = familyOf(name, families);
  const matches = (f?.samples ?? []).filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v));
  if (matches.length > 1) throw new Error(`${name}${JSON.stringify(labels)} matches ${matches.length} series`);
  return matches[0]?.value;
}

/** the sum over every series named `name` (e.g. a counter's total across its labels) */
export function sumOf(families: Map<string, Family>, name: string): number {
  const f = familyOf(name, families);
  return (f?.samples ?? []).filter((s) => s.name === name).reduce((a, s) => a + s.value, 0);
}
