/**
 * `openenv-bundle play URL [--task ID | --split S --index I]`: one episode of a running server,
 * played by hand over /ws, for the person who wants to feel a task before writing a policy. It
 * resets to the task, prints its prompt and tools, then reads one command a line (a terminal, or
 * lines piped in: each waits for the reply to the one before): call a tool with JSON arguments,
 * end the turn, see the reward. The session closes when the episode ends, on `quit`, at the end
 * of the input or on Ctrl-C, and the server tears the env down.
 */
import { createInterface } from 'node:readline';
import { z } from 'zod';
import { END_TURN } from '../bundle/index.js';
import { ServerSession, SessionError } from '../client/session.js';
import type { ServerFrame } from '../protocol/frames.js';
import type { CallObservation, Ending, ResetObservation } from '../protocol/observations.js';
import { defineCommand, EXIT, stopOnInterrupt, type CliIo } from './command.js';
import { httpUrl, secretFrom, variableName } from './rollout-options.js';
import { visible } from './terminal-text.js';

const HELP = [
  'commands:',
  '  TOOL [JSON]      call a tool; JSON is its arguments object (default {}), e.g. get_hint {}',
  '  end [ANSWER]     end the turn (end_turn), with an answer if you give one',
  '  tools            the tools and their arguments',
  '  state            the episode: step count, turn, phase',
  '  help             this list',
  '  quit             close the episode (Ctrl-D and Ctrl-C too)',
].join('\n');

/** `text` with each line indented (lines end at newlines only: a carriage return is shown, not a line) */
const indent = (text: string, by = '  ') =>
  text
    .split('\n')
    .map((l) => by + l)
    .join('\n');

/** An error frame as one line: `VALIDATION_ERROR: unknown task …`. */
function frameError(f: Extract<ServerFrame, { type: 'error' }>): string {
  const d = f.data;
  return `${d.code}: ${d.message}${d.failure ? ` (${d.failure.reason})` : ''}`;
}

/** A frame that is not the answer asked for, as one line. */
function unexpected(f: ServerFrame): string {
  return f.type === 'error' ? frameError(f) : `unexpected answer: ${JSON.stringify(f).slice(0, 300)}`;
}

function describeTools(tools: ResetObservation['tools']): string {
  return tools
    .map((t) => {
      const props = (t.input_schema as { properties?: Record<string, { type?: unknown }>; required?: string[] }).properties ?? {};
      const required = new Set((t.input_schema as { required?: string[] }).required ?? []);
      const args = Object.entries(props).map(([k, v]) => `${k}${required.has(k) ? '' : '?'}: ${typeof v.type === 'string' ? v.type : 'any'}`);
      const about = t.description.split('\n')[0]!;
      return `  ${t.name} {${args.join(', ')}}${about ? `  ${about.length > 100 ? `${about.slice(0, 99)}…` : about}` : ''}`;
    })
    .join('\n');
}

/** What a tool call's observation says, as a person reads it (an episode that ended between steps says nothing more). */
function describeCall(o: CallObservation | Ending): string {
  if (!('tool_name' in o)) return '';
  const lines: string[] = [];
  if (o.error) lines.push(`error (${o.error.error_type}): ${o.error.message}`);
  if (o.result) {
    const text = o.result.content.map((c) => c.text).join('\n');
    const body = text || (o.result.structured_content ? JSON.stringify(o.result.structured_content) : '');
    lines.push(o.result.is_error ? `tool error: ${body}` : body);
  }
  if (o.turn !== undefined && !o.done) lines.push(`(turn ${o.turn})`);
  return lines.join('\n');
}

/** The ending: reward and scores, or the failure (never a reward). */
function describeEnding(o: CallObservation | Ending, reward: number | null): string {
  if (o.failure) return `episode over (${o.end_reason}): the env failed, ${o.failure.reason} in phase ${o.failure.phase}: ${o.failure.message}; no reward`;
  const scores = Object.entries(o.scores ?? {})
    .map(([k, v]) => `${k} ${v}`)
    .join(', ');
  return `episode over (${o.end_reason}): reward ${reward ?? 'none'}${scores ? `; scores ${scores}` : ''}`;
}

interface Parsed {
  tool: string;
  args: unknown;
}

/** A line → a tool call, a word of the REPL's own, or a mistake to show. */
function parseLine(line: string): Parsed | 'tools' | 'state' | 'help' | 'quit' | { mistake: string } | null {
  const text = line.trim();
  if (text === '' || text.startsWith('#')) return null;
  const [word, ...restWords] = text.split(/\s+/);
  const rest = text.slice(word!.length).trim();
  if (['tools', 'state', 'help', 'quit'].includes(word!) && restWords.length === 0) return word as 'tools' | 'state' | 'help' | 'quit';
  if (word === 'exit' && restWords.length === 0) return 'quit';
  if (word === 'end') return { tool: END_TURN, args: rest ? { answer: rest } : {} };
  if (rest === '') return { tool: word!, args: {} };
  try {
    const args: unknown = JSON.parse(rest);
    if (typeof args !== 'object' || args === null || Array.isArray(args))
      return { mistake: `the arguments must be a JSON object, e.g. ${word} {"key": "value"}` };
    return { tool: word!, args };
  } catch (e) {
    return { mistake: `the arguments are not JSON (${(e as Error).message}); e.g. ${word} {"key": "value"}` };
  }
}

async function play(
  url: string,
  reset: Record<string, unknown>,
  token: string | null,
  resetTimeoutS: number,
  toolTimeoutS: number,
  io: CliIo,
): Promise<number> {
  // what the env, the task and the server say, never a control the terminal would act on
  const out = (s: string) => io.stdout.write(`${visible(s)}\n`);
  const stop = stopOnInterrupt(io);
  const session = await ServerSession.open(url, { token });
  const replyWait = (seconds: number, what: string) => ({ timeoutMs: (seconds + 10) * 1000, what, signal: stop.signal });
  const input = io.stdin ?? process.stdin;
  const rl = createInterface({
    input,
    terminal: Boolean(input.isTTY && io.stdout.isTTY),
    output: input.isTTY ? (io.stdout as NodeJS.WritableStream) : undefined,
  });
  // iterating from the start: lines piped in while the reset deploys wait their turn, none is lost
  const lines = rl[Symbol.asyncIterator]();
  rl.on('SIGINT', () => rl.close());
  stop.signal.addEventListener('abort', () => rl.close(), { once: true });
  let lost = false;
  void session.closed.then(() => {
    lost = true;
    rl.close();
  });
  try {
    out(`resetting ${JSON.stringify(reset)} (waits for a slot and a deploy, at most ${resetTimeoutS} s)…`);
    const first = await session.reset({ ...reset, reset_timeout_s: resetTimeoutS }, replyWait(resetTimeoutS, '--reset-timeout'));
    if (first.type === 'error') throw new Error(`the reset was refused: ${frameError(first)}`);
    if (first.type !== 'observation' || !('episode_id' in first.data.observation)) {
      throw new Error(`the reset's answer is not a reset observation: ${JSON.stringify(first).slice(0, 300)}`);
    }
    const task: ResetObservation = first.data.observation;
    out(`episode ${task.episode_id}: task ${task.task_id} (split ${task.split}, index ${task.index}), turn ${task.turn} of ${task.turns}`);
    for (const m of task.messages) out(`${m.role}:\n${indent(m.content)}`);
    out(`tools:\n${describeTools(task.tools)}`);
    out(`type a tool and its JSON arguments, "end" to end the turn, "help" for more`);
    rl.setPrompt('> ');
    rl.prompt();
    for (;;) {
      const next = await lines.next();
      if (next.done) break;
      const cmd = parseLine(next.value as string);
      if (cmd === null) {
        rl.prompt();
        continue;
      }
      if (cmd === 'quit') break;
      if (cmd === 'help') out(HELP);
      else if (cmd === 'tools') out(`tools:\n${describeTools(task.tools)}`);
      else if (cmd === 'state') {
        const f = await session.state(replyWait(10, 'the state'));
        out(f.type === 'state' ? JSON.stringify(f.data) : unexpected(f));
      } else if ('mistake' in cmd) out(cmd.mistake);
      else {
        const f = await session.call(cmd.tool, cmd.args, replyWait(toolTimeoutS, '--tool-timeout'));
        if (f.type !== 'observation' || 'tools' in f.data.observation) out(`error: ${unexpected(f)}`);
        else {
          const o = f.data.observation;
          const said = describeCall(o);
          if (said) out(said);
          if (f.data.done) {
            out(describeEnding(o, f.data.reward));
            return o.failure ? EXIT.problems : EXIT.ok;
          }
        }
      }
      rl.prompt();
    }
    if (lost) {
      const c = session.closeInfo;
      throw new Error(`the server closed the session (${c?.code ?? ''}${c?.reason ? ` ${c.reason}` : ''}) before the episode ended`);
    }
    out(stop.signal.aborted ? '\ninterrupted: closing the episode' : 'closing the episode (the server tears its env down)');
    return stop.signal.aborted ? EXIT.problems : EXIT.ok;
  } catch (e) {
    if (stop.signal.aborted) {
      out('\ninterrupted: closing the episode');
      return EXIT.problems;
    }
    if (e instanceof SessionError) throw new Error(e.message, { cause: e });
    throw e;
  } finally {
    rl.close();
    stop.dispose();
    await session.close();
  }
}

export const playCommand = defineCommand({
  name: 'play',
  summary: 'play one episode of a running server by hand: call tools, end turns, see the reward',
  synopsis: 'URL [--task ID | --split S --index I] [options]',
  about: [
    "Plays one episode of a running server's task by hand over /ws: resets to the task (it waits",
    'for a slot like any reset), prints its prompt and tools, then reads a command a line: a tool',
    'name and its JSON arguments (`get_hint {}`), `end [ANSWER]` to end the turn, `tools`, `state`,',
    '`help`, `quit`. Each reply is printed; the episode ends with its reward and scores (or the',
    "env's failure). Lines may be piped in: each waits for the reply to the one before. Without a",
    "task, the server picks one of its default split's.",
  ],
  positionals: { url: { name: 'URL', schema: httpUrl('URL', 'http://127.0.0.1:8200'), help: 'the running bundle server, e.g. http://127.0.0.1:8200' } },
  options: {
    task: { schema: z.string().min(1).optional(), value: 'ID', help: 'the task to play, by its task_id', shownDefault: "one of the default split's" },
    split: { schema: z.string().min(1).optional(), value: 'S', help: 'the split of the task to play (with --index)' },
    index: { schema: z.coerce.number().int().min(0).optional(), value: 'I', help: 'the task at this index of --split (from 0)' },
    tokenVar: { schema: variableName('token-var'), value: 'NAME', help: "the environment variable holding the server's token", shownDefault: 'no token' },
    resetTimeout: { schema: z.coerce.number().positive().finite().default(600), value: 'S', help: 'seconds the reset may wait for a slot and a deploy' },
    toolTimeout: { schema: z.coerce.number().positive().finite().default(60), value: 'S', help: 'seconds to wait for one tool call' },
  },
  refine(a, ctx) {
    if (a.task !== undefined && (a.split !== undefined || a.index !== undefined)) {
      ctx.addIssue({ code: z.ZodIssueCode.custom, path: ['task'], message: '--task names the task by itself: give --task, or --split with --index, not both' });
    }
    if (a.index !== undefined && a.split === undefined) ctx.addIssue({ code: z.ZodIssueCode.custom, path: ['index'], message: '--index needs --split' });
  },
  footer: ['Exit codes: 0 the episode was scored (or you quit), 1 the env failed or the server could not be played, 2 a command line to fix.'],
  async run(a, io) {
    const token = secretFrom(a.tokenVar, io.env, 'token-var');
    const reset: Record<string, unknown> =
      a.task !== undefined ? { task_id: a.task } : a.split !== undefined ? { split: a.split, ...(a.index !== undefined ? { index: a.index } : {}) } : {};
    return play(a.url, reset, token, a.resetTimeout, a.toolTimeout, io);
  },
});
