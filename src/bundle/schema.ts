/**
 * The bundle's shapes as zod schemas: bundle.json and one line of tasks/<split>.jsonl (the wire
 * shapes a bundle is served as, ToolSpec and TaskRow, are declared in src/protocol/bundle.ts).
 * Every type is inferred from these schemas. Checks that need the file system (does a build folder
 * exist and stay inside the bundle?) or the whole bundle (is a task_id unique?) live in loader.ts.
 *
 * Long because it declares every shape of bundle.json and of a task line once, each field with its
 * message; nothing in it is code but the schemas and their small helpers.
 */
import path from 'node:path';
import { z } from 'zod';
import { isPlainObject } from '../util/json.js';
import { ToolSpecSchema } from '../protocol/bundle.js';
import { VERIFIER } from '../defaults.js';
import { EnvSecuritySchema, USER_PATTERN } from '../sandbox/lockdown.js';
import { SHELL_BUILTIN, SHELL_TOOL_SPECS } from '../tools/shell/specs.js';
import { TURN_REWARD_RULES } from '../verifier/turns.js';
import { TOOLCHAIN_PATHS } from '../verifier/toolchain.js';
import type { BundleIssue } from './errors.js';

/** The tool every task offers besides its toolset; a toolset may not declare it. */
export const END_TURN = 'end_turn';

/** Bundle and env names: they end up in image tags (`openenv-bundle/<bundle>-<env>:…`). */
export const NAME_PATTERN = /^[a-z0-9][a-z0-9._-]*$/;
/** Split and toolset names: they appear in URLs (`/tasks?split=`) and in logs. */
const KEY_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._-]*$/;
/** POSIX environment variable names. */
const ENV_VAR_PATTERN = /^[A-Za-z_][A-Za-z0-9_]*$/;

/**
 * Why `p` is not a safe relative path inside a folder, or null when it is. Purely textual; the
 * loader also resolves real paths, which catches symlinks.
 */
export function relativePathProblem(p: string): string | null {
  if (p.length === 0) return 'it is empty';
  if (p.includes('\0')) return 'it contains a NUL byte';
  if (p.includes('\\')) return 'it contains a backslash (use "/")';
  if (path.posix.isAbsolute(p) || path.win32.isAbsolute(p)) return 'it is absolute';
  if (p.split('/').includes('..')) return 'it has a ".." segment';
  return null;
}

/**
 * A JSON object, kept as the very object JSON.parse made: no copy (rows are large and many),
 * and no key-by-key reassignment that would turn an own `__proto__` key into a prototype.
 */
const jsonObject = z.custom<Record<string, unknown>>(isPlainObject, { message: 'expected a JSON object', params: { got: true } });

const relativePath = z.string().superRefine((p, ctx) => {
  const why = relativePathProblem(p);
  if (why !== null) {
    ctx.addIssue({
      code: z.ZodIssueCode.custom,
      message: `expected a relative path inside the bundle folder, but ${why}`,
      params: { got: true },
    });
  }
});

/** A record key that must match `pattern`; the message names the key, since zod's path ends in it. */
function keyName(pattern: RegExp, what: string) {
  return z.string().refine(
    (k) => pattern.test(k),
    (k) => ({ message: `${what} ${JSON.stringify(k)} must match ${pattern.source}` }),
  );
}

/** z.object(shape).strict(), whose unknown-key message lists the fields that are allowed. */
function closedObject<T extends z.ZodRawShape>(shape: T) {
  return z.object(shape).strict(`unknown field; the fields here are ${Object.keys(shape).join(', ')}`);
}

/** One of `values`; the message lists them (zod's own says "Invalid enum value"). */
function oneOf<T extends string>(values: readonly [T, ...T[]], what: string) {
  return z.enum(values, { errorMap: () => ({ message: `expected ${what}: ${values.map((v) => JSON.stringify(v)).join(' or ')}` }) });
}

/** A name → value map with at least one entry, whose keys match `pattern`. */
function namedMap<T extends z.ZodTypeAny>(pattern: RegExp, what: string, value: T) {
  return z.record(keyName(pattern, `${what} name`), value).refine((o) => Object.keys(o).length > 0, { message: `expected at least one ${what}` });
}

// ---------------------------------------------------------------------------------------------
// Wire shapes (docs/protocol.md): declared in src/protocol/bundle.ts, where every reader finds them

export { TaskRowSchema, ToolSpecSchema, type TaskRow, type ToolSpec } from '../protocol/bundle.js';

// ---------------------------------------------------------------------------------------------
// bundle.json

export const EnvResourcesSchema = closedObject({
  // Docker refuses memory limits under 6 MB.
  memory_mb: z.number().int().min(6).default(512),
  cpus: z.number().positive().default(1),
  pids: z.number().int().min(1).default(256),
  /** the container's writable layer, where the engine's storage driver can limit it; unset: the server's --default-storage-mb */
  storage_mb: z.number().int().min(1).optional(),
  /** entries (files, directories) the env may create, change or delete in its writable layer; unset: the server's --default-max-files */
  max_files: z.number().int().min(1).optional(),
});

/**
 * What an env's image runs: `http`, a server keeping the env contract on `port`; `shell`, nothing
 * the server talks to (any image: the server keeps its container up and acts in it through the
 * engine, for the built-in shell toolset and verifiers).
 */
export const ENV_KINDS = ['http', 'shell'] as const;
export type EnvKind = (typeof ENV_KINDS)[number];

const HTTP_ENV_DEFAULTS = { port: 8000, ready_path: '/health' } as const;

/** the network a `build` env's image is built on: the engine's default, or none (docs/security.md, "Image builds and the network") */
export const BUILD_NETWORKS = ['default', 'none'] as const;
export type BuildNetwork = (typeof BUILD_NETWORKS)[number];

const absolutePath = z.string().refine((p) => path.posix.isAbsolute(p) && !p.includes('\0'), {
  message: 'expected an absolute path in the container, such as "/app"',
  params: { got: true },
});

/** a sidecar's name: its host name on the episode network (a DNS label) */
export const SIDECAR_NAME_PATTERN = /^[a-z][a-z0-9-]{0,62}$/;

/** a sidecar's limits: small unless it says (each bounded like an env's) */
export const SidecarResourcesSchema = closedObject({
  memory_mb: z.number().int().min(6).default(256),
  cpus: z.number().positive().default(0.5),
  pids: z.number().int().min(1).default(128),
});

/**
 * A command run in the sidecar (by its shell, as the engine's healthcheck) until it passes: the
 * env counts as ready only after (docs/bundle-format.md, "Sidecars"). Absent: the image's own
 * HEALTHCHECK, if it has one.
 */
export const SidecarHealthcheckSchema = closedObject({
  /** a string: run by the image's shell (/bin/sh -c); a list: run as it is (an image with no shell) */
  command: z.union([z.string().min(1, 'expected a shell command'), z.array(z.string()).min(1, 'expected a program and its arguments')]),
  interval_s: z.number().positive().default(1),
  timeout_s: z.number().positive().default(10),
  retries: z.number().int().min(1).default(3),
  start_period_s: z.number().min(0).default(0),
});

/** an image reference the engine has or can pull */
const imageReference = z.string().refine((s) => /^\S+$/.test(s), { message: 'expected an image reference (non-empty, no spaces)', params: { got: true } });

/**
 * A service beside the env's container (a database, a cache): deployed on the episode's own
 * network before the env, reached from it by its name, locked down like the env, removed with it.
 */
export const SidecarSchema = closedObject({
  /** a folder of the bundle holding a Dockerfile; the server builds it */
  build: relativePath.optional(),
  /** an image reference the engine has or can pull */
  image: imageReference.optional(),
  /** `build` sidecars only; default "default" */
  build_network: oneOf(BUILD_NETWORKS, 'a build network').optional(),
  environment: z.record(keyName(ENV_VAR_PATTERN, 'environment variable'), z.string()).default({}),
  healthcheck: SidecarHealthcheckSchema.optional(),
  resources: SidecarResourcesSchema.default({}),
}).superRefine((s, ctx) => {
  if (s.build !== undefined && s.image !== undefined) ctx.addIssue({ code: z.ZodIssueCode.custom, message: 'expected either "build" or "image", got both' });
  else if (s.build === undefined && s.image === undefined)
    ctx.addIssue({ code: z.ZodIssueCode.custom, message: 'expected "build" (a folder of the bundle) or "image" (an image reference), got neither' });
  if (s.build_network !== undefined && s.build === undefined)
    ctx.addIssue({ code: z.ZodIssueCode.custom, path: ['build_network'], message: 'build_network is for sidecars with "build"' });
});
export type SidecarManifest = z.infer<typeof SidecarSchema>;

export const EnvManifestSchema = closedObject({
  /** a folder of the bundle holding a Dockerfile; the server builds it */
  build: relativePath.optional(),
  /** an image reference the engine has or can pull */
  image: imageReference.optional(),
  /** `build` envs only; default "default": the network the image's build (its RUN steps) has */
  build_network: oneOf(BUILD_NETWORKS, 'a build network').optional(),
  kind: oneOf(ENV_KINDS, 'an env kind').default('http'),
  /** http envs only; default 8000 */
  port: z.number().int().min(1).max(65535).optional(),
  /** http envs only; default /health */
  ready_path: z.string().startsWith('/', 'expected a path starting with "/"').optional(),
  deploy_timeout_s: z.number().positive().default(60),
  resources: EnvResourcesSchema.default({}),
  environment: z.record(keyName(ENV_VAR_PATTERN, 'environment variable'), z.string()).default({}),
  /** the working directory of the env's container (the shell's and the verifier's), overriding the image's WORKDIR */
  workdir: absolutePath.optional(),
  /** what the env asks for beyond the lock-down every env gets, by name: capabilities, a read-only root, a user, gVisor (docs/security.md) */
  security: EnvSecuritySchema.optional(),
  /**
   * who the agent is in the env's container: its shell, its file tools, a harness (a user name of
   * the image, a uid or uid:gid; Harbor's `[agent] user`); default: the image's user (or
   * `security.user`). The server's own steps and the verifier are not the agent's.
   */
  agent_user: z.string().regex(USER_PATTERN, 'expected a user id, uid:gid, or a user name of the image').optional(),
  /**
   * http envs only: a /reset on a container that already served episodes starts a clean one (the
   * env keeps nothing across /reset). The server still deploys a fresh env per episode; `check`
   * plays such an env's tasks on a few containers it resets between plays (authoring/reused-envs.ts).
   */
  clean_reset: z.boolean().default(false),
  /** services beside the env on its episode network, by name (their host names there): SidecarSchema */
  sidecars: z.record(keyName(SIDECAR_NAME_PATTERN, 'sidecar'), SidecarSchema).optional(),
})
  .superRefine((env, ctx) => {
    if (env.kind === 'shell') {
      for (const field of ['port', 'ready_path'] as const) {
        if (env[field] !== undefined) {
          ctx.addIssue({ code: z.ZodIssueCode.custom, path: [field], message: 'a shell env runs no server: port and ready_path are for "kind": "http" envs' });
        }
      }
      if (env.clean_reset) {
        ctx.addIssue({ code: z.ZodIssueCode.custom, path: ['clean_reset'], message: 'a shell env has no /reset: clean_reset is for "kind": "http" envs' });
      }
    }
  })
  .superRefine((env, ctx) => {
    if (env.build_network !== undefined && env.build === undefined) {
      ctx.addIssue({
        code: z.ZodIssueCode.custom,
        path: ['build_network'],
        message: 'build_network is for envs with "build": an "image" env is not built here',
      });
    }
    if (env.build !== undefined && env.image !== undefined) {
      ctx.addIssue({ code: z.ZodIssueCode.custom, message: 'expected either "build" or "image", got both' });
    } else if (env.build === undefined && env.image === undefined) {
      ctx.addIssue({
        code: z.ZodIssueCode.custom,
        message: 'expected "build" (a folder of the bundle) or "image" (an image reference), got neither',
      });
    }
  })
  .transform((env) => ({ ...env, port: env.port ?? HTTP_ENV_DEFAULTS.port, ready_path: env.ready_path ?? HTTP_ENV_DEFAULTS.ready_path }));
export type EnvManifest = z.infer<typeof EnvManifestSchema>;

/** Built-in toolsets a toolset may include: tools the server itself serves, in the env's container. */
export const BUILTIN_TOOLSETS = { [SHELL_BUILTIN]: SHELL_TOOL_SPECS } as const;
export type BuiltinToolset = keyof typeof BUILTIN_TOOLSETS;
const BUILTIN_NAMES = Object.keys(BUILTIN_TOOLSETS) as [BuiltinToolset, ...BuiltinToolset[]];

export const ToolsetSchema = closedObject({
  /** the env its tools run in; a toolset of built-in tools only may leave it to each task's `env` */
  env: z.string().min(1, 'expected the name of an env of this bundle').optional(),
  /** built-in toolsets whose tools this toolset offers too (the server serves them in the env's container) */
  builtin: z.array(oneOf(BUILTIN_NAMES, 'a built-in toolset')).default([]),
  tools: z.array(ToolSpecSchema).default([]),
}).superRefine((toolset, ctx) => {
  if (toolset.env === undefined && toolset.tools.length > 0) {
    ctx.addIssue({ code: z.ZodIssueCode.custom, path: ['env'], message: "expected the env that serves this toolset's tools, but it is missing" });
  }
  const builtinNames = new Map<string, string>();
  toolset.builtin.forEach((b, i) => {
    if (toolset.builtin.indexOf(b) !== i) ctx.addIssue({ code: z.ZodIssueCode.custom, path: ['builtin', i], message: `"${b}" is listed twice` });
    for (const t of BUILTIN_TOOLSETS[b]) builtinNames.set(t.name, b);
  });
  const first = new Map<string, number>();
  toolset.tools.forEach((tool, i) => {
    const builtin = builtinNames.get(tool.name);
    if (builtin !== undefined) {
      ctx.addIssue({
        code: z.ZodIssueCode.custom,
        path: ['tools', i, 'name'],
        message: `"${tool.name}" is a tool of the built-in toolset "${builtin}" this toolset includes; name yours otherwise`,
      });
      return;
    }
    if (tool.name === END_TURN) {
      ctx.addIssue({
        code: z.ZodIssueCode.custom,
        path: ['tools', i, 'name'],
        message: `"${END_TURN}" is reserved: the server adds it to every toolset`,
      });
      return;
    }
    const seen = first.get(tool.name);
    if (seen !== undefined) {
      ctx.addIssue({
        code: z.ZodIssueCode.custom,
        path: ['tools', i, 'name'],
        message: `duplicate tool name ${JSON.stringify(tool.name)}, already declared at tools[${seen}]`,
      });
    } else {
      first.set(tool.name, i);
    }
  });
});
export type Toolset = z.infer<typeof ToolsetSchema>;

// ---------------------------------------------------------------------------------------------
// Authoring: declared scores and seeds (bundle.json) and golden solutions (task rows), what
// `openenv-bundle check` plays and the server enforces (docs/bundle-format.md, "scores").

/** A declared score's range, and the most an empty solution (every turn ended, no call) may score. */
export const ScoreDeclarationSchema = closedObject({
  min: z.number().finite().default(0),
  max: z.number().finite().default(1),
  /** the most the empty solution may score; default: min */
  floor: z.number().finite().optional(),
}).superRefine((s, ctx) => {
  if (s.min >= s.max) ctx.addIssue({ code: z.ZodIssueCode.custom, path: ['max'], message: `expected max above min (${s.min})`, params: { got: true } });
  if (s.floor !== undefined && (s.floor < s.min || s.floor > s.max)) {
    ctx.addIssue({ code: z.ZodIssueCode.custom, path: ['floor'], message: `expected a floor within [min, max] = [${s.min}, ${s.max}]`, params: { got: true } });
  }
});
export type ScoreDeclaration = z.infer<typeof ScoreDeclarationSchema>;

/** The fields bundle.json gains for authoring; merged into ManifestSchema's shape below. */
const AUTHORING_MANIFEST_FIELDS = {
  /** score name → its range; the server fails an episode whose declared score falls outside it */
  scores: z.record(keyName(KEY_PATTERN, 'score name'), ScoreDeclarationSchema).optional(),
  /** the env's episodes do not depend on /reset's seed (check then skips the same-seed test) */
  ignores_seed: z.boolean().default(false),
};

/** One step of a golden solution: a call of a toolset tool, or `end_turn`. */
export const GoldenStepSchema = closedObject({
  tool: z.string().min(1, 'expected the name of a tool of the task\'s toolset, or "end_turn"'),
  arguments: jsonObject.optional(),
});
export type GoldenStep = z.infer<typeof GoldenStepSchema>;

/** The fields a task row gains for authoring; never served to a model or a client. */
const AUTHORING_TASK_FIELDS = {
  /** the calls a perfect player makes, in order; `check` plays it and expects every score's max */
  golden: z.array(GoldenStepSchema).min(1, 'expected at least one step').optional(),
};

// ---- task groups and baselines (the console's per-group views and reference lines) ----------

/** Where a group's value sits in a task line: `meta.<key>` and deeper; `data` stays private. */
const GROUP_PATH_PATTERN = /^meta(\.[A-Za-z0-9_-]+)+$/;

/** Group name → the path of its value in each task line, e.g. {"battery_h": "meta.duration_h"}. */
export const GroupsSchema = z.record(
  keyName(KEY_PATTERN, 'group name'),
  z.string().refine((p) => GROUP_PATH_PATTERN.test(p), {
    message: 'expected a path into the task\'s meta, such as "meta.point" (a task\'s data is never served)',
    params: { got: true },
  }),
);
export type Groups = z.infer<typeof GroupsSchema>;

/** Split → reference name → the reward that reference scores on it, e.g. {"eval": {"greedy": 0.766}}. */
export const BaselinesSchema = z.record(keyName(KEY_PATTERN, 'split name'), z.record(keyName(KEY_PATTERN, 'baseline name'), z.number().finite()));
export type Baselines = z.infer<typeof BaselinesSchema>;

/**
 * A harness episode's agent (docs/gateway.md, "harness episodes"): a command the server runs in the
 * env's container with the turn's instruction, its model calls going through the gateway; the
 * episode ends when it exits or its time budget passes, and is then scored.
 */
export const HarnessSchema = closedObject({
  /** the program and its arguments (no shell is put in front: ["sh", "-c", "…"] for a command line) */
  command: z.array(z.string().min(1, 'expected a non-empty string')).min(1, 'expected the program and its arguments, a non-empty array of strings'),
  /** the harness's time budget, from its start (the task's time_budget_s, when shorter, wins) */
  timeout_s: z.number().positive().optional(),
  /** variables the harness runs with, besides the env's and the gateway's */
  env: z.record(keyName(ENV_VAR_PATTERN, 'environment variable'), z.string()).default({}),
});
export type HarnessManifest = z.infer<typeof HarnessSchema>;

// ---- the manifest ------------------------------------------------------------------------------

export const ManifestSchema = closedObject({
  name: z.string().refine((n) => NAME_PATTERN.test(n), {
    message: `expected a name matching ${NAME_PATTERN.source}`,
    params: { got: true },
  }),
  version: z.string().min(1, 'expected a non-empty version string'),
  /** optional: the first line of README.md stands in for it */
  description: z.string().min(1).optional(),
  default_split: z.string().min(1, 'expected the name of a declared split'),
  /** split name → JSONL path relative to the bundle folder */
  splits: namedMap(KEY_PATTERN, 'split', relativePath),
  envs: namedMap(NAME_PATTERN, 'env', EnvManifestSchema),
  toolsets: namedMap(KEY_PATTERN, 'toolset', ToolsetSchema),
  max_turns: z.number().int().min(1).default(4),
  /** "mean" | "sum" | "min" | "max" | the name of one score */
  reward: z.string().min(1, 'expected "mean", "sum", "min", "max" or the name of a score').optional(),
  // ---- task groups and baselines
  groups: GroupsSchema.default({}),
  baselines: BaselinesSchema.default({}),
  /** the agent the server runs in the env for every task that names none (harness episodes, docs/gateway.md) */
  harness: HarnessSchema.optional(),
  ...AUTHORING_MANIFEST_FIELDS,
}).superRefine((m, ctx) => {
  const splits = Object.keys(m.splits);
  if (!Object.hasOwn(m.splits, m.default_split)) {
    ctx.addIssue({
      code: z.ZodIssueCode.custom,
      path: ['default_split'],
      message: `expected one of the declared splits (${splits.join(', ')})`,
      params: { got: true },
    });
  }
  const envs = Object.keys(m.envs);
  for (const [name, toolset] of Object.entries(m.toolsets)) {
    if (toolset.env === undefined) continue;
    if (!Object.hasOwn(m.envs, toolset.env)) {
      ctx.addIssue({
        code: z.ZodIssueCode.custom,
        path: ['toolsets', name, 'env'],
        message: `expected one of the declared envs (${envs.join(', ')})`,
        params: { got: true },
      });
    } else if (m.envs[toolset.env]?.kind === 'shell' && toolset.tools.length > 0) {
      ctx.addIssue({
        code: z.ZodIssueCode.custom,
        path: ['toolsets', name, 'tools'],
        message: `env "${toolset.env}" is a shell env, which runs no server to answer tools of its own: offer built-in toolsets ("builtin") only, or use an http env`,
      });
    }
  }
  // ---- baselines name declared splits
  for (const split of Object.keys(m.baselines)) {
    if (!Object.hasOwn(m.splits, split)) {
      ctx.addIssue({ code: z.ZodIssueCode.custom, path: ['baselines', split], message: `expected one of the declared splits (${splits.join(', ')})` });
    }
  }
});
export type Manifest = z.infer<typeof ManifestSchema>;

// ---------------------------------------------------------------------------------------------
// One line of tasks/<split>.jsonl

const TURNS_EXPECTED = 'expected a non-empty array of strings';

// ---- verified tasks (Harbor-style): a verifier in the env's container scores the episode ---------

/** Where a verifier's tests run (docs/security.md, "Verification modes"). */
export const VERIFICATION_MODES = ['in-place', 'clean'] as const;

/** A task's verifier: a folder of the bundle holding test.sh, run at /tests in the env's container or a clean one. */
export const VerifierSchema = closedObject({
  /** a folder of the bundle holding test.sh (and its helpers) */
  tests: relativePath,
  timeout_s: z.number().positive().default(VERIFIER.defaultTimeoutS),
  /** variables the verifier runs with, besides the env's */
  env: z.record(keyName(ENV_VAR_PATTERN, 'environment variable'), z.string()).default({}),
  /**
   * `in-place` (the default, Harbor's): in the agent's container once its processes are stopped,
   * after the toolchain check; `clean`: in a fresh container of the env's image given only the
   * agent's `outputs`
   */
  mode: oneOf(VERIFICATION_MODES, 'a verification mode').default('in-place'),
  /** clean mode: the paths copied from the agent's container (default: the env's working folder) */
  outputs: z.array(absolutePath).min(1, 'expected at least one path the agent leaves its work in').optional(),
  /** in-place mode: paths the agent may change without the toolchain check refusing the reward (it then trusts them) */
  allow_changes: z.array(absolutePath).default([]),
  /** in-place mode: paths the toolchain check covers besides its own (a toolchain of the image elsewhere, e.g. /opt/conda) */
  protect: z.array(absolutePath).default([]),
}).superRefine((v, ctx) => {
  // the agent's outputs reach the clean container; its toolchain never may
  (v.outputs ?? []).forEach((p, i) => {
    const norm = path.posix.normalize(p);
    const clash = TOOLCHAIN_PATHS.find((t) => norm === '/' || norm === t || norm.startsWith(`${t}/`) || t.startsWith(`${norm}/`));
    if (clash) {
      ctx.addIssue({
        code: z.ZodIssueCode.custom,
        path: ['outputs', i],
        message: `${p} ${norm === '/' ? 'is the whole filesystem' : `holds or is within ${clash}`}: a clean verifier takes the agent's work, never the toolchain it runs`,
      });
    }
  });
  if (v.mode === 'clean' && (v.allow_changes.length > 0 || v.protect.length > 0)) {
    ctx.addIssue({
      code: z.ZodIssueCode.custom,
      path: ['mode'],
      message: 'allow_changes and protect tune the in-place toolchain check; a clean verifier has none',
    });
  }
  if (v.mode === 'in-place' && v.outputs !== undefined) {
    ctx.addIssue({
      code: z.ZodIssueCode.custom,
      path: ['outputs'],
      message: 'outputs are what a clean verifier copies; an in-place one sees the whole container',
    });
  }
});
export type VerifierManifest = z.infer<typeof VerifierSchema>;

/** Run before a turn starts, until it exits 0 (Docker HEALTHCHECK's semantics). */
export const ReadyCheckSchema = closedObject({
  command: z.string().min(1, 'expected a shell command that exits 0 once the turn may start'),
  interval_s: z.number().nonnegative().default(5),
  timeout_s: z.number().positive().default(30),
  retries: z.number().int().min(1).default(3),
  /** failed attempts within this many seconds of the first do not count toward `retries` (Docker's start period) */
  start_period_s: z.number().nonnegative().default(0),
  /** the wait between attempts within the start period; default: interval_s */
  start_interval_s: z.number().nonnegative().optional(),
});

/** One turn's own settings (a Harbor step), `per_turn[i]` for `turns[i]`. */
export const TurnSpecSchema = closedObject({
  /** the turn's time budget: when it passes, the turn ends as if end_turn was called */
  time_budget_s: z.number().positive().optional(),
  /** scores the turn at its end */
  verifier: VerifierSchema.optional(),
  /** stop the episode after this turn when it scores under this: a reward (a number) or named scores' least values */
  min_reward: z.union([z.number().finite(), z.record(keyName(KEY_PATTERN, 'score name'), z.number().finite())]).optional(),
  /** a folder of the bundle copied into the env's working directory before the turn; a setup.sh at its top runs then */
  upload: relativePath.optional(),
  ready_check: ReadyCheckSchema.optional(),
});
export type TurnSpec = z.infer<typeof TurnSpecSchema>;

/** The fields a task row gains for verified tasks; never served to a model or a client. */
const VERIFIED_TASK_FIELDS = {
  /** the agent the server runs in the env for this task (a harness episode), instead of the bundle's `harness` */
  harness: HarnessSchema.optional(),
  /** the env this task runs in, instead of its toolset's (a toolset of built-in tools only) */
  env: z.string().min(1, 'expected the name of an env of this bundle').optional(),
  /** the episode's time budget (a Harbor task's agent timeout): when it passes, the episode ends and is verified */
  time_budget_s: z.number().positive().optional(),
  /** scores the episode at its end */
  verifier: VerifierSchema.optional(),
  /** per-turn settings, one per turn */
  per_turn: z.array(TurnSpecSchema).optional(),
  /** how per-turn verifiers' scores combine into the episode's: Harbor's "mean" (the default) or "final", or "mean_all_turns" / "final_or_zero", which count an unplayed turn as 0 (src/verifier/turns.ts) */
  turn_reward: oneOf(TURN_REWARD_RULES, 'how turn scores combine').optional(),
};

/** the verified-task rules a row must keep, besides its fields' own */
function checkVerifiedTask(
  task: { turns: string[] } & { [K in keyof typeof VERIFIED_TASK_FIELDS]?: z.infer<(typeof VERIFIED_TASK_FIELDS)[K]> },
  ctx: z.RefinementCtx,
): void {
  const perTurn = task.per_turn;
  if (perTurn === undefined) {
    if (task.turn_reward !== undefined) {
      ctx.addIssue({ code: z.ZodIssueCode.custom, path: ['turn_reward'], message: 'turn_reward combines per-turn verifiers, but the task has no per_turn' });
    }
    return;
  }
  if (perTurn.length !== task.turns.length) {
    ctx.addIssue({ code: z.ZodIssueCode.custom, path: ['per_turn'], message: `expected one entry per turn (${task.turns.length}), got ${perTurn.length}` });
  }
  const verified = perTurn.filter((t) => t.verifier !== undefined).length;
  if (verified > 0 && task.verifier !== undefined) {
    ctx.addIssue({
      code: z.ZodIssueCode.custom,
      path: ['verifier'],
      message: "a task is verified at its end (verifier) or at each turn's end (per_turn[].verifier), not both",
    });
  }
  perTurn.forEach((t, i) => {
    if (verified > 0 && t.verifier === undefined) {
      ctx.addIssue({
        code: z.ZodIssueCode.custom,
        path: ['per_turn', i, 'verifier'],
        message: 'every turn of a task verified turn by turn needs a verifier, but this one has none',
      });
    }
    if (t.min_reward !== undefined && t.verifier === undefined) {
      ctx.addIssue({
        code: z.ZodIssueCode.custom,
        path: ['per_turn', i, 'min_reward'],
        message: "min_reward gates on the turn's verifier, but the turn has none",
      });
    }
  });
  if (task.turn_reward !== undefined && verified === 0) {
    ctx.addIssue({ code: z.ZodIssueCode.custom, path: ['turn_reward'], message: 'turn_reward combines per-turn verifiers, but no turn has one' });
  }
}

export const TaskLineSchema = closedObject({
  task_id: z.string().min(1, 'expected a non-empty string of at most 255 characters').max(255, 'expected a non-empty string of at most 255 characters'),
  toolset: z.string().min(1, 'expected the name of a toolset of this bundle'),
  system_prompt: z.string(),
  turns: z.array(z.string(), { invalid_type_error: TURNS_EXPECTED }).min(1, TURNS_EXPECTED),
  /** handed to the env at reset; never served to clients (it may hold the answer) */
  data: jsonObject.default({}),
  max_turns: z.number().int().min(1).optional(),
  meta: jsonObject.optional(),
  ...AUTHORING_TASK_FIELDS,
  ...VERIFIED_TASK_FIELDS,
}).superRefine((task, ctx) => {
  checkVerifiedTask(task, ctx);
  if (task.max_turns !== undefined && task.max_turns < task.turns.length) {
    ctx.addIssue({
      code: z.ZodIssueCode.custom,
      path: ['max_turns'],
      message: `expected at least the number of turns (${task.turns.length})`,
      params: { got: true },
    });
  }
});
export type TaskLine = z.infer<typeof TaskLineSchema>;

// ---------------------------------------------------------------------------------------------
// zod issues → BundleIssues

/** `envs.gridsim.port`, `turns[0]`, `envs["odd name"]` */
export function fieldPath(p: readonly (string | number)[]): string {
  let out = '';
  for (const k of p) {
    if (typeof k === 'number') out += `[${k}]`;
    else if (/^[A-Za-z0-9_-]+$/.test(k)) out += out === '' ? k : `.${k}`;
    else out += `[${JSON.stringify(k)}]`;
  }
  return out;
}

/** A short JSON rendering of a found value. */
export function preview(value: unknown): string {
  const text = JSON.stringify(value) ?? String(value);
  return text.length > 60 ? `${text.slice(0, 57)}…` : text;
}

function valueAt(root: unknown, p: readonly (string | number)[]): { found: boolean; value: unknown } {
  let cur: unknown = root;
  for (const k of p) {
    if (cur === null || typeof cur !== 'object' || !Object.hasOwn(cur, k)) return { found: false, value: undefined };
    cur = (cur as Record<string | number, unknown>)[k];
  }
  return { found: true, value: cur };
}

const TYPE_WORDS: Partial<Record<string, string>> = {
  string: 'a string',
  number: 'a number',
  integer: 'an integer',
  boolean: 'true or false',
  object: 'an object',
  array: 'an array',
  null: 'null',
};

/** Our wording for an issue that carries zod's default message. */
function defaultWording(issue: z.ZodIssue): string | null {
  switch (issue.code) {
    case z.ZodIssueCode.invalid_type:
      return `expected ${TYPE_WORDS[issue.expected] ?? issue.expected}`;
    case z.ZodIssueCode.too_small: {
      const min = Number(issue.minimum);
      if (issue.type === 'string') return min === 1 ? 'expected a non-empty string' : `expected at least ${min} characters`;
      if (issue.type === 'array') return min === 1 ? 'expected a non-empty array' : `expected at least ${min} items`;
      if (issue.type === 'number') return `expected a number ${issue.inclusive ? '≥' : '>'} ${min}`;
      return null;
    }
    case z.ZodIssueCode.too_big: {
      const max = Number(issue.maximum);
      if (issue.type === 'string') return `expected at most ${max} characters`;
      if (issue.type === 'array') return `expected at most ${max} items`;
      if (issue.type === 'number') return `expected a number ${issue.inclusive ? '≤' : '<'} ${max}`;
      return null;
    }
    case z.ZodIssueCode.not_finite:
      return 'expected a finite number';
    default:
      return null;
  }
}

function isDefaultMessage(issue: z.ZodIssue): boolean {
  return issue.message === z.defaultErrorMap(issue, { data: undefined, defaultError: issue.message }).message;
}

/**
 * Turns zod issues into BundleIssues located in `file` (and `line`), each saying what was
 * expected and, where it helps, what was found in `raw` (the parsed JSON).
 */
export function toBundleIssues(error: z.ZodError, raw: unknown, file: string, line?: number): BundleIssue[] {
  const out: BundleIssue[] = [];
  const at = (field: string, message: string): BundleIssue => (line === undefined ? { file, field, message } : { file, line, field, message });
  for (const issue of error.issues) {
    if (issue.code === z.ZodIssueCode.unrecognized_keys) {
      for (const key of issue.keys) out.push(at(fieldPath([...issue.path, key]), issue.message));
      continue;
    }
    const isDefault = isDefaultMessage(issue);
    const message = (isDefault ? defaultWording(issue) : null) ?? issue.message;
    const wantsGot = issue.code !== z.ZodIssueCode.custom || (issue.params as { got?: boolean } | undefined)?.got === true;
    let suffix = '';
    if (wantsGot) {
      const { found, value } = valueAt(raw, issue.path);
      suffix = found ? `, got ${preview(value)}` : ', but it is missing';
    }
    out.push(at(fieldPath(issue.path), message + suffix));
  }
  return out;
}
