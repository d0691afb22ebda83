/**
 * How the page prints what env and model wrote: JSON compactly (a short array on one line, not
 * one number per line), long texts folded behind their first line, and prompts as role-labelled
 * messages. Everything goes in as text nodes: no markup from env or model is ever interpreted.
 */
import type { ComponentChildren } from 'preact';
import type { Message } from './types';

/** lines past this fold a text or a JSON value behind its first line */
const FOLD_LINES = 12;

/**
 * JSON that keeps what fits on a line on one line (`[0, -1, 4, …]` for a 24-hour schedule), and
 * indents the rest; arrays of plain values too long for a line are wrapped, several to a line.
 */
export function compactJson(value: unknown, width = 96, indent = ''): string {
  const flat = JSON.stringify(value);
  if (flat === undefined) return String(value);
  if (indent.length + flat.length <= width || value === null || typeof value !== 'object') return flat;
  const inner = `${indent}  `;
  if (Array.isArray(value)) {
    if (value.every((v) => v === null || typeof v !== 'object')) {
      const lines: string[] = [];
      let line = '';
      for (const v of value.map((x) => JSON.stringify(x) ?? 'null')) {
        if (line && inner.length + line.length + v.length + 2 > width) {
          lines.push(`${inner}${line},`);
          line = v;
        } else line = line ? `${line}, ${v}` : v;
      }
      if (line) lines.push(`${inner}${line}`);
      return `[\n${lines.join('\n')}\n${indent}]`;
    }
    return `[\n${value.map((v) => `${inner}${compactJson(v, width, inner)}`).join(',\n')}\n${indent}]`;
  }
  const entries = Object.entries(value as Record<string, unknown>);
  if (entries.length === 0) return '{}';
  return `{\n${entries.map(([k, v]) => `${inner}${JSON.stringify(k)}: ${compactJson(v, width, inner)}`).join(',\n')}\n${indent}}`;
}

/** a block of text, folded behind its first line when it is long */
export function Folded(props: { text: string; class?: string; label?: ComponentChildren; testid?: string }) {
  const lines = props.text.split('\n');
  const pre = (
    <pre class={props.class ?? 'text'} data-testid={props.testid}>
      {props.text}
    </pre>
  );
  if (lines.length <= FOLD_LINES) {
    return (
      <>
        {props.label && <div class="role">{props.label}</div>}
        {pre}
      </>
    );
  }
  return (
    <details class="fold" data-fold>
      <summary>
        {props.label && <span class="role">{props.label}</span>} <span class="muted">{lines[0]!.slice(0, 100)}</span>{' '}
        <span class="count">{lines.length} lines</span>
      </summary>
      {pre}
    </details>
  );
}

export function Json(props: { value: unknown; label?: ComponentChildren }) {
  return <Folded class="json" text={compactJson(props.value)} label={props.label} />;
}

/** a prompt: each message with its role */
export function Messages(props: { messages: readonly Message[]; testidPrefix?: string }) {
  return (
    <>
      {props.messages.map((m, i) => (
        <div key={`${i}-${m.role}`} class={`msg msg-${m.role}`}>
          <Folded text={m.content} label={m.role} testid={props.testidPrefix ? `${props.testidPrefix}-${m.role}` : undefined} />
        </div>
      ))}
    </>
  );
}

/** the text a tool result carries for the model, or null when it has none */
export function resultText(r: unknown): string | null {
  const c = (r as { content?: { text?: string }[] } | null)?.content;
  return Array.isArray(c) ? c.map((x) => x.text ?? '').join('\n') : null;
}
