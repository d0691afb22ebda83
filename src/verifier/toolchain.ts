/**
 * The toolchain check of an in-place verifier (docs/security.md, "Verification modes"): test.sh
 * runs in the agent's own container, so what it runs (bash, python3, pytest, diff, their
 * libraries, the dynamic loader's configuration) must be what the image holds, not what the agent
 * left. The engine lists every path that differs from the image (`GET /containers/{id}/changes`);
 * a change to one of these tampers with the toolchain, and the episode ends `toolchain_tampered`
 * instead of being scored:
 *
 * - the system's programs and libraries: /usr, /bin, /sbin, /lib, /lib32, /lib64, /libx32;
 * - the dynamic loader's configuration: /etc/ld.so.preload, /etc/ld.so.conf(.d), /etc/ld.so.cache;
 * - who the users are and where their homes are (/etc/passwd, /etc/group), Python's site
 *   configuration in /etc (/etc/python*), the schedules a daemon of the image would run (cron, at);
 * - every folder on the container's PATH (for `…/bin` and `…/sbin`, the folder above it: a venv's,
 *   a conda's or a user's `~/.local`, where its libraries live too), but those in the task's
 *   working folder (the agent's to change by design), and the verifier user's ~/.local (its Python
 *   user site);
 * - a file (not a folder) added at the root of the filesystem: tests in /tests find a
 *   `/conftest.py` or `/pytest.ini` there;
 * - and what the task adds (`protect`); minus what it allows the agent to change (`allow_changes`,
 *   for a task whose agent must install software: the check then trusts those paths).
 *
 * Python's bytecode caches (`__pycache__/`) are left out: every Python the agent runs as root
 * writes them beside the standard library, and the verifier reads none of them (its Python looks
 * for bytecode under a prefix of its own, PYCACHE_PREFIX, never in `__pycache__`).
 *
 * Pure: the changes and the container's PATH and home in, the offending paths out.
 */
import path from 'node:path';
import type { FileChange } from '../sandbox/container-exec.js';

/** always the toolchain's */
export const TOOLCHAIN_PATHS = [
  '/usr',
  '/bin',
  '/sbin',
  '/lib',
  '/lib32',
  '/lib64',
  '/libx32',
  // /usr/bin/awk, which, pager and more resolve through it
  '/etc/alternatives',
  // read by perl and by login or interactive shells that a test.sh may start
  '/etc/perl',
  '/etc/profile',
  '/etc/profile.d',
  '/etc/bash.bashrc',
  '/etc/environment',
  '/etc/ld.so.preload',
  '/etc/ld.so.conf',
  '/etc/ld.so.conf.d',
  '/etc/ld.so.cache',
  '/etc/passwd',
  '/etc/group',
  '/etc/crontab',
  '/etc/cron.d',
  '/etc/cron.hourly',
  '/etc/cron.daily',
  '/var/spool/cron',
  '/var/spool/at',
  '/var/spool/atjobs',
] as const;

export interface ToolchainScope {
  /** the container's PATH, as test.sh gets it */
  pathVar?: string;
  /** the verifier user's home folder */
  home?: string;
  /** the task's working folder: the agent's to change, even where PATH leads into it */
  workdir?: string;
  /** paths the task adds to the check */
  protect?: readonly string[];
  /** paths the task lets the agent change (the check trusts them) */
  allow?: readonly string[];
  /** folders the server itself mounts or writes (the toolbox, /tests, /logs): never the agent's doing */
  server?: readonly string[];
}

const within = (p: string, root: string) => p === root || p.startsWith(root === '/' ? '/' : `${root}/`);

/** a bytecode cache entry: what Python writes as it imports, and the verifier never reads */
const PYCACHE = /(^|\/)__pycache__(\/|$)/;

/** the folders the check covers for this container */
export function protectedPaths(scope: ToolchainScope): string[] {
  const out = new Set<string>(TOOLCHAIN_PATHS);
  for (const dir of (scope.pathVar ?? '').split(':')) {
    if (!dir.startsWith('/') || dir === '/') continue;
    const norm = path.posix.normalize(dir).replace(/\/+$/, '');
    if (scope.workdir && scope.workdir !== '/' && within(norm, scope.workdir)) continue;
    const base = path.posix.basename(norm);
    out.add(base === 'bin' || base === 'sbin' ? path.posix.dirname(norm) : norm);
  }
  if (scope.home && scope.home.startsWith('/') && scope.home !== '/') out.add(path.posix.join(scope.home, '.local'));
  for (const p of scope.protect ?? []) out.add(path.posix.normalize(p));
  // `/bin`'s folder above is the root, which is not the toolchain
  out.delete('/');
  return [...out].sort();
}

/** Python's site configuration in /etc (Debian's /etc/python3.11/sitecustomize.py, which /usr links to) */
const ETC_PYTHON = /^\/etc\/python[\d.]*(\/|$)/;

/** the added paths at the filesystem's root, whose kind (file or folder) the caller must find out for tamperedPaths */
export function rootAdditions(changes: readonly FileChange[]): string[] {
  return changes.filter((c) => c.kind === 'added' && path.posix.dirname(path.posix.normalize(c.path)) === '/').map((c) => path.posix.normalize(c.path));
}

/**
 * The changed paths that tamper with the toolchain, for the failure's message (sorted; a folder
 * the engine lists as changed because something in it changed is judged by what is in it).
 * `rootFiles`: which of rootAdditions() are files (not folders).
 */
export function tamperedPaths(changes: readonly FileChange[], scope: ToolchainScope, rootFiles: ReadonlySet<string> = new Set()): string[] {
  const guarded = protectedPaths(scope);
  const allowed = (scope.allow ?? []).map((p) => path.posix.normalize(p));
  const server = scope.server ?? [];
  // the engine lists a folder as changed because something in it did: what is in it decides
  const ancestors = new Set<string>();
  for (const c of changes) {
    for (let d = path.posix.dirname(path.posix.normalize(c.path)); !ancestors.has(d); d = path.posix.dirname(d)) {
      ancestors.add(d);
      if (d === '/') break;
    }
  }
  const isParent = (p: string) => ancestors.has(p);
  const hits = new Set<string>();
  for (const c of changes) {
    const p = path.posix.normalize(c.path);
    if (isParent(p)) continue;
    if (server.some((s) => within(p, s)) || PYCACHE.test(p)) continue;
    if (allowed.some((a) => within(p, a))) continue;
    if (guarded.some((g) => within(p, g)) || ETC_PYTHON.test(p) || (c.kind === 'added' && rootFiles.has(p))) hits.add(p);
  }
  return [...hits].sort();
}
