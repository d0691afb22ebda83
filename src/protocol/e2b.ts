/**
 * What the E2B-compatible side of the server (docs/e2b.md) takes and answers, declared once: the
 * control API under `/e2b` (E2B's REST API as the official SDKs call it: create, get, list, kill,
 * timeout, refresh, pause, connect, metrics) and the sandbox side under `/e2b/envd` (what E2B's
 * in-sandbox daemon, envd, serves: its Connect-RPC process and filesystem services in their JSON
 * form, and its HTTP file transfer). Field names and shapes are E2B's (the `e2b` package's
 * generated types, E2B's published OpenAPI and proto files); unknown fields are ignored, as E2B's
 * own servers ignore them, except those whose meaning this server cannot keep, which the rooms
 * that serve them refuse by name.
 */
import { z } from 'zod';

// ---- the control API -------------------------------------------------------------------------

/** E2B's error body: `code` is the HTTP status, `message` says what to do. */
export const E2bErrorSchema = z.object({ code: z.number().int(), message: z.string() }).describe("an error in E2B's shape");
export type E2bError = z.infer<typeof E2bErrorSchema>;

const StringMap = z.record(z.string());

/** A sandbox's egress as E2B names it: CIDRs, addresses or host names out, and those denied. */
export const SandboxNetworkSchema = z
  .object({
    allowOut: z.array(z.string()).optional(),
    denyOut: z.array(z.string()).optional(),
    allowPublicTraffic: z.boolean().optional(),
    maskRequestHost: z.string().optional(),
    httpsPorts: z.array(z.number().int()).optional(),
    egressProxy: z.unknown().optional(),
    rules: z.unknown().optional(),
  })
  .passthrough();
export type SandboxNetwork = z.infer<typeof SandboxNetworkSchema>;

/**
 * POST /sandboxes (NewSandbox, the Python SDK's) and POST /v2/sandboxes (NewSandboxV2, the JS
 * SDK's: always secure). `timeout` in seconds.
 */
export const NewSandboxSchema = z
  .object({
    templateID: z.string().min(1, 'templateID names the template (an env of the bundle) to start'),
    timeout: z.number().int().min(0).optional(),
    metadata: StringMap.optional(),
    envVars: StringMap.optional(),
    secure: z.boolean().optional(),
    allow_internet_access: z.boolean().optional(),
    network: SandboxNetworkSchema.optional(),
    autoPause: z.boolean().optional(),
    autoPauseMemory: z.boolean().optional(),
    autoResume: z.object({ enabled: z.boolean() }).passthrough().optional(),
    mcp: z.unknown().optional(),
    iam: z.unknown().optional(),
    volumeMounts: z.array(z.unknown()).optional(),
  })
  .passthrough();
export type NewSandbox = z.infer<typeof NewSandboxSchema>;

/** POST /sandboxes/{id}/connect, /v2/sandboxes/{id}/connect and the older /resume: a timeout from now (seconds). */
export const ConnectSandboxSchema = z.object({ timeout: z.number().int().min(0).optional(), memory: z.boolean().optional() }).passthrough();
/** POST /sandboxes/{id}/timeout */
export const SandboxTimeoutSchema = z.object({ timeout: z.number().int().min(0) }).passthrough();
/** POST /sandboxes/{id}/refreshes: keep it alive `duration` seconds from now */
export const SandboxRefreshSchema = z.object({ duration: z.number().int().min(0).optional() }).passthrough();
/** POST /sandboxes/{id}/pause */
export const SandboxPauseSchema = z.object({ memory: z.boolean().optional() }).passthrough();

export const SandboxStateSchema = z.enum(['running', 'paused']);
export type SandboxState = z.infer<typeof SandboxStateSchema>;

/** What a create (and a connect) answers: where the SDK finds the sandbox's envd and its token. */
export const SandboxCreatedSchema = z.object({
  sandboxID: z.string(),
  templateID: z.string(),
  alias: z.string().optional(),
  clientID: z.string(),
  envdVersion: z.string(),
  envdAccessToken: z.string().optional(),
  trafficAccessToken: z.string().nullable(),
  domain: z.string().nullable(),
});
export type SandboxCreated = z.infer<typeof SandboxCreatedSchema>;

/** GET /v2/sandboxes' items (and GET /sandboxes'). */
export const ListedSandboxSchema = z.object({
  sandboxID: z.string(),
  templateID: z.string(),
  alias: z.string().optional(),
  clientID: z.string(),
  startedAt: z.string(),
  endAt: z.string(),
  cpuCount: z.number(),
  memoryMB: z.number(),
  diskSizeMB: z.number(),
  envdVersion: z.string(),
  metadata: StringMap,
  state: SandboxStateSchema,
});
export type ListedSandbox = z.infer<typeof ListedSandboxSchema>;

/** GET /sandboxes/{id} */
export const SandboxDetailSchema = ListedSandboxSchema.extend({
  domain: z.string().nullable(),
  envdAccessToken: z.string().optional(),
  allowInternetAccess: z.boolean().nullable(),
  network: z.object({ allowOut: z.array(z.string()).optional(), denyOut: z.array(z.string()).optional() }).optional(),
  lifecycle: z.object({ onTimeout: z.literal('kill'), autoResume: z.boolean() }),
});
export type SandboxDetail = z.infer<typeof SandboxDetailSchema>;

/** One entry of GET /sandboxes/{id}/metrics. */
export const SandboxMetricSchema = z.object({
  timestamp: z.string(),
  timestampUnix: z.number().int(),
  cpuCount: z.number(),
  cpuUsedPct: z.number(),
  memUsed: z.number(),
  memTotal: z.number(),
  memCache: z.number(),
  diskUsed: z.number(),
  diskTotal: z.number(),
});
export type SandboxMetric = z.infer<typeof SandboxMetricSchema>;

/** GET /v2/sandboxes (and GET /sandboxes, which has `metadata` only): `metadata` is `k=v&k2=v2`, URL-encoded once more. */
export const ListSandboxesQuerySchema = z
  .object({
    metadata: z.string().optional(),
    state: z.union([z.string(), z.array(z.string())]).optional(),
    limit: z.coerce.number().int().min(1).max(1000).optional(),
    nextToken: z.string().optional(),
    template: z.string().optional(),
  })
  .passthrough();

// ---- the sandbox side: envd's Connect RPC in its JSON form -------------------------------------

/**
 * Proto3's JSON mapping, as both SDKs write it: lowerCamelCase field names (a parser must accept
 * the proto's own snake_case names too: normalised by `camelKeys` before these schemas run),
 * 64-bit integers as strings or numbers, `bytes` as base64, enums by name or number.
 */
export function camelKeys(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(camelKeys);
  if (v === null || typeof v !== 'object') return v;
  return Object.fromEntries(Object.entries(v).map(([k, x]) => [k.replace(/_([a-z])/g, (_m, c: string) => c.toUpperCase()), camelKeys(x)]));
}

const u32 = z.union([z.number().int().min(0), z.string().regex(/^\d+$/).transform(Number)]);
const bytes = z.string().describe('base64');

export const ProcessSelectorSchema = z.object({ pid: u32.optional(), tag: z.string().optional() }).passthrough();
export type ProcessSelector = z.infer<typeof ProcessSelectorSchema>;

export const ProcessConfigSchema = z.object({
  cmd: z.string().min(1, 'process.cmd names the program to run'),
  args: z.array(z.string()).default([]),
  envs: StringMap.default({}),
  cwd: z.string().optional(),
});
export type ProcessConfig = z.infer<typeof ProcessConfigSchema>;

/** process.Process/Start */
export const StartRequestSchema = z
  .object({ process: ProcessConfigSchema, pty: z.unknown().optional(), tag: z.string().optional(), stdin: z.boolean().optional() })
  .passthrough();
/** process.Process/Connect */
export const ConnectRequestSchema = z.object({ process: ProcessSelectorSchema }).passthrough();
/** process.Process/SendInput */
export const SendInputRequestSchema = z
  .object({ process: ProcessSelectorSchema, input: z.object({ stdin: bytes.optional(), pty: bytes.optional() }).passthrough().default({}) })
  .passthrough();
/** process.Process/SendSignal: SIGTERM (15) or SIGKILL (9) */
export const SendSignalRequestSchema = z
  .object({ process: ProcessSelectorSchema, signal: z.union([z.enum(['SIGNAL_SIGTERM', 'SIGNAL_SIGKILL', 'SIGNAL_UNSPECIFIED']), z.number().int()]) })
  .passthrough();
/** process.Process/CloseStdin */
export const CloseStdinRequestSchema = z.object({ process: ProcessSelectorSchema }).passthrough();

/** One event of a process's stream (StartResponse, ConnectResponse: `{event: …}`). */
export type ProcessEvent =
  | { start: { pid: number } }
  | { data: { stdout: string } | { stderr: string } }
  | { end: { exitCode: number; exited: boolean; status: string; error?: string } }
  | { keepalive: Record<string, never> };

/** process.Process/List's entries */
export interface ProcessInfo {
  config: { cmd: string; args: string[]; envs: Record<string, string>; cwd?: string };
  pid: number;
  tag?: string;
}

/** filesystem.Filesystem/Stat, MakeDir, Remove */
export const PathRequestSchema = z.object({ path: z.string().min(1, 'path names a file or folder of the sandbox') }).passthrough();
/** filesystem.Filesystem/ListDir: depth 0 is taken as 1, as envd takes it */
export const ListDirRequestSchema = z.object({ path: z.string().min(1, 'path names a folder of the sandbox'), depth: u32.default(1) }).passthrough();
/** filesystem.Filesystem/Move */
export const MoveRequestSchema = z.object({ source: z.string().min(1), destination: z.string().min(1) }).passthrough();

export const FILE_TYPES = { file: 'FILE_TYPE_FILE', dir: 'FILE_TYPE_DIRECTORY', symlink: 'FILE_TYPE_SYMLINK' } as const;

/** filesystem.EntryInfo in its JSON form (`size` an int64: a string) */
export interface EntryInfo {
  name: string;
  type: (typeof FILE_TYPES)[keyof typeof FILE_TYPES];
  path: string;
  size: string;
  mode: number;
  permissions: string;
  owner: string;
  group: string;
  modifiedTime: string;
  symlinkTarget?: string;
}

/** What POST /files answers for each file written. */
export interface WriteInfo {
  name: string;
  type: 'file';
  path: string;
}

/** GET and POST /files' query: the file's path (relative: to the user's home) and the user to act as. */
export const FilesQuerySchema = z
  .object({ path: z.string().optional(), username: z.string().optional(), signature: z.string().optional(), signature_expiration: z.string().optional() })
  .passthrough();
