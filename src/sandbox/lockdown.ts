/**
 * Env lock-down, the policy (docs/security.md, Envs locked down): what every env gets, what a
 * bundle env may ask for by name (EnvSecuritySchema, the manifest's `security`), what it was
 * granted (`granted`, what `check` and the console show) and the bounds of its writable layer
 * (`withLayerDefaults`: its bundle's, else the server's --default-storage-mb, --default-max-files).
 * No engine's words here: engine/hardening.ts says this policy in each backend's settings.
 * Each default was proven on the engine (test/security/lockdown.docker.test.ts):
 *
 * - capabilities: all dropped but DEFAULT_CAPABILITIES, the short set a shell and common images
 *   need as root (install packages, chown, run a command as another user, signal it); a bundle adds
 *   more by name, never one of REFUSED_CAPABILITIES (each lets a container reach the host);
 * - `no-new-privileges`: a setuid binary gains nothing;
 * - an init process as PID 1: it reaps orphaned zombies and passes signals on, so an env's
 *   process need not be written to be PID 1;
 * - ulimits: open files (ENV_LOCKDOWN.nofile) and no core dumps. Processes are bounded by the pids
 *   limit (a cgroup, per container), not RLIMIT_NPROC: the kernel counts that per user id across the
 *   whole host (two envs running as uid 1000 would share one budget, so one env's fork bomb would
 *   starve the other) and ignores it for root;
 * - memory (no swap above it), CPU and pids as the manifest's resources say. Under gVisor (runsc)
 *   the sandbox's own host threads count against the pids cgroup (about 56 at rest and 5 per guest
 *   process, measured), so the limit given to the engine is scaled to leave the env its `pids`
 *   (enginePidsLimit);
 * - root filesystem: writable (the image's), or read-only with a size-bounded tmpfs at /tmp (its
 *   pages count against the memory limit);
 * - user: the image's, or the one the bundle names.
 */
import { z } from 'zod';
import { ENV_LOCKDOWN } from '../defaults.js';
import type { EnvGrant } from '../protocol/bundle.js';
import type { EnvResources, EnvRuntime, EnvSecurityAsk, LayerBound } from './sandbox.js';

/** Linux capabilities by the names Docker takes (without CAP_). */
export const LINUX_CAPABILITIES = [
  'AUDIT_CONTROL',
  'AUDIT_READ',
  'AUDIT_WRITE',
  'BLOCK_SUSPEND',
  'BPF',
  'CHECKPOINT_RESTORE',
  'CHOWN',
  'DAC_OVERRIDE',
  'DAC_READ_SEARCH',
  'FOWNER',
  'FSETID',
  'IPC_LOCK',
  'IPC_OWNER',
  'KILL',
  'LEASE',
  'LINUX_IMMUTABLE',
  'MAC_ADMIN',
  'MAC_OVERRIDE',
  'MKNOD',
  'NET_ADMIN',
  'NET_BIND_SERVICE',
  'NET_BROADCAST',
  'NET_RAW',
  'PERFMON',
  'SETFCAP',
  'SETGID',
  'SETPCAP',
  'SETUID',
  'SYSLOG',
  'SYS_ADMIN',
  'SYS_BOOT',
  'SYS_CHROOT',
  'SYS_MODULE',
  'SYS_NICE',
  'SYS_PACCT',
  'SYS_PTRACE',
  'SYS_RAWIO',
  'SYS_RESOURCE',
  'SYS_TIME',
  'SYS_TTY_CONFIG',
  'WAKE_ALARM',
] as const;
export type Capability = (typeof LINUX_CAPABILITIES)[number];

/**
 * What every env keeps, each for something a shell or a common image does as root (proven one by
 * one: dropping it makes that fail):
 * CHOWN (chown, tar and apt keeping owners), DAC_OVERRIDE (root reading and writing files it does
 * not own), FOWNER (chmod and utime on files of other users), FSETID (keeping setgid bits), KILL
 * (signalling a command run as another user, e.g. on a timeout), SETGID and SETUID (`su`,
 * `setpriv`, apt dropping to its `_apt` user). Docker's defaults also keep NET_RAW (raw packets on
 * the episode network, ARP spoofing), MKNOD, AUDIT_WRITE, SETFCAP, SETPCAP, NET_BIND_SERVICE (not
 * needed: the engine lets any user bind a port below 1024 in a container) and SYS_CHROOT: dropped.
 */
export const DEFAULT_CAPABILITIES: readonly Capability[] = ['CHOWN', 'DAC_OVERRIDE', 'FOWNER', 'FSETID', 'KILL', 'SETGID', 'SETUID'];

/**
 * Never granted, whatever a bundle asks: each breaks the container's walls (mounts and namespaces,
 * kernel modules, raw devices and memory, open_by_handle_at on the host's filesystem, eBPF and
 * perf, the host's clock, log and accounting, the LSMs) or lifts the bounds (SYS_RESOURCE).
 */
export const REFUSED_CAPABILITIES: readonly Capability[] = [
  'SYS_ADMIN',
  'SYS_MODULE',
  'SYS_RAWIO',
  'SYS_BOOT',
  'SYS_TIME',
  'SYS_PACCT',
  'SYS_TTY_CONFIG',
  'SYS_RESOURCE',
  'DAC_READ_SEARCH',
  'MAC_ADMIN',
  'MAC_OVERRIDE',
  'BPF',
  'PERFMON',
  'SYSLOG',
  'AUDIT_CONTROL',
  'AUDIT_READ',
  'CHECKPOINT_RESTORE',
  'LINUX_IMMUTABLE',
  'WAKE_ALARM',
  'BLOCK_SUSPEND',
];

const CapabilityName = z
  .string()
  .transform((s) => s.toUpperCase().replace(/^CAP_/, ''))
  .pipe(z.enum(LINUX_CAPABILITIES, { errorMap: () => ({ message: 'expected a Linux capability name such as NET_RAW or SYS_PTRACE' }) }))
  .refine(
    (c) => !REFUSED_CAPABILITIES.includes(c),
    (c) => ({ message: `${c} is never granted to an env: it lets a container reach the host` }),
  );

/** `1000`, `1000:1000`, or a user (and group) name the image knows */
export const USER_PATTERN = /^([a-z_][a-z0-9_-]{0,31}|\d{1,10})(:([a-z_][a-z0-9_-]{0,31}|\d{1,10}))?$/;

/**
 * What a bundle env may ask for beyond the defaults, by name (bundle.json's `envs.<name>.security`,
 * to be wired into the manifest's schema): more capabilities, a read-only root (with a tmpfs at
 * /tmp of `tmp_mb`), a user.
 */
export const EnvSecuritySchema = z
  .object({
    capabilities: z.array(CapabilityName).default([]).describe('capabilities added to the default set, e.g. ["NET_RAW", "SYS_PTRACE"]'),
    root: z.enum(['writable', 'read-only']).default('writable').describe("the root filesystem: the image's, writable, or read-only with a tmpfs at /tmp"),
    tmp_mb: z
      .number()
      .int()
      .min(1)
      .optional()
      .describe(`size of the tmpfs at /tmp when root is read-only (counts against memory_mb; default ${ENV_LOCKDOWN.readOnlyTmpMb})`),
    user: z
      .string()
      .regex(USER_PATTERN, 'expected a user id, uid:gid, or a user name of the image')
      .optional()
      .describe("the user the env runs as (default: the image's)"),
    runtime: z
      .literal('runsc', { errorMap: () => ({ message: 'expected "runsc": an env may ask for gVisor; otherwise the server\'s --runtime decides' }) })
      .optional()
      .describe("run this env under gVisor (runsc) whatever the server's --runtime; the engine must have it"),
  })
  .strict('unknown field; the fields here are capabilities, root, tmp_mb, user, runtime');
export type EnvSecurity = z.output<typeof EnvSecuritySchema>;
/** what the schema gives is what an EnvSpec carries (sandbox.ts declares it) */
export const asSecurityAsk = (s: EnvSecurity): EnvSecurityAsk => s;

export interface LockdownInput {
  resources: EnvResources;
  /** what the bundle asked for (EnvSecuritySchema's output); absent: the defaults */
  security?: EnvSecurityAsk;
  /** absent: the engine's default runtime */
  runtime?: EnvRuntime;
}

/** What an env was granted, for `check` and the console to show (the wire shape of /bundle's `envs`). */
export type Granted = EnvGrant;

/** the capabilities an env keeps: the defaults and what its bundle asked for (EnvSecuritySchema refused the rest) */
export function capabilitiesOf(security: EnvSecurityAsk | undefined): { all: string[]; added: string[] } {
  const added = [...new Set(security?.capabilities ?? [])].filter((c) => !DEFAULT_CAPABILITIES.includes(c as Capability)).sort();
  return { all: [...DEFAULT_CAPABILITIES, ...added].sort(), added };
}

/** The pids limit given to the engine: the env's own, plus what gVisor's sandbox takes of it under runsc. */
export function enginePidsLimit(pids: number, runtime: EnvRuntime | undefined): number {
  return runtime === 'runsc' ? ENV_LOCKDOWN.runscPidsBase + ENV_LOCKDOWN.runscPidsPerProcess * pids : pids;
}

export function tmpMb(security: EnvSecurityAsk | undefined): number | null {
  return security?.root === 'read-only' ? (security.tmp_mb ?? ENV_LOCKDOWN.readOnlyTmpMb) : null;
}

/** where a read-only root gets its one writable folder, a tmpfs */
export const READ_ONLY_ROOT_TMP = '/tmp';

/**
 * The folders of an env that are tmpfs mounts of the server's making: the engine's archive API
 * cannot see into them (the shell's file tools refuse paths there, pointing to bash).
 */
export function serverTmpfsMounts(security: EnvSecurityAsk | undefined): string[] {
  return tmpMb(security) !== null ? [READ_ONLY_ROOT_TMP] : [];
}

/** The server's bounds of an env's writable layer where its bundle sets none (--default-storage-mb, --default-max-files); null: none. */
export interface LayerDefaults {
  storageMb: number | null;
  maxFiles: number | null;
}

/** The env's resources with the server's layer bounds where its bundle gives none, each such bound named in `defaulted`. */
export function withLayerDefaults(resources: EnvResources, defaults: LayerDefaults): EnvResources {
  const out: EnvResources = { ...resources };
  const defaulted: LayerBound[] = [];
  for (const k of ['storageMb', 'maxFiles'] as const) {
    const d = defaults[k];
    if (resources[k] !== undefined || d === null) continue;
    out[k] = d;
    defaulted.push(k);
  }
  if (defaulted.length > 0) out.defaulted = defaulted;
  return out;
}

/**
 * What an env gets, in the words `check` and the console use: `notEnforced`, what the engine
 * cannot enforce (swarmLockdown's; a storage bound no engine nor watcher keeps).
 */
export function granted(input: LockdownInput, notEnforced: string[] = []): Granted {
  const caps = capabilitiesOf(input.security);
  return {
    capabilities: caps.all,
    added: caps.added,
    no_new_privileges: !notEnforced.some((n) => n.startsWith('no-new-privileges')),
    init: true,
    root: input.security?.root ?? 'writable',
    tmp_mb: tmpMb(input.security),
    user: input.security?.user ?? null,
    runtime: input.runtime ?? 'runc',
    memory_mb: input.resources.memoryMb,
    cpus: input.resources.cpus,
    pids: input.resources.pids,
    nofile: ENV_LOCKDOWN.nofile,
    storage_mb: input.resources.storageMb ?? null,
    max_files: input.resources.maxFiles ?? null,
    not_enforced: notEnforced,
  };
}
