/**
 * How every command runs as a process (`openenv-bundle …`, `node dist/serve.js`, `node
 * dist/rows.js`). A command is a promise of an exit code; Node ends the process when it runs out
 * of work, whether or not that promise has settled. So the exit code starts as a failure, and only
 * a settled command sets it: should anything a command waits on stop holding the process open (a
 * timer that does not keep it alive, a forgotten stream), the process ends with exit 1 and says
 * so, instead of ending 0 having done nothing.
 */
import { realpathSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import { visible } from './terminal-text.js';

/** What the process prints when it ends before its command settled. */
export const EXITED_WITHOUT_RESULT = 'exited without a result: the command stopped waiting for work that was still to come (a bug; please report it)';

/** True when the module at `moduleUrl` is the script Node was started with (tests import it instead). */
export function isEntryPoint(moduleUrl: string): boolean {
  const script = process.argv[1];
  if (!script) return false;
  try {
    return moduleUrl === pathToFileURL(realpathSync(script)).href;
  } catch {
    return false;
  }
}

/**
 * Runs `command` as the process's one job: exit code 1 until it settles, then its code; a
 * rejection is printed (one line) and exits 1; ending before it settled prints
 * EXITED_WITHOUT_RESULT.
 */
export function runAsProcess(command: () => Promise<number>): void {
  process.exitCode = 1;
  process.once('exit', onExit);
  void (async () => {
    let code: number;
    try {
      code = await command();
    } catch (e) {
      process.stderr.write(`error: ${visible((e as Error)?.message ?? String(e))}\n`);
      code = 1;
    }
    settled = true;
    process.exitCode = code;
  })();
}

let settled = false;

function onExit(): void {
  if (!settled) process.stderr.write(`error: ${EXITED_WITHOUT_RESULT}\n`);
}

/** Ends the process now with `code`, as a result: for a command that decides to leave (a server's drain, a second Ctrl-C). */
export function exitWith(code: number): never {
  settled = true;
  process.exit(code);
}
