/**
 * A TOML table read key by key (task.toml's tables, read by task-config.ts): each read in the
 * type it must have, a value of another type a refusal, and what was never read named at the end.
 */
/** what the import says of one field of a task (a refusal, or a note): not a check's finding (protocol/findings.ts) */
export interface TaskNote {
  /** where in task.toml: `[environment] gpus`, `[[steps]] 2 (implement) artifacts` */
  field: string;
  message: string;
}

export type Table = Record<string, unknown>;

export const isTable = (v: unknown): v is Table => typeof v === 'object' && v !== null && !Array.isArray(v) && !(v instanceof Date);

/** Reads a table's keys one by one; what was not read is named at the end. */
export class Reader {
  private readonly read = new Set<string>();

  constructor(
    readonly table: Table,
    readonly where: string,
    private readonly out: { refusals: TaskNote[]; notes: TaskNote[] },
  ) {}

  has(key: string): boolean {
    return Object.hasOwn(this.table, key);
  }

  raw(key: string): unknown {
    this.read.add(key);
    return this.table[key];
  }

  field(key: string): string {
    return `${this.where} ${key}`.trim();
  }

  refuse(key: string, message: string): void {
    this.out.refusals.push({ field: this.field(key), message });
  }

  note(key: string, message: string): void {
    this.out.notes.push({ field: this.field(key), message });
  }

  number(key: string, { min = 0 }: { min?: number } = {}): number | undefined {
    if (!this.has(key)) return undefined;
    const v = this.raw(key);
    if (v === null || v === undefined) return undefined;
    if (typeof v !== 'number' || !Number.isFinite(v) || v < min) {
      this.refuse(key, `expected a number${min > 0 ? ` ≥ ${min}` : ''}, got ${JSON.stringify(v)}`);
      return undefined;
    }
    return v;
  }

  string(key: string): string | undefined {
    if (!this.has(key)) return undefined;
    const v = this.raw(key);
    if (v === null || v === undefined) return undefined;
    if (typeof v !== 'string') {
      this.refuse(key, `expected a string, got ${JSON.stringify(v)}`);
      return undefined;
    }
    return v;
  }

  table_(key: string): Reader | null {
    if (!this.has(key)) return null;
    const v = this.raw(key);
    if (!isTable(v)) {
      this.refuse(key, `expected a table, got ${JSON.stringify(v)}`);
      return null;
    }
    // a [[steps]] entry's table: `[[steps]] 2 [steps.verifier]`
    if (this.where.startsWith('[[')) return new Reader(v, `${this.where} [steps.${key}]`, this.out);
    return new Reader(v, `[${[this.where.replace(/^\[|\]$/g, ''), key].filter(Boolean).join('.')}]`, this.out);
  }

  /** a table of string values (an env) */
  vars(key: string): Record<string, string> {
    const t = this.table_(key);
    const out: Record<string, string> = {};
    if (!t) return out;
    for (const [k, v] of Object.entries(t.table)) {
      t.raw(k);
      if (typeof v !== 'string') t.refuse(k, `expected a string value, got ${JSON.stringify(v)}`);
      else if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(k)) t.refuse(k, 'expected a variable name ([A-Za-z_][A-Za-z0-9_]*)');
      else if (/\$\{/.test(v)) t.refuse(k, `its value ${JSON.stringify(v)} reads a variable of the host running Harbor; give it a value`);
      else out[k] = v;
    }
    return out;
  }

  /** names what was not read, as notes (dropped) */
  rest(what = 'not supported by this import: dropped'): void {
    for (const k of Object.keys(this.table)) if (!this.read.has(k)) this.note(k, what);
  }
}
