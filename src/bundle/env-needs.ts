/**
 * What a bundle's envs ask of the sandbox that runs them: each env's limits and lock-down asks
 * (envLimits), and what of the bundle needs exec access to env containers (shellFeatures).
 */
import type { LoadedBundle } from './loader.js';
import type { EnvSpec } from '../sandbox/sandbox.js';
import type { EnvManifest } from './schema.js';

/** What of an env's manifest the lock-down reads: its limits, its asks by name, the runtime it asks for (engine/hardening.ts). */
export function envLimits(env: EnvManifest): Pick<EnvSpec, 'resources' | 'security' | 'runtime'> {
  return {
    resources: {
      memoryMb: env.resources.memory_mb,
      cpus: env.resources.cpus,
      pids: env.resources.pids,
      ...(env.resources.storage_mb !== undefined ? { storageMb: env.resources.storage_mb } : {}),
      ...(env.resources.max_files !== undefined ? { maxFiles: env.resources.max_files } : {}),
    },
    // the lock-down's asks (docs/security.md); the sandbox applies them
    ...(env.security ? { security: env.security, ...(env.security.runtime ? { runtime: env.security.runtime } : {}) } : {}),
  };
}

/**
 * What of a bundle needs a sandbox with a `shell` part (exec and archive access to env
 * containers): shell envs, built-in toolsets and verified tasks. A sandbox without one refuses such
 * a bundle at start, naming them, instead of failing every episode (both backends have one).
 */
export function shellFeatures(bundle: Pick<LoadedBundle, 'manifest' | 'splits'>): string[] {
  const out: string[] = [];
  const m = bundle.manifest;
  const shellEnvs = Object.entries(m.envs)
    .filter(([, e]) => e.kind === 'shell')
    .map(([n]) => n);
  if (shellEnvs.length) out.push(`shell envs (${shellEnvs.slice(0, 3).join(', ')}${shellEnvs.length > 3 ? ', …' : ''})`);
  const builtin = Object.entries(m.toolsets)
    .filter(([, t]) => t.builtin.length > 0)
    .map(([n]) => n);
  if (builtin.length) out.push(`built-in toolsets (toolset ${builtin.join(', ')})`);
  let verified = 0;
  for (const tasks of Object.values(bundle.splits)) {
    for (const t of tasks) if (t.verifier || t.per_turn || t.time_budget_s !== undefined || t.env !== undefined) verified++;
  }
  if (verified) out.push(`verified tasks (${verified} task(s) with a verifier, per_turn, time_budget_s or env)`);
  return out;
}
