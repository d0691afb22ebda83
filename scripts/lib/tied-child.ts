/**
 * A node process the script starts (a server under test) that ends with the script: the kernel
 * sends it SIGTERM the moment the script's process dies, even by SIGKILL (PR_SET_PDEATHSIG,
 * through util-linux's `setpriv --pdeathsig`), so a server of a killed bench or soak drains and
 * removes its envs instead of living on. Where `setpriv` is missing, a plain spawn (and a warning).
 */
import { execFileSync, spawn, type ChildProcess, type SpawnOptions } from 'node:child_process';

let setpriv: boolean | null = null;

/** whether this machine's setpriv knows --pdeathsig (util-linux 2.33 and later) */
function hasSetpriv(): boolean {
  if (setpriv === null) {
    try {
      setpriv = execFileSync('setpriv', ['--help'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).includes('--pdeathsig');
    } catch {
      setpriv = false;
    }
    if (!setpriv) console.warn('[tied-child] no `setpriv --pdeathsig` (util-linux): a server started here outlives this script if it is killed');
  }
  return setpriv;
}

/** `node ...args`, tied to this process: SIGTERMed by the kernel when this process dies (the pid is node's: setpriv execs it) */
export function spawnTiedNode(args: string[], opts: SpawnOptions): ChildProcess {
  return hasSetpriv() ? spawn('setpriv', ['--pdeathsig', 'SIGTERM', '--', process.execPath, ...args], opts) : spawn(process.execPath, args, opts);
}
