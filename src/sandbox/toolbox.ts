/**
 * The toolbox: what the server runs inside an env's container for its own steps (stopping the
 * agent, reading the container's clock, installing a verifier's tests, reading and writing files
 * as the agent's user, its readiness probe, the keeper that holds a shell env open). Nothing of
 * the image may serve those steps: a policy that is root in its env can replace any binary of the
 * image (`/usr/local/bin/bash`, `sh`, `cat`), preload a library into every dynamic one
 * (`/etc/ld.so.preload`), or wrap them through `PATH`. So every env container gets a static
 * busybox, the server's own copy, mounted read-only from a volume the server fills (no process in
 * the container can write it, remount it, or preload anything into it), at a folder whose name is
 * chosen per env; the server runs it by absolute path, its applets preferred to anything on
 * `PATH` (the shell's standalone mode), with an emptied environment. docs/security.md says what
 * this guarantees and what it cannot.
 *
 * This file holds what both the sandbox (which mounts it) and the rooms above it (which run it)
 * need to agree on; the volume itself is the engine's (engine/toolbox-volume.ts).
 */
import { randomBytes } from 'node:crypto';

/** the binary's name in its folder: busybox picks its applet by the name it was called as, so it keeps this one */
export const TOOLBOX_BINARY = 'busybox';

/** A folder at the container's root, named for one env: where its toolbox is mounted (read-only). */
export function newToolboxDir(): string {
  return `/.openenv-toolbox-${randomBytes(6).toString('hex')}`;
}

/** the toolbox's binary in a container whose toolbox is mounted at `dir` */
export function toolboxBinary(dir: string): string {
  return `${dir}/${TOOLBOX_BINARY}`;
}

/**
 * What the server runs in a container: the toolbox's shell on `script` (its `$0` the name, its
 * `$1`… the arguments), with nothing of the container's environment (`env -i`: no variable of the
 * image reaches the server's steps) and only the toolbox's own folder on PATH.
 */
export function toolboxCommand(binary: string, name: string, script: string, args: readonly string[] = []): string[] {
  const dir = binary.slice(0, binary.lastIndexOf('/'));
  return [binary, 'env', '-i', `PATH=${dir}`, binary, 'sh', '-c', script, name, ...args];
}

/**
 * A non-root user's command, through the toolbox's shell: it finds the program on PATH (builtins
 * only) and execs it by its absolute path. Under gVisor (this runsc) the first process of an exec
 * keeps the container's capabilities whatever its user, so a uid-1000 shell started directly could
 * write into root's folders (DAC_OVERRIDE); an execve inside the sandbox recomputes them as the
 * kernel does for a non-root user: none. Under runc the kernel's own execve already did. The
 * absolute path matters: the toolbox runs its own applets for bare names (`sh`, `cat`), never the
 * image's.
 */
const AS_USER_SCRIPT = [
  'p=$1; shift',
  'case $p in',
  '*/*) ;;',
  '*) found=; IFS=:; for d in ${PATH:-/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin}; do',
  '  if [ -f "$d/$p" ] && [ -x "$d/$p" ]; then found=$d/$p; break; fi',
  'done; unset IFS',
  '[ -n "$found" ] || { echo "$p: not found on PATH" >&2; exit 127; }',
  'p=$found ;;',
  'esac',
  'exec "$p" "$@"',
].join('\n');

/** whether an exec's `user` (a name, a uid, `uid:gid`; none: the image's) is root by uid or name */
export function isRootUser(user: string | undefined): boolean {
  const who = (user ?? '').split(':')[0];
  return who === '0' || who === 'root';
}

/** `cmd` as a non-root user runs it: through the toolbox (above), unless the toolbox itself is the program */
export function commandAsUser(binary: string, cmd: readonly string[]): string[] {
  return cmd[0] === binary ? [...cmd] : [binary, 'sh', '-c', AS_USER_SCRIPT, 'openenv-as-user', ...cmd];
}

/**
 * The keeper: what a shell env's container runs as its process 1 instead of the image's command.
 * It waits forever, restarting its wait should something kill it, and reaps every orphan the
 * agent leaves (the shell's `wait` takes any child). The kernel delivers no signal to a
 * namespace's process 1 from inside that it has not asked for, so under runc no process of the
 * agent (root or not) can end the container: `kill -9 -1` takes the agent's own shell and leaves
 * the env up. gVisor (this runsc) does deliver SIGKILL and the default-action signals to it: the
 * keeper ignores every signal it can; a SIGKILL from inside ends the container, which the
 * episode then tells from the engine's own kills (docs/security.md).
 */
const KEEPER = ['trap "" HUP INT QUIT PIPE ALRM TERM USR1 USR2 TSTP TTIN TTOU', 'while :; do "$1" sleep 2147483647 & wait; done'].join('\n');

/** the keeper's `$0`: a container whose command holds it is one the keeper holds open */
export const KEEPER_NAME = 'openenv-keeper';

/** the keeper as a container's command (the image's ENTRYPOINT, if any, runs it) */
export function keeperCommand(binary: string): string[] {
  return [binary, 'sh', '-c', KEEPER, KEEPER_NAME, binary];
}
