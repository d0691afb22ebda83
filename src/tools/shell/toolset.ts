/**
 * The shell toolset of one episode: `bash`, `read_file` and `write_file` in one container,
 * answered as an env answers /tools/call (docs/bundle-format.md, the env contract): a reply with
 * `text` for the model, a structured `result` and `is_error` for the tool's own failures (a
 * timeout, a missing file), or the model's mistake in its arguments (`invalid_args`, said by the
 * tool's argument schema in specs.ts). Only a
 * container that is gone (ContainerGoneError) or a shell that cannot start (ShellStartError)
 * is thrown: those are the env's failure, not the call's.
 */
import type { z } from 'zod';
import { SHELL_TOOLS } from '../../defaults.js';
import { FileToolError, readFileSlice, resolvePath, resolveUser, writeFileBytes } from '../../container/index.js';
import type { ContainerExec } from '../../sandbox/container-exec.js';
import type { ShellLimits, ShellSettings } from './shell-process.js';
import { ShellSession, type ShellRun } from './shell-session.js';
import {
  argumentsProblem,
  BASH_ARGS,
  BASH_TOOL,
  READ_FILE_ARGS,
  READ_FILE_TOOL,
  SHELL_TOOL_NAMES,
  WRITE_FILE_ARGS,
  WRITE_FILE_TOOL,
  type BashArgs,
  type ReadFileArgs,
  type WriteFileArgs,
} from './specs.js';

export interface ShellToolReply {
  /** what the model reads */
  text: string;
  /** the call's facts, for clients and transcripts (no copy of the output) */
  result: Record<string, unknown>;
  /** the tool's own failure: the model reads it as a failed call; the episode goes on */
  is_error: boolean;
}

export type ShellToolOutcome = { kind: 'reply'; reply: ShellToolReply } | { kind: 'invalid_args' | 'tool_not_found'; message: string };

const invalid = (message: string): ShellToolOutcome => ({ kind: 'invalid_args', message });
const reply = (text: string, result: Record<string, unknown>, isError = false): ShellToolOutcome => ({
  kind: 'reply',
  reply: { text, result, is_error: isError },
});

/** runs a tool on its arguments parsed by its schema (specs.ts), or says the model's mistake in them */
async function parsed<S extends z.ZodTypeAny>(
  schema: S,
  args: Record<string, unknown>,
  tool: (a: z.output<S>) => Promise<ShellToolOutcome>,
): Promise<ShellToolOutcome> {
  const r = schema.safeParse(args);
  return r.success ? tool(r.data as z.output<S>) : invalid(argumentsProblem(r.error));
}

/** the text a bash call answers: its output, then what became of it */
export function bashText(run: ShellRun, timeoutS: number): string {
  const parts: string[] = [];
  if (run.startedAfresh) {
    parts.push(
      `[a new shell was started: ${run.restartedBecause ?? 'the previous shell had ended'}; the state the last completed command left broke it (${run.startedAfresh}), so this one starts afresh in the working directory, with none of the exported variables]`,
    );
  } else if (run.restartedBecause) {
    parts.push(`[a new shell was started: ${run.restartedBecause}; its working directory and exported variables are those the last completed command left]`);
  }
  const out = run.output.text;
  if (out !== '') parts.push(out.endsWith('\n') ? out.slice(0, -1) : out);
  if (run.interrupted) {
    parts.push(`[stopped: ${run.interrupted}; the command was killed, with every process it started${run.shellDied ? ', and the shell with it' : ''}]`);
  } else if (run.timedOut) {
    parts.push(`[timed out after ${timeoutS} s: the command was killed, with every process it started${run.shellDied ? ', and the shell with it' : ''}]`);
  } else if (run.shellDied) {
    parts.push(
      '[the shell exited while this command ran; the next call starts a new one, in the working directory and with the exported variables the last completed command left]',
    );
  } else {
    parts.push(`[exit code ${run.exitCode}]`);
  }
  return parts.join('\n');
}

/** UTF-8 text, or null when the bytes are not (or hold NUL, which no text file does) */
function asText(data: Buffer): string | null {
  if (data.includes(0)) return null;
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(data);
  } catch {
    return null;
  }
}

/** the bytes of `data` up to its last complete UTF-8 character (a read cut mid-character resumes there) */
function toCharBoundary(data: Buffer): Buffer {
  for (let back = 1; back <= Math.min(3, data.length); back++) {
    const byte = data[data.length - back]!;
    if ((byte & 0xc0) === 0x80) continue;
    const need = byte >= 0xf0 ? 4 : byte >= 0xe0 ? 3 : byte >= 0xc0 ? 2 : 1;
    return need > back ? data.subarray(0, data.length - back) : data;
  }
  return data;
}

export class ShellToolset {
  readonly session: ShellSession;
  /** who the file tools act as: the shell's user, as uid:gid */
  private user: Promise<string> | null = null;

  private readonly settingsUser: string | undefined;

  constructor(
    private readonly exec: ContainerExec,
    settings: ShellSettings = {},
    limits?: ShellLimits,
  ) {
    this.settingsUser = settings.user;
    this.session = new ShellSession(exec, settings, limits);
    if (settings.user && /^\d+:\d+$/.test(settings.user)) this.user = Promise.resolve(settings.user);
  }

  static has(name: string): boolean {
    return SHELL_TOOL_NAMES.includes(name);
  }

  async call(name: string, args: Record<string, unknown>): Promise<ShellToolOutcome> {
    switch (name) {
      case BASH_TOOL:
        return parsed(BASH_ARGS, args, (a) => this.bash(a));
      case READ_FILE_TOOL:
        return parsed(READ_FILE_ARGS, args, (a) => this.readFile(a));
      case WRITE_FILE_TOOL:
        return parsed(WRITE_FILE_ARGS, args, (a) => this.writeFile(a));
      default:
        return { kind: 'tool_not_found', message: `no shell tool "${name}"; the shell tools are ${SHELL_TOOL_NAMES.join(', ')}` };
    }
  }

  private async bash({ command, timeout_s: t = SHELL_TOOLS.defaultTimeoutS }: BashArgs): Promise<ShellToolOutcome> {
    const run = await this.session.run(command, t * 1000);
    return reply(
      bashText(run, t),
      {
        exit_code: run.exitCode,
        timed_out: run.timedOut,
        interrupted: run.interrupted !== null,
        output_bytes: run.output.totalBytes,
        dropped_bytes: run.output.droppedBytes,
        shell_restarted: run.restartedBecause !== null,
        shell_died: run.shellDied,
        cwd: run.cwd,
        duration_s: run.durationMs / 1000,
      },
      run.timedOut || run.interrupted !== null || run.shellDied,
    );
  }

  private async readFile({ path: p, offset = 0, limit = SHELL_TOOLS.readDefaultBytes }: ReadFileArgs): Promise<ShellToolOutcome> {
    const { cwd } = await this.session.where();
    const abs = resolvePath(cwd, p);
    let slice;
    try {
      slice = await readFileSlice(this.exec, abs, offset, limit, await this.fileUser());
    } catch (e) {
      if (e instanceof FileToolError) return reply(e.message, { path: abs }, true);
      throw e;
    }
    const whole = slice.offset === 0 && slice.data.length === slice.size;
    // a read of text that stops inside a character ends before it: the next read starts there
    // (binary goes as base64, whole: it has no characters to keep whole)
    const cut = slice.offset + slice.data.length < slice.size ? toCharBoundary(slice.data) : slice.data;
    const text = asText(cut);
    const data = text === null ? slice.data : cut;
    const end = slice.offset + data.length;
    const next = end < slice.size ? end : null;
    const result = { path: abs, size: slice.size, offset: slice.offset, bytes: data.length, encoding: text === null ? 'base64' : 'utf-8', next_offset: next };
    if (text !== null && whole) return reply(text, result);
    const range = `bytes ${slice.offset}–${end} of ${slice.size}${next !== null ? `; read on with offset=${next}` : ''}`;
    if (text === null) return reply(`[read_file: ${abs} is not UTF-8 text; ${range}, base64-encoded on the next line]\n${data.toString('base64')}`, result);
    return reply(`${text}\n[read_file: ${range}]`, result);
  }

  private async writeFile({ path: p, content }: WriteFileArgs): Promise<ShellToolOutcome> {
    const data = Buffer.from(content, 'utf8');
    const { cwd } = await this.session.where();
    const abs = resolvePath(cwd, p);
    try {
      const { real, created } = await writeFileBytes(this.exec, abs, data, await this.fileUser());
      return reply(`wrote ${data.length} bytes to ${abs}${real !== abs ? ` (${real})` : ''}${created ? ', a new file' : ''}`, {
        path: abs,
        bytes: data.length,
        created,
      });
    } catch (e) {
      if (e instanceof FileToolError) return reply(e.message, { path: abs }, true);
      throw e;
    }
  }

  /**
   * The shell's user as uid:gid: as the episode resolved it (ShellSettings.user), else resolved
   * here once (a toolset made without one: the container's own user).
   */
  private fileUser(): Promise<string> {
    this.user ??= resolveUser(this.exec, this.settingsUser);
    return this.user;
  }

  /** stops the bash command in flight, if any (ShellSession.interrupt) */
  interrupt(why: string): void {
    this.session.interrupt(why);
  }

  close(): Promise<void> {
    return this.session.close();
  }
}
