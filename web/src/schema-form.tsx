/**
 * A form for a tool's arguments, made from its JSON Schema (an object of named parameters), with
 * a raw-JSON mode for anything the form does not fit.
 */
import { useState } from 'preact/hooks';
import type { JsonSchema } from './types';

type Values = Record<string, string | boolean>;

const typeOf = (s: JsonSchema): string => (Array.isArray(s.type) ? (s.type.find((t) => t !== 'null') ?? 'string') : (s.type ?? 'string'));

/** the arguments object from the form's values; throws a message naming the field */
export function argsFrom(schema: JsonSchema, values: Values): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  const required = new Set(schema.required ?? []);
  for (const [name, p] of Object.entries(schema.properties ?? {})) {
    const v = values[name];
    const t = typeOf(p);
    if (t === 'boolean') {
      if (v !== undefined) out[name] = v === true;
      continue;
    }
    const text = typeof v === 'string' ? v.trim() : '';
    if (text === '') {
      if (required.has(name)) throw new Error(`${name} is required`);
      continue;
    }
    if (p.enum) {
      const hit = p.enum.find((e) => String(e) === text);
      out[name] = hit === undefined ? text : hit;
    } else if (t === 'integer' || t === 'number') {
      const n = Number(text);
      if (!Number.isFinite(n) || (t === 'integer' && !Number.isInteger(n))) throw new Error(`${name}: expected ${t === 'integer' ? 'an integer' : 'a number'}`);
      out[name] = n;
    } else if (t === 'array') {
      let arr: unknown[];
      if (text.startsWith('[')) {
        try {
          arr = JSON.parse(text) as unknown[];
        } catch {
          throw new Error(`${name}: not a JSON array`);
        }
      } else {
        arr = text.split(/[\s,]+/).filter(Boolean);
      }
      const it = p.items ? typeOf(p.items) : 'string';
      out[name] = arr.map((x, i) => {
        if (it !== 'integer' && it !== 'number') return x;
        const n = typeof x === 'number' ? x : Number(x);
        if (!Number.isFinite(n)) throw new Error(`${name}[${i}]: expected a number, got ${JSON.stringify(x)}`);
        return n;
      });
    } else if (t === 'object') {
      try {
        out[name] = JSON.parse(text);
      } catch {
        throw new Error(`${name}: not valid JSON`);
      }
    } else {
      out[name] = v;
    }
  }
  return out;
}

export function SchemaForm(props: { tool: string; schema: JsonSchema; busy: boolean; onSubmit: (args: unknown) => void; submitLabel?: string }) {
  const [values, setValues] = useState<Values>({});
  const [raw, setRaw] = useState(false);
  const [rawText, setRawText] = useState('{}');
  const [error, setError] = useState<string | null>(null);
  const props_ = Object.entries(props.schema.properties ?? {});
  const required = new Set(props.schema.required ?? []);

  const set = (name: string, v: string | boolean) => setValues({ ...values, [name]: v });
  const submit = (e: Event) => {
    e.preventDefault();
    try {
      const args = raw ? (JSON.parse(rawText) as unknown) : argsFrom(props.schema, values);
      setError(null);
      props.onSubmit(args);
    } catch (err) {
      setError(err instanceof SyntaxError ? `raw JSON: ${err.message}` : (err as Error).message);
    }
  };
  const toggleRaw = () => {
    if (!raw) {
      try {
        setRawText(JSON.stringify(argsFrom(props.schema, values), null, 2));
      } catch {
        setRawText('{}');
      }
    }
    setRaw(!raw);
  };

  return (
    <form class="schema-form" onSubmit={submit} data-testid="tool-form" data-tool={props.tool}>
      <div class="form-mode">
        <label>
          <input type="checkbox" checked={raw} onChange={toggleRaw} data-testid="raw-mode" /> raw JSON
        </label>
      </div>
      {raw ? (
        <textarea
          class="raw"
          rows={8}
          value={rawText}
          onInput={(e) => setRawText((e.target as HTMLTextAreaElement).value)}
          data-testid="raw-args"
          aria-label="arguments as JSON"
        />
      ) : props_.length === 0 ? (
        <p class="muted">This tool takes no arguments.</p>
      ) : (
        props_.map(([name, p]) => {
          const t = typeOf(p);
          const id = `arg-${name}`;
          const label = (
            <label for={id}>
              <code>{name}</code>
              {required.has(name) ? <span class="req">*</span> : null}{' '}
              <span class="muted">{t === 'array' ? `array of ${p.items ? typeOf(p.items) : 'any'}` : t}</span>
            </label>
          );
          let input;
          if (p.enum) {
            input = (
              <select id={id} name={name} value={String(values[name] ?? '')} onChange={(e) => set(name, (e.target as HTMLSelectElement).value)}>
                <option value="">—</option>
                {p.enum.map((x) => (
                  <option key={String(x)} value={String(x)}>
                    {String(x)}
                  </option>
                ))}
              </select>
            );
          } else if (t === 'boolean') {
            input = (
              <input id={id} name={name} type="checkbox" checked={values[name] === true} onChange={(e) => set(name, (e.target as HTMLInputElement).checked)} />
            );
          } else if (t === 'integer' || t === 'number') {
            input = (
              <input
                id={id}
                name={name}
                type="number"
                step={t === 'integer' ? 1 : 'any'}
                min={p.minimum}
                max={p.maximum}
                value={String(values[name] ?? '')}
                onInput={(e) => set(name, (e.target as HTMLInputElement).value)}
              />
            );
          } else if (t === 'object') {
            input = (
              <textarea
                id={id}
                name={name}
                rows={3}
                placeholder="JSON"
                value={String(values[name] ?? '')}
                onInput={(e) => set(name, (e.target as HTMLTextAreaElement).value)}
              />
            );
          } else {
            input = (
              <input
                id={id}
                name={name}
                type="text"
                placeholder={t === 'array' ? 'comma-separated, or a JSON array' : ''}
                value={String(values[name] ?? '')}
                onInput={(e) => set(name, (e.target as HTMLInputElement).value)}
              />
            );
          }
          return (
            <div class="field">
              {label}
              {input}
              {p.description && <div class="hint">{p.description}</div>}
            </div>
          );
        })
      )}
      {error && <p class="error">{error}</p>}
      <button type="submit" disabled={props.busy} data-testid="call-tool">
        {props.submitLabel ?? `Call ${props.tool}`}
      </button>
    </form>
  );
}
