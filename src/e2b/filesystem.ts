/**
 * envd's filesystem service in a sandbox's container (Stat, ListDir, MakeDir, Move, Remove), each
 * a script of the toolbox's shell (never a binary of the image). As envd does, it acts as root
 * and takes the SDK's user for two things: a relative path is taken from that user's home, and
 * what it creates belongs to that user. The user is looked up in the sandbox's own /etc/passwd
 * (the sandbox is its client's: what it says there is what the client made it say). No user
 * named: the image's user acts, as itself.
 */
import { E2B } from '../defaults.js';
import { runTrusted, type TrustedRun } from '../container/index.js';
import { ContainerGoneError, type ContainerExec } from '../sandbox/container-exec.js';
import { FILE_TYPES, type EntryInfo } from '../protocol/e2b.js';
import { ConnectError, type ConnectCode } from './connect-rpc.js';

/** A user name (or uid) an SDK may name: what a passwd entry can be called, nothing a shell reads otherwise. */
export const USER_NAME = /^(?:[A-Za-z_][A-Za-z0-9._-]{0,31}\$?|\d{1,10})$/;

/**
 * The scripts' start: $1 the user ('' for the image's own), $2 the path; sets uid, gid and the
 * absolute path p (a relative one from the user's home), and the `entry` function, which prints
 * one EntryInfo line: `E <mode hex> <size> <owner> <group> <mtime> <len>:<path><len>:<link target>`.
 */
const PRELUDE = `
u=$1; p=$2; shift 2
if [ -n "$u" ]; then
  uid=$(id -u -- "$u" 2>/dev/null) || exit 9
  gid=$(id -g -- "$u" 2>/dev/null) || exit 9
else
  uid=$(id -u); gid=$(id -g)
fi
absolute() {
  case "$1" in
    /*) r=$1 ;;
    *) h=$(awk -F: -v i="$uid" '$3==i{print $6; exit}' /etc/passwd); r="\${h:-/}/$1" ;;
  esac
}
absolute "$p"; p=$r
entry() {
  s=$(stat -c '%f %s %U %G %Y' -- "$1" 2>/dev/null) || return 1
  t=''
  [ -L "$1" ] && t=$(readlink -f -- "$1")
  printf 'E %s %d:%s%d:%s\\n' "$s" \${#1} "$1" \${#t} "$t"
}
owned() { [ -n "$u" ] && chown -h "$uid:$gid" -- "$@"; return 0; }
mkdirs() {
  # each missing folder of $1 made, and given to the user, as envd's EnsureDirs does
  [ -d "$1" ] && return 0
  mkdirs "$(dirname -- "$1")" || return 1
  mkdir -- "$1" 2>/dev/null || [ -d "$1" ] || return 1
  owned "$1"
}
`;

const STAT = `${PRELUDE}
[ -e "$p" ] || [ -L "$p" ] || exit 4
entry "$p" || exit 6
`;

/** $3 the depth, $4 the most entries */
const LIST_DIR = `${PRELUDE}
[ -e "$p" ] || exit 4
[ -d "$p" ] || exit 10
n=0
find "$p" -mindepth 1 -maxdepth "$1" -print0 2>/dev/null | while IFS= read -r -d '' e; do
  n=$((n + 1))
  [ "$n" -gt "$2" ] && { echo MORE; break; }
  entry "$e"
done
exit 0
`;

const MAKE_DIR = `${PRELUDE}
[ -e "$p" ] && exit 8
mkdirs "$p" || exit 7
entry "$p" || exit 6
`;

/** $3 the destination */
const MOVE = `${PRELUDE}
absolute "$1"; dst=$r
[ -e "$p" ] || [ -L "$p" ] || exit 4
mkdirs "$(dirname -- "$dst")" || exit 7
mv -f -- "$p" "$dst" || exit 6
entry "$dst" || exit 6
`;

const REMOVE = `${PRELUDE}
rm -rf -- "$p" || exit 6
`;

/** what each script exit means, for the call's answer */
const WHY: Record<number, [ConnectCode, (p: string) => string]> = {
  3: ['invalid_argument', (p) => `${p} is a folder, not a file`],
  4: ['not_found', (p) => `${p} does not exist`],
  5: ['invalid_argument', (p) => `${p} is not a regular file`],
  6: ['permission_denied', (p) => `${p} could not be read or written`],
  7: ['permission_denied', (p) => `the folders of ${p} could not be made`],
  8: ['already_exists', (p) => `${p} already exists`],
  9: ['unauthenticated', () => 'the user named does not exist in this sandbox (create it first, e.g. useradd, as root)'],
  10: ['invalid_argument', (p) => `${p} is not a folder`],
};

export function scriptFailure(code: number | null, path: string, stderr: string): ConnectError {
  const known = code !== null ? WHY[code] : undefined;
  if (known) return new ConnectError(known[0], known[1](path));
  return new ConnectError('internal', `the sandbox could not do it for ${path}: ${stderr || `exit code ${code}`}`);
}

/** how a script of the prelude is run: as root for a named user, as the image's user otherwise */
export function asUser(user: string | null): { user?: string; imageUser?: boolean } {
  return user === null ? { imageUser: true } : { user: '0' };
}

/** a user the SDK named, checked before it reaches a script or the engine */
export function checkedUser(user: string | null): string | null {
  if (user !== null && !USER_NAME.test(user)) throw new ConnectError('invalid_argument', `${JSON.stringify(user.slice(0, 64))} is not a user name`);
  return user;
}

/** Go's FileMode.String() (what envd's `permissions` says): the type letter, then rwx thrice */
export function permissionsOf(mode: number): string {
  const type = mode & 0o170000;
  const letter =
    type === 0o040000
      ? 'd'
      : type === 0o120000
        ? 'L'
        : type === 0o010000
          ? 'p'
          : type === 0o140000
            ? 'S'
            : type === 0o020000
              ? 'c'
              : type === 0o060000
                ? 'D'
                : '-';
  const rwx = 'rwxrwxrwx';
  let s = '';
  for (let i = 0; i < 9; i++) s += mode & (1 << (8 - i)) ? rwx[i] : '-';
  return letter + s;
}

function typeOf(mode: number): EntryInfo['type'] | null {
  switch (mode & 0o170000) {
    case 0o040000:
      return FILE_TYPES.dir;
    case 0o120000:
      return FILE_TYPES.symlink;
    case 0o100000:
      return FILE_TYPES.file;
    default:
      return null;
  }
}

/** the `E …` lines of a script's stdout, as EntryInfos (entries of no type envd knows are left out, as the SDKs leave them out) */
export function parseEntries(out: Buffer): { entries: EntryInfo[]; more: boolean } {
  const entries: EntryInfo[] = [];
  let at = 0;
  let more = false;
  const readTo = (ch: number) => {
    const end = out.indexOf(ch, at);
    if (end < 0) throw new Error('truncated');
    const s = out.subarray(at, end).toString('utf8');
    at = end + 1;
    return s;
  };
  const readLen = () => {
    const n = Number(readTo(0x3a));
    const s = out.subarray(at, at + n).toString('utf8');
    at += n;
    return s;
  };
  try {
    while (at < out.length) {
      if (out.subarray(at, at + 5).toString() === 'MORE\n') {
        more = true;
        break;
      }
      if (readTo(0x20) !== 'E') throw new Error('not an entry');
      const modeHex = readTo(0x20);
      const size = readTo(0x20);
      const owner = readTo(0x20);
      const group = readTo(0x20);
      const mtime = Number(readTo(0x20));
      const path = readLen();
      const target = readLen();
      at += 1; // the newline
      const mode = parseInt(modeHex, 16);
      const type = typeOf(mode);
      if (type === null) continue;
      entries.push({
        name: path.slice(path.lastIndexOf('/') + 1),
        type,
        path,
        size,
        mode: mode & 0o7777,
        permissions: permissionsOf(mode),
        owner,
        group,
        modifiedTime: new Date(mtime * 1000).toISOString(),
        ...(type === FILE_TYPES.symlink ? { symlinkTarget: target } : {}),
      });
    }
  } catch {
    throw new ConnectError('internal', 'the toolbox answered something that is no list of entries');
  }
  return { entries, more };
}

/** Runs one of the scripts above; a container that is gone is the sandbox's end */
async function run(
  exec: ContainerExec,
  name: string,
  script: string,
  user: string | null,
  path: string,
  args: string[],
  maxStdout = 64 * 1024,
): Promise<TrustedRun> {
  try {
    return await runTrusted(exec, name, script, [user ?? '', path, ...args], { ...asUser(checkedUser(user)), maxStdout });
  } catch (e) {
    if (e instanceof ContainerGoneError) throw new ConnectError('unavailable', `the sandbox's container is not running: ${e.message}`);
    throw e;
  }
}

async function one(exec: ContainerExec, name: string, script: string, user: string | null, path: string, args: string[] = []): Promise<EntryInfo> {
  const r = await run(exec, name, script, user, path, args);
  if (r.exitCode !== 0) throw scriptFailure(r.exitCode, path, r.stderr);
  const { entries } = parseEntries(r.stdout);
  if (entries.length === 0) throw new ConnectError('internal', `${path} is of a type envd does not list (a device, pipe or socket)`);
  return entries[0]!;
}

export const filesystemOps = {
  stat: (exec: ContainerExec, user: string | null, path: string) => one(exec, 'e2b-stat', STAT, user, path),
  makeDir: (exec: ContainerExec, user: string | null, path: string) => one(exec, 'e2b-mkdir', MAKE_DIR, user, path),
  move: (exec: ContainerExec, user: string | null, source: string, destination: string) => one(exec, 'e2b-move', MOVE, user, source, [destination]),
  async remove(exec: ContainerExec, user: string | null, path: string): Promise<void> {
    const r = await run(exec, 'e2b-remove', REMOVE, user, path, []);
    if (r.exitCode !== 0) throw scriptFailure(r.exitCode, path, r.stderr);
  },
  async listDir(exec: ContainerExec, user: string | null, path: string, depth: number): Promise<EntryInfo[]> {
    const r = await run(exec, 'e2b-list-dir', LIST_DIR, user, path, [String(Math.max(1, depth)), String(E2B.listDirMax)], 64 * 1024 * 1024);
    if (r.exitCode !== 0) throw scriptFailure(r.exitCode, path, r.stderr);
    const { entries, more } = parseEntries(r.stdout);
    if (more)
      throw new ConnectError(
        'resource_exhausted',
        `${path} holds more than ${E2B.listDirMax} entries to that depth: list it with less depth, or with a command`,
      );
    return entries;
  },
};

/** What every script of the file transfer starts with too (sandbox-files.ts). */
export { PRELUDE as FILE_SCRIPT_PRELUDE };
