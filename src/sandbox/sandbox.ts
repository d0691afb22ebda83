/**
 * What the episode machinery needs from wherever envs run: the Sandbox interface (below, a core and
 * capabilities) and the shapes it speaks. Its implementations: the engine backends (docker/,
 * swarm/, on the skeleton in engine/, the only code that knows dockerode) and, for the Docker-free
 * test layer, child processes (test/support/process-sandbox.ts).
 *
 * Long because it is the contract: every shape the sandbox speaks, each declared once with what it
 * means; the code in it is a few lines.
 */
import { sandboxReason, type SandboxFact, type SandboxFailureReason } from '../failures.js';
import type { ContainerExec } from './container-exec.js';
import type { EnvGrant } from '../protocol/bundle.js';

export interface EnvResources {
  memoryMb: number;
  cpus: number;
  pids: number;
  /** the most the env may write to its container's writable layer (bundle.json's `storage_mb`, else the server's default); absent: unbounded */
  storageMb?: number;
  /** the most entries (files, directories) it may create, change or delete there (bundle.json's `max_files`, else the server's default); absent: unbounded */
  maxFiles?: number;
  /** which of the two are the server's defaults (--default-storage-mb, --default-max-files), its bundle giving none: said when the env is stopped */
  defaulted?: readonly LayerBound[];
}

/** the bounds of an env's writable layer */
export type LayerBound = 'storageMb' | 'maxFiles';

/** What runs an env's container: the engine's default (runc), or gVisor (runsc, registered with the engine). */
export type EnvRuntime = 'runc' | 'runsc';

/**
 * What a bundle env asked for beyond the lock-down every env gets (bundle.json's
 * `envs.<name>.security`, validated by engine/hardening.ts's EnvSecuritySchema, which turns it into
 * engine settings): capabilities added to the default set, a read-only root, a user.
 */
export interface EnvSecurityAsk {
  capabilities: readonly string[];
  root: 'writable' | 'read-only';
  tmp_mb?: number;
  user?: string;
}

/** One env of the bundle, ready to deploy: its image already exists on the engine. */
export interface EnvSpec {
  /** the env's name in the manifest */
  name: string;
  /** image reference the engine has */
  image: string;
  port: number;
  readyPath: string;
  deployTimeoutMs: number;
  resources: EnvResources;
  environment: Record<string, string>;
  /**
   * `http` (the default): a server keeping the env contract on `port`, ready when `readyPath`
   * answers. `shell`: any image, its command replaced by the toolbox's keeper (toolbox.ts), ready
   * when an exec in it answers; no port, no readiness path, no env secret. Only a sandbox with a
   * `shell` part deploys one.
   */
  kind?: 'http' | 'shell';
  /** the container's working directory, overriding the image's WORKDIR (shell envs) */
  workdir?: string;
  /** what the bundle asked for beyond the lock-down; absent: the defaults (engine/hardening.ts) */
  security?: EnvSecurityAsk;
  /** absent: the sandbox's own (the server's --runtime) */
  runtime?: EnvRuntime;
  /** host names the env's container resolves to these IPv4 addresses (a hosts entry each), besides its network's own names */
  hosts?: Record<string, string>;
  /** services deployed beside the env on its episode network before it, reached by their names (a sandbox with `sidecars` true) */
  sidecars?: SidecarSpec[];
}

/** One service beside an env (bundle.json's envs.<env>.sidecars.<name>), its image ready on the engine. */
export interface SidecarSpec {
  /** its host name on the episode network */
  name: string;
  image: string;
  environment: Record<string, string>;
  /** run in it until it passes before the env is deployed (a string by its shell, a list as it is); absent: the image's HEALTHCHECK, if any */
  healthcheck?: { command: string | readonly string[]; intervalS: number; timeoutS: number; retries: number; startPeriodS: number };
  resources: { memoryMb: number; cpus: number; pids: number };
}

export interface DeployRequest {
  /**
   * The env's id, labelled on everything deployed for it (as `openenv.episode`, a label older than
   * the warm pool): an episode's own id, or a pooled env's `pool-…` id.
   */
  envId: string;
  env: EnvSpec;
  /** aborting stops the deploy, removes what it created, and rejects with an AbortError */
  signal?: AbortSignal;
  /**
   * The model gateway's door for this env (src/gateway/): called once the env's network exists
   * (and the server's container, if any, joined it), before the env starts, with where the server
   * is on that network; the variables it resolves with are added to the env's environment, its
   * host names to the env's hosts. A sandbox that cannot open such a door rejects the deploy
   * (`modelDoors` false or absent).
   */
  modelDoor?: ModelDoorHook;
  /**
   * Destinations outside its network the env may open TCP connections to (the egress allowlist,
   * docs/e2b.md): the env gets a routed network whose every other destination is closed. Given
   * (even empty) with a model door, the door is opened the same way and everything else of the
   * server's host is closed to the env (where the server reaches envs from its host). Absent: no
   * rules, and the network leads nowhere but to the door, as every env's. A sandbox that cannot
   * set such rules (`egress` absent) rejects the deploy.
   */
  egress?: readonly EgressDestination[];
}

/** One destination an env may reach: an IPv4 address and a TCP port. */
export interface EgressDestination {
  ip: string;
  port: number;
}

/** Opening chosen destinations to an env (DeployRequest.egress): host rules the backend sets and removes. */
export interface EnvEgress {
  /** rejects with a SandboxError (engine_failed) saying what the host needs, where the rules cannot be set */
  check(): Promise<void>;
}

/** where the server is on an episode's network: its address there (left out: find it by the subnet) and the subnet */
export interface NetworkPlace {
  address?: string;
  subnet: string;
}

/** what opening an env's model door gives its deploy */
export interface ModelDoorOpened {
  /** variables added to the env's environment (the SDKs' base URLs and key) */
  env: Record<string, string>;
  /** host names the env resolves to the door's address (EnvSpec.hosts) */
  hosts?: Record<string, string>;
  /** where the door listens: opened to the env with its egress rules, when it has them */
  door: EgressDestination;
}

export type ModelDoorHook = (place: NetworkPlace) => Promise<ModelDoorOpened>;

/** the env as its deploy makes it once its door is open: the door's variables and host names added */
export function withModelDoor(env: EnvSpec, opened: ModelDoorOpened): EnvSpec {
  return { ...env, environment: { ...env.environment, ...opened.env }, ...(opened.hosts ? { hosts: { ...env.hosts, ...opened.hosts } } : {}) };
}

export interface EnvHandle {
  envId: string;
  /** where the server reaches the env, e.g. http://10.213.0.2:8000 ('' for a shell env: it is reached by exec) */
  baseUrl: string;
  /** what runs the env: a container id (docker, process: `process-<pid>-<id>`), a service id (swarm) */
  containerId: string;
  networkId: string;
  /**
   * The episode's env-identity secret, given to the env as OPENENV_ENV_SECRET: every request
   * carries a proof of it and a conforming env proves it back (see env-client.ts). Absent: the
   * sandbox gives envs no secret and nothing is checked.
   */
  secret?: string;
  /**
   * Aborts the moment the env's container dies, is removed or leaves its episode network (reason:
   * an Error saying which); from then on nothing sent to baseUrl can reach this env. Absent: the
   * sandbox cannot tell, and a death shows only when a call fails.
   */
  gone?: AbortSignal;
  /**
   * The toolbox's binary in the env's container (toolbox.ts): mounted read-only, for the server's
   * own steps there. Absent: the env has none (its sandbox mounts none, or was not asked to).
   */
  toolbox?: string;
  /**
   * Where the deploy's time went, stage by stage, in ms, in the backend's own stages (docker:
   * network, create, start, ready; swarm: DEPLOY_STAGES). The server observes them into
   * `openenv_deploy_stage_seconds`. Absent: the sandbox does not tell.
   */
  stagesMs?: Readonly<Record<string, number>>;
  /** the containers of the env's sidecars (EnvSpec.sidecars): counted in its usage, removed with it */
  sidecars?: readonly string[];
}

export interface TeardownOptions {
  /**
   * Called once no env of the id runs any more, so its slot can go to the next episode (the env
   * lease frees it here). When that is differs by backend:
   * - docker: once the env's container is removed, before its network is (a network runs no env);
   * - swarm: once everything of the id is gone, the service and its overlay: a task's container
   *   stops only when its node reports it, and the overlay goes only after that, so the slot is
   *   held until the node has let the env go (a node that is down is not waited for);
   * - process (the fast layer's): once the env's process has exited (it has no network).
   * Not called when a removal failed (the teardown then rejects). Also called when there was
   * nothing to remove. A caller who joins a teardown already running is called when that whole
   * teardown has finished.
   */
  onEnvRemoved?: () => void;
}

export interface EnvDiagnosis {
  running: boolean;
  exitCode: number | null;
  oomKilled: boolean;
  /** the last lines of the env's log (stdout and stderr) */
  logTail: string;
  /** set when the node the env ran on is gone (swarm): what is known of it, for the failure's message */
  nodeGone?: string;
  /** set when the sandbox stopped the env for what it wrote past its storage bound: why */
  storageExceeded?: string;
  /** set when the env runs with its processes at its pids limit (the sandbox read its count): what it read */
  pidsAtLimit?: string;
  /**
   * set when a shell env's process 1 (the toolbox's keeper, which nothing outside the env stops
   * but the engine) died of a signal the engine did not send, while the sandbox heard every kill
   * the engine sent: a process of the env's own killed it (gVisor lets a process signal 1)
   */
  killedFromInside?: string;
}

export interface SweepResult {
  containers: string[];
  networks: string[];
}

/** What a sweep of dead instances removed: the instance names, and their containers and networks. */
export interface AbandonedSweep {
  instances: string[];
  containers: string[];
  networks: string[];
}

/**
 * A deploy or engine failure, with what a person needs to act on it: the sandbox says what it saw
 * (`fact`), and failures.ts decides the failure reason that fact means.
 */
export class SandboxError extends Error {
  override readonly name = 'SandboxError';
  readonly reason: SandboxFailureReason;
  constructor(
    readonly fact: SandboxFact,
    message: string,
    readonly details: { exitCode?: number | null; logTail?: string } = {},
  ) {
    super(message);
    this.reason = sandboxReason(fact);
  }
}

export interface ImageBuildRequest {
  bundleName: string;
  envName: string;
  /** absolute path of the env's build context */
  contextDir: string;
  buildArgs: Record<string, string>;
  /** "none": the build's RUN steps get no network (the bundle's envs.<env>.build_network); default: the engine's */
  network?: 'none';
  /** one line of build output at a time */
  onProgress?: (line: string) => void;
  /** the image is not there: this call builds it (not called when it is up to date) */
  onBuilding?: () => void;
  /** look only (--images prebuilt): when the image is not there, reject (no_image) naming its tag instead of building it */
  lookOnly?: boolean;
  /** stops the build (the engine cancels it and removes its step's container): rejects with an AbortError */
  signal?: AbortSignal;
}

/**
 * Runs one creation of what a sandbox makes ahead of demand when the engine can spare it, or
 * rejects with an AbortError if `signal` aborts first. The server's: a refill turn of
 * --max-concurrent-deploys. Without one, creations run at once.
 */
export type StockTurn = <T>(fn: () => Promise<T>, signal: AbortSignal) => Promise<T>;

/**
 * Where envs run, as the episode machinery sees it: a small core (an env's deploy, look, teardown,
 * what is left of envs on the engine, close) and named parts, one per concern, composed the way
 * testcontainers composes one small client per engine resource. `images` every sandbox has; the
 * optional capabilities are there when the backend offers them (both engine backends offer
 * `instanceClaim` and `stock`, the Docker one `deadInstances`; the test layer's process sandbox
 * none), and a caller asks for one with `?.`.
 */
export interface Sandbox {
  /** resolves when the engine answers; rejects with a SandboxError (engine_failed) otherwise */
  ping(): Promise<void>;
  /** network, container, readiness; a failed deploy leaves nothing behind */
  deploy(req: DeployRequest): Promise<EnvHandle>;
  /** state of the episode's env container, to explain a failure */
  diagnose(handle: EnvHandle): Promise<EnvDiagnosis>;
  /**
   * Removes every container and network labelled with the episode (containers first).
   * Idempotent: "not found" and "already in progress" are success. Safe to call concurrently.
   */
  teardown(envId: string, opts?: TeardownOptions): Promise<void>;
  /** removes every container and network labelled with this server instance */
  sweep(): Promise<SweepResult>;
  /** env ids that still own labelled resources on the engine (for the reconciler; a pooled env's is `pool-…`) */
  listEnvIds(): Promise<string[]>;
  /** episode networks this sandbox currently holds for episodes (not those made ahead of demand) */
  networksInUse(): number;
  /** releases the client (no engine calls after this) */
  close(): Promise<void>;

  /** the env images: built from a bundle's contexts, or checked present */
  readonly images: EnvImages;
  /** true when deploy() honours DeployRequest.modelDoor (the Docker backend) */
  readonly modelDoors?: boolean;
  /** true when deploy() runs an env's sidecars (EnvSpec.sidecars: the Docker backend); a bundle with some is refused at start by any other */
  readonly sidecars?: boolean;
  /** one live server per instance name on the engine; absent: the sandbox shares nothing to guard */
  readonly instanceClaim?: InstanceClaim;
  /** what dead servers under other instance names left behind; absent: the sandbox cannot tell */
  readonly deadInstances?: DeadInstances;
  /** resources made ahead of demand (episode networks); absent: every deploy makes its own */
  readonly stock?: AheadOfDemand;
  /** how envs are locked down on this engine, and the runtimes it has; absent: the sandbox locks nothing down */
  readonly lockdown?: EnvLockdown;
  /**
   * shell envs and the built-in shell toolset: deploy() takes `kind: 'shell'` specs, and this gives
   * exec and archive access to a deployed env's container (on swarm, through the engine of the
   * env's node); absent: the sandbox deploys http envs only, and a bundle that needs it is refused
   * at start
   */
  readonly shell?: EnvShell;
  /**
   * true when the E2B API's sandboxes run on it (the Docker backend); the swarm backend has the
   * shell part they use but they are not built or tested there yet, so its E2B API refuses them
   */
  readonly e2bSandboxes?: boolean;
  /**
   * what a deployed env has used (CPU, peak memory, bytes written), read once as its episode ends
   * (src/episodes/episode-cost.ts); absent: the sandbox cannot tell, and an episode's cost has
   * only its wall time. The swarm backend reads it from the engine of the env's node, and nothing
   * for an env on a node whose engine it cannot reach
   */
  readonly usage?: EnvUsage;
  /** the engine's pause of a deployed env (the Docker backend); absent: the sandbox cannot pause envs */
  readonly pausing?: EnvPausing;
  /** an egress allowlist per env (the Docker backend, on the engine's host); absent: envs reach nothing outside */
  readonly egress?: EnvEgress;
}

/** What a deployed env has used so far, as far as its sandbox can tell: a figure it cannot tell is null. */
export interface EnvUsageReading {
  /** CPU seconds of every process of the env, since its start */
  cpuS: number | null;
  /** the most memory the env held at once, in bytes */
  peakMemoryBytes: number | null;
  /** bytes the env wrote to the host's disk (at least what its writable layer holds) */
  bytesWritten: number | null;
}

/** Reads what an env has used (the Docker backend: its container's cgroup figures and writable layer). */
export interface EnvUsage {
  /**
   * One reading of the env of `handle`, while it still exists. When `signal` aborts, resolves soon
   * with what was read by then (the rest null). Should not reject; a caller treats a rejection as
   * all figures null.
   */
  read(handle: EnvHandle, signal: AbortSignal): Promise<EnvUsageReading>;
}

/** Processes and files in a deployed env's container (the shell toolset's, the verifier's). */
export interface EnvShell {
  /**
   * Readies what the server's own steps in env containers need (the toolbox, toolbox.ts): from
   * then on every env deployed gets it. Rejects with a SandboxError (engine_failed) saying what
   * to install when it cannot. A shell env's deploy does it itself.
   */
  prepare(): Promise<void>;
  /** the env's container, by its handle (an env of any kind; valid until its teardown) */
  exec(handle: EnvHandle): ContainerExec;
  /**
   * A fresh container of the env's image beside it, for a clean verifier: no network at all, the
   * env's lock-down, the toolbox, the keeper as its process 1; removed by `remove()` or with the
   * env (it carries the env's labels). Resolves once an exec in it answers.
   */
  companion(handle: EnvHandle, env: EnvSpec, signal?: AbortSignal): Promise<Companion>;
}

/** A container beside an env's (EnvShell.companion). */
export interface Companion {
  exec: ContainerExec;
  remove(): Promise<void>;
}

/** How a sandbox locks its envs down (engine/hardening.ts, docs/security.md). */
export interface EnvLockdown {
  /** the runtime envs run under unless their spec names one (the server's --runtime) */
  readonly runtime: EnvRuntime;
  /** what `env` runs with on this engine, with what the engine cannot enforce */
  granted(env: EnvSpec): Promise<EnvGrant>;
  /** rejects with a SandboxError (engine_failed) saying what to do, when the engine cannot run envs under `runtime` */
  checkRuntime(runtime: EnvRuntime): Promise<void>;
}

/** The env images a sandbox deploys from. */
export interface EnvImages {
  /**
   * Builds the env image from its context unless an image with the content-hash tag
   * `openenv-bundle/<bundle>-<env>:<12 hex>` already exists. Returns the reference to deploy
   * (the tag; on a swarm with a registry, the pushed image by digest).
   */
  build(req: ImageBuildRequest): Promise<string>;
  /** rejects with a SandboxError (no_image) when the engine does not have it */
  check(ref: string): Promise<void>;
  /**
   * Pulls the image from its registry, telling its progress as it goes; rejects with a SandboxError
   * (no_image) saying why when the engine cannot, or with an AbortError when `signal` aborts.
   * Absent: the sandbox pulls nothing (an image must be on the engine already).
   */
  pull?(ref: string, opts: { onProgress?: (p: PullProgress) => void; signal?: AbortSignal }): Promise<void>;
}

/** How far a pull is: the engine's last status line, and the bytes of the layers it has seen so far. */
export interface PullProgress {
  status: string;
  layers: number;
  bytes: number;
  totalBytes: number;
}

/** Freezing a deployed env's processes and thawing them (the engine's pause): its container stays, its slot held. */
export interface EnvPausing {
  pause(handle: EnvHandle): Promise<void>;
  unpause(handle: EnvHandle): Promise<void>;
}

/** This server's instance name, claimed on the engine so that no two live servers sweep each other's envs. */
export interface InstanceClaim {
  /**
   * Claims the name before anything is swept: rejects (naming the holder) while another live
   * server holds it; a name a dead server left is taken over. Held until release() or close().
   */
  claim(): Promise<void>;
  /** gives the name back (close() does it too) */
  release(): Promise<void>;
  /** `fn(why)` once another server turns out to have held the name first: stop serving */
  onLost(fn: (why: string) => void): void;
}

/** What dead servers left under instance names nobody holds. */
export interface DeadInstances {
  /**
   * Removes what dead servers under instance names starting with `prefix` left behind (each
   * `openenv-bundle check` runs under a fresh name: a killed one's envs and lock are found this
   * way), sparing names a live server holds.
   */
  sweep(prefix: string): Promise<AbandonedSweep>;
}

/** Resources a sandbox makes before any deploy asks (the network stock), so deploys skip making them. */
export interface AheadOfDemand {
  /**
   * Begins making them, each creation in a `turn` when given (the server's: a refill turn of
   * --max-concurrent-deploys, so that resets go first). Called once the start sweep is done,
   * which would remove them.
   */
  start(turn?: StockTurn): void;
  /**
   * Stops making them and removes what nobody took. Called when the drain begins, so that
   * removing them falls within --shutdown-timeout rather than in close()'s short budget (a swarm's
   * stocked overlays each need the server's container to leave them first, one at a time).
   * close() waits for the same removal.
   */
  stop(): Promise<void>;
  /** the figures of what it keeps made (for /metrics) */
  stats(): StockStats;
}

export interface StockStats {
  size: number;
  ready: number;
  making: number;
  made: number;
  taken: number;
  missed: number;
  /** networks that came back empty from an ended episode into the stock (recycling) */
  recycled: number;
  /** recycling: networks out with live episodes, counted towards `size` (they come back); 0 without recycling */
  out: number;
}

/** Label keys on every container and network this server creates, from the moment of creation. */
export const LABELS = {
  /** present on everything the bundle server manages */
  managed: 'io.openenv.bundle-server',
  instance: 'io.openenv.bundle-server.instance',
  bundle: 'io.openenv.bundle-server.bundle',
  episode: 'io.openenv.bundle-server.episode',
  env: 'io.openenv.bundle-server.env',
} as const;
