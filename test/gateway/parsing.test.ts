/**
 * What the gateway reads of model-written bytes: the SSE parser (whatever the chunking and line
 * endings), the JSON nesting bound, and the stream reassemblers on their own.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { nestsDeeperThan, readJson } from '../../src/gateway/bounded-json.js';
import { Credential, presentedKeys } from '../../src/gateway/credentials.js';
import { AnthropicMessagesReassembler, OpenAIChatReassembler } from '../../src/gateway/reassembly.js';
import { SseParser, type SseEvent } from '../../src/gateway/sse.js';

function feed(parser: SseParser, bytes: Buffer, cuts: number[]): SseEvent[] {
  const out: SseEvent[] = [];
  let at = 0;
  for (const c of [...cuts].sort((a, b) => a - b)) {
    out.push(...parser.push(bytes.subarray(at, c)));
    at = c;
  }
  out.push(...parser.push(bytes.subarray(at)));
  out.push(...parser.end());
  return out;
}

describe('SseParser', () => {
  it('the same events whatever the line endings and wherever the chunks are cut (multi-byte characters too)', () => {
    const data = fc.array(fc.string({ unit: fc.constantFrom('a', 'é', '€', '😀', ':', ' ', 'x') }), { minLength: 1, maxLength: 3 });
    const event = fc.record({ event: fc.constantFrom('', 'message_start', 'content_block_delta'), data });
    fc.assert(
      fc.property(fc.array(event, { maxLength: 6 }), fc.constantFrom('\n', '\r\n', '\r'), fc.array(fc.nat(), { maxLength: 8 }), (events, eol, rawCuts) => {
        const text = events
          .map((e) => `${e.event ? `event: ${e.event}${eol}` : ''}: a comment${eol}${e.data.map((d) => `data: ${d}`).join(eol)}${eol}${eol}`)
          .join('');
        const bytes = Buffer.from(text, 'utf8');
        const cuts = rawCuts.map((c) => (bytes.length ? c % (bytes.length + 1) : 0));
        const got = feed(new SseParser(1 << 20), bytes, cuts);
        expect(got).toEqual(events.map((e) => ({ event: e.event, data: e.data.join('\n') })));
      }),
      { numRuns: 400 },
    );
  });

  it("with onBlock: each block's text as it came (LF line ends), comments and keep-alives too, with the event it dispatched, wherever the chunks are cut", () => {
    const block = fc.oneof(
      fc.record({
        kind: fc.constant('event' as const),
        event: fc.constantFrom('', 'message_delta'),
        data: fc.array(fc.string({ unit: fc.constantFrom('a', '€', '😀', ':', ' ') }), { minLength: 1, maxLength: 3 }),
      }),
      fc.record({ kind: fc.constant('comment' as const), event: fc.constant(''), data: fc.constant([] as string[]) }),
    );
    fc.assert(
      fc.property(fc.array(block, { maxLength: 6 }), fc.constantFrom('\n', '\r\n', '\r'), fc.array(fc.nat(), { maxLength: 8 }), (blocks, eol, rawCuts) => {
        const lines = blocks.map((b) =>
          b.kind === 'comment' ? [': keep-alive'] : [...(b.event ? [`event: ${b.event}`] : []), ...b.data.map((d) => `data: ${d}`)],
        );
        const bytes = Buffer.from(lines.map((ls) => ls.map((l) => l + eol).join('') + eol).join(''), 'utf8');
        const cuts = rawCuts.map((c) => (bytes.length ? c % (bytes.length + 1) : 0));
        const got: [string, SseEvent | null][] = [];
        const returned = feed(new SseParser(1 << 20, (raw, e) => got.push([raw, e])), bytes, cuts);
        expect(got.map(([raw]) => raw)).toEqual(lines.map((ls) => ls.map((l) => `${l}\n`).join('') + '\n'));
        expect(got.map(([, e]) => e)).toEqual(blocks.map((b) => (b.kind === 'comment' ? null : { event: b.event, data: b.data.join('\n') })));
        expect(returned).toEqual(got.map(([, e]) => e).filter((e) => e !== null));
      }),
      { numRuns: 300 },
    );
    // a last block without its blank line is handed back at the end, as it came
    const blocks: string[] = [];
    const p = new SseParser(100, (raw) => blocks.push(raw));
    p.push(Buffer.from('data: a\n\ndata: b'));
    expect(blocks).toEqual(['data: a\n\n']);
    p.end();
    expect(blocks).toEqual(['data: a\n\n', 'data: b\n']);
  });

  it('a CR that ends a chunk and an LF that starts a later one (empty chunks between) are one line end', () => {
    const p = new SseParser(100);
    const got = [...p.push(Buffer.from('data: a\r')), ...p.push(Buffer.alloc(0)), ...p.push(Buffer.from('\ndata: b\r\n\r\n'))];
    expect(got).toEqual([{ event: '', data: 'a\nb' }]);
  });

  it('a last event without its blank line is still given at the end; a line past the bound throws', () => {
    const p = new SseParser(100);
    expect(p.push(Buffer.from('data: a\n\ndata: b'))).toEqual([{ event: '', data: 'a' }]);
    expect(p.end()).toEqual([{ event: '', data: 'b' }]);
    const q = new SseParser(100);
    expect(() => q.push(Buffer.from('data: ' + 'x'.repeat(200)))).toThrow(/longer than 100/);
  });
});

describe('bounded JSON', () => {
  it('measures nesting on the text, skipping strings and escapes', () => {
    expect(nestsDeeperThan('[[[]]]', 3)).toBe(false);
    expect(nestsDeeperThan('[[[[]]]]', 3)).toBe(true);
    expect(nestsDeeperThan('{"a":"[[[[[[\\"[[[["}', 1)).toBe(false);
    expect(nestsDeeperThan('[{"a":[{}]}]', 3)).toBe(true);
  });

  it('a body a million levels deep is refused without touching the parser', () => {
    const r = readJson('['.repeat(1_000_000) + ']'.repeat(1_000_000), 64);
    expect(r).toEqual({ ok: false, problem: 'the JSON nests deeper than 64 levels' });
  });
});

describe('credentials', () => {
  it('a bearer token or an x-api-key; a match in either is enough, nothing else is', () => {
    const c = new Credential('oeg-abc');
    expect(c.acceptsAny(presentedKeys({ authorization: 'Bearer oeg-abc' }))).toBe(true);
    expect(c.acceptsAny(presentedKeys({ authorization: 'bearer   oeg-abc ' }))).toBe(true);
    expect(c.acceptsAny(presentedKeys({ 'x-api-key': 'oeg-abc' }))).toBe(true);
    expect(c.acceptsAny(presentedKeys({ authorization: 'Bearer nope', 'x-api-key': 'oeg-abc' }))).toBe(true);
    expect(c.acceptsAny(presentedKeys({ authorization: 'oeg-abc' }))).toBe(false);
    expect(c.acceptsAny(presentedKeys({ authorization: 'Basic oeg-abc' }))).toBe(false);
    expect(c.acceptsAny(presentedKeys({}))).toBe(false);
    expect(c.acceptsAny(['oeg-ab', 'oeg-abcd', ''])).toBe(false);
  });
});

describe('reassembly', () => {
  const ev = (data: unknown): SseEvent => ({ event: '', data: JSON.stringify(data) });

  it('OpenAI chat: several choices and tool calls by index, reasoning text, junk ignored', () => {
    const r = new OpenAIChatReassembler();
    r.event(ev({ id: 'c', model: 'm', choices: [{ index: 1, delta: { role: 'assistant', content: 'B' } }] }));
    r.event(ev({ choices: [{ index: 0, delta: { reasoning_content: 'think' } }] }));
    r.event(ev({ choices: [{ index: 0, delta: { tool_calls: [{ index: 1, id: 't2', function: { name: 'b', arguments: '{}' } }] } }] }));
    r.event(ev({ choices: [{ index: 0, delta: { tool_calls: [{ index: 0, id: 't1', function: { name: 'a', arguments: '{"x"' } }] } }] }));
    r.event(ev({ choices: [{ index: 0, delta: { tool_calls: [{ index: 0, function: { arguments: ':1}' } }] }, finish_reason: 'tool_calls' }] }));
    r.event({ event: '', data: 'not json' });
    r.event(ev([1, 2]));
    r.event({ event: '', data: '[DONE]' });
    const { response, usage } = r.result();
    expect(usage).toBeNull();
    expect(response).toMatchObject({ id: 'c', model: 'm', object: 'chat.completion' });
    const choices = (response as any).choices;
    expect(choices.map((c: any) => c.index)).toEqual([0, 1]);
    expect(choices[0].message).toEqual({
      role: 'assistant',
      content: null,
      reasoning_content: 'think',
      tool_calls: [
        { id: 't1', type: 'function', function: { name: 'a', arguments: '{"x":1}' } },
        { id: 't2', type: 'function', function: { name: 'b', arguments: '{}' } },
      ],
    });
    expect(choices[1].message.content).toBe('B');
  });

  it("Anthropic: a tool input that is not JSON is kept as written; message_delta's usage replaces message_start's", () => {
    const r = new AnthropicMessagesReassembler();
    r.event(ev({ type: 'message_start', message: { id: 'm', usage: { input_tokens: 5, output_tokens: 1, cache_read_input_tokens: 3 } } }));
    r.event(ev({ type: 'content_block_start', index: 0, content_block: { type: 'tool_use', id: 't', name: 'n', input: {} } }));
    r.event(ev({ type: 'content_block_delta', index: 0, delta: { type: 'input_json_delta', partial_json: '{"a":' } }));
    r.event(ev({ type: 'message_delta', delta: { stop_reason: 'max_tokens' }, usage: { output_tokens: 9 } }));
    const { response, usage } = r.result();
    expect((response as any).content).toEqual([{ type: 'tool_use', id: 't', name: 'n', input: {}, input_json: '{"a":' }]);
    expect((response as any).stop_reason).toBe('max_tokens');
    expect(usage).toEqual({ input_tokens: 8, output_tokens: 9, total_tokens: 17 });
  });
});
