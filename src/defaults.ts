/**
 * What an operator may tune and the bounds more than one room shares, each declared once. A
 * constant only one file uses is declared in that file. Some are the defaults of options that
 * other modules need too (SUBNET_POOL for --subnet-pool, DEFAULT_MAX_CONCURRENT_DEPLOYS for
 * --max-concurrent-deploys, DEFAULT_IMAGE_BUILD_CONCURRENCY for --image-build-concurrency,
 * ENV_LAYER_DEFAULTS for --default-storage-mb and --default-max-files): config.ts's schema takes them from here; DEFAULT_REWARD applies when
 * neither --reward nor the bundle says. Every other option's default is declared in that schema
 * (flags, environment variables and `--help` read it there).
 */

/** IPv4 range the episode networks take their subnets from (--subnet-pool's default). */
export const SUBNET_POOL = '10.213.0.0/16';
/** One episode network: a /28 holds 14 addresses (the env, the server's container, spares). */
export const EPISODE_SUBNET_PREFIX = 28;

/**
 * The local base images docker/make-local-*.sh make from what a host has, for a host that reaches
 * no registry, by the build argument the project's Dockerfiles choose their base with (`init`'s
 * templates, the shipped bundles, an imported Harbor task mapped with --base-image).
 */
export const LOCAL_BASE_IMAGES: Readonly<Record<string, { image: string; script: string }>> = {
  NODE_IMAGE: { image: 'openenv-local/node:20', script: 'docker/make-local-node-base.sh' },
  PYTHON_IMAGE: { image: 'openenv-local/python:3', script: 'docker/make-local-python-base.sh' },
  DEBIAN_IMAGE: { image: 'openenv-local/debian:bookworm', script: 'docker/make-local-debian-base.sh' },
};

/** The largest WebSocket frame or HTTP body a client may send (4 MiB). */
export const MAX_FRAME_BYTES = 4 * 1024 * 1024;

/** How scores become the reward when neither the server nor the bundle says. */
export const DEFAULT_REWARD = 'mean';

/** Lines of an env's log kept to explain its failure. */
export const LOG_TAIL_LINES = 20;
/** ...and at most this many bytes of them (the last ones): a log tail rides in observations. */
export const LOG_TAIL_BYTES = 8 * 1024;

/**
 * An episode's connection to its env is kept between its calls this long (src/episodes/env-client.ts);
 * idle longer, it is closed (the next call opens another). Kept per episode, never shared: a
 * recycled network gives a later env the same address.
 */
export const ENV_CONNECTION_IDLE_MS = 5000;

/** Ended request-held episodes kept answerable (state, "episode_done") for idle_timeout. */
export const ENDED_EPISODES_KEPT = 4096;

/** Nesting depth allowed in tool arguments; deeper is the model's mistake (invalid_args). */
export const MAX_ARGUMENT_DEPTH = 64;

/**
 * The swarm backend (--sandbox swarm): how often a deploy looks at its task until it runs (the
 * delay grows to taskPollMaxMs), how often the deployed envs' tasks and nodes are checked for a
 * death or a lost node, how long removing an overlay waits for its service's tasks to go, and how
 * long one node listing serves the deploys that check their env against it.
 */
/**
 * The swarm backend. `pullBudgetMs`: a task's time in "preparing" (its node pulling the env image,
 * once per node and image) is not counted against the env's deploy timeout, up to this much: a
 * first deploy on a node of a slow registry is not a failed env.
 */
export const SWARM = {
  taskPollMaxMs: 500,
  watchIntervalMs: 1000,
  networkRemovalMs: 30_000,
  nodeListMaxAgeMs: 1000,
  pullBudgetMs: 300_000,
  /** how long the server's own address on an overlay it joined may take to come up in its container (a model door binds it) */
  ownAddressUpMs: 10_000,
} as const;

/**
 * --max-concurrent-deploys' default: envs starting at once. Measured, not guessed: `npm run bench`'s
 * sustained phase (128 episodes, 16 at a time, fixture env, 2-core shared engine) gave, in
 * episodes/s for 2 / 4 / 8 deploys at once, 1.88 / 2.68 / 2.50, then 2.24 / 2.12 / 2.15 (engine
 * loaded by other work), then 0.92 / 2.66 / 3.72: 8 averages 0.97 of each run's best, 4 averages
 * 0.89; four later runs (with the network stock) put 8 at 0.97 and 4 at 0.96, within the noise
 * (docs/warm-pool.md has the figures).
 */
export const DEFAULT_MAX_CONCURRENT_DEPLOYS = 8;

/**
 * --image-build-concurrency's default: env images built (or checked) at once at start, by the
 * server and by `check` (a Harbor dataset has an image per task). A build is mostly CPU (package
 * installs, compiles) and the engine's own work, so two keep both cores of the target machine busy
 * while one build waits on its context upload or a layer commit; more only queue on the same cores.
 * Measured (docs/harbor.md, Cold image builds): the shipped dataset's twelve images cold took
 * 0.69x and 0.79x the time at 2 as at 1, alternating in one run on the loaded 2-core machine.
 */
export const DEFAULT_IMAGE_BUILD_CONCURRENCY = 2;

/**
 * Episode networks made ahead of demand (--network-stock, src/sandbox/engine/network-stock.ts).
 * Unset, the stock is min(--max-concurrent-envs, defaultMax): a burst of resets up to the cap
 * finds its networks made. Refills run `parallel` at a time, each in a refill turn of
 * --max-concurrent-deploys (resets go first); a failed creation pauses them (backoffBaseMs,
 * doubling up to backoffMaxMs).
 */
export const NETWORK_STOCK = { defaultMax: 64, parallel: 1, backoffBaseMs: 1000, backoffMaxMs: 60_000 } as const;

/** The warm pool: how a pooled env is checked at hand-out, and how refill failures back off. */
export const WARM_POOL = {
  /** GET <ready_path> of a pooled env before it is handed out; no answer within it: discarded */
  handoutCheckMs: 1000,
  /** consecutive failed refills after which the pool stops refilling (and retries with backoff) */
  maxConsecutiveFailures: 3,
  /** refills deploying at once while the last refill failed (until one succeeds) */
  refillsAfterFailure: 1,
  /** first retry after the pool stopped refilling; doubles up to backoffMaxMs */
  backoffBaseMs: 5000,
  backoffMaxMs: 300_000,
  /** recent resets whose env kinds set the pool's split between envs (bundles with several envs) */
  demandWindow: 256,
  /**
   * --warm-pool-group: resets of one env each within this of the previous one are one group (a
   * trainer's rollouts of one task, picked up by its workers over a few seconds)
   */
  groupGapMs: 3000,
  /** --warm-pool-group auto: the group size is the median of the last this many groups' sizes */
  groupHistory: 32,
  /** an env deployed ahead of the rest of a group that no reset took within this gives way (discarded, reason expired) */
  anticipationTtlMs: 30_000,
  /** an env none of the last resets asked for within this is stale: its pooled envs give way first, refills skip it */
  staleAfterMs: 60_000,
} as const;

/**
 * Idle bound of an episode started from the console's playground (POST /console/playground):
 * tighter than --idle-timeout, since a closed tab cannot say it left. The page pings while it is
 * open, so only a page that is gone (or asleep this long) loses its episode.
 */
export const CONSOLE_EPISODE_IDLE_S = 120;
/** How often the playground tells the server its page is still open (GET /episodes/:id). */
export const CONSOLE_EPISODE_PING_S = 20;

/**
 * What the console's history (and --record) keeps of one episode, whatever the env answers (a
 * reply may be up to ENV_REPLY_MAX_BYTES of src/episodes/env-client.ts): a payload field (a tool's arguments, result or error,
 * the reset prompt, the scores) of more than `fieldBytes` of JSON is replaced by a truncation
 * mark with its original size and the first `headChars` of its JSON; once a transcript holds
 * `transcriptBytes`, every later payload is a mark without a head. The model's own observation
 * is never cut: only what the server keeps.
 */
export const TRANSCRIPT_BOUNDS = { fieldBytes: 256 * 1024, transcriptBytes: 8 * 1024 * 1024, headChars: 2048 } as const;

/**
 * Shutdown: once every episode is drained, requests still being answered (a console stream, a
 * slow download) get this long before their connections are closed, so the server always closes.
 */
export const CLOSE_GRACE_MS = 2000;

/** `openenv-bundle check`: the seed of every play, and tasks played per (split, toolset) unless `--tasks` says otherwise. */
export const CHECK_SEED = 1234;
export const CHECK_TASKS_PER_GROUP = 3;
/**
 * `check`: every run claims a fresh instance name with this prefix; each run's start-up removes
 * what dead runs under such names left (a killed check's envs, networks and lock marker).
 */
export const CHECK_INSTANCE_PREFIX = 'check-';
/**
 * `check`: envs it runs at once unless `--concurrency` says otherwise. Measured on a shared
 * two-core machine (README, "How long a check takes"): the full GridSim check (clean_reset) ran
 * 43, 65, 72 and 72 episodes/s at 2, 4, 8 and 16; 4 is the smallest within 10 % of the best, and
 * with fresh envs it played 1.7 episodes/s against 0.8 at 2 (8: 2.0, at twice the memory).
 */
export const CHECK_CONCURRENCY = 4;
/** `check`: how far a score may be from its declared max or floor and still count as reaching it (float noise). */
export const SCORE_TOLERANCE = 1e-9;

// --- security ---

/**
 * Env lock-down (src/sandbox/engine/hardening.ts): every env's open-file limit (soft and hard; far
 * above what an env serving one client and a model's commands open, and kernel memory per file is
 * under the memory limit anyway), the tmpfs at /tmp of an env with a read-only root, and under
 * gVisor the host threads its sandbox takes of the pids cgroup: measured on Debian's runsc
 * 2022-12 (ptrace platform), about 56 at rest and 5 per guest process (threads cost none), so
 * `runscPidsBase + runscPidsPerProcess * pids` leaves the env its `pids`.
 */
export const ENV_LOCKDOWN = { nofile: 8192, readOnlyTmpMb: 64, runscPidsBase: 64, runscPidsPerProcess: 6 } as const;

/**
 * The model gateway (src/gateway/): the port its doors listen on (one door per episode, bound to
 * the server's address on that episode's network; 0: a free port per door), and the bounds of one
 * episode's calls. A call's whole time is bounded by callTimeoutMs (a model may take minutes for a
 * long answer, as slime's own --model-timeout does); a streamed reply that goes silent longer than
 * streamIdleMs is a stall. Bodies are model-written: sizes and JSON nesting are bounded both ways.
 * A request and a whole reply are held in memory (at most maxInFlight of each per episode: 4 × 8
 * MiB each way); a stream is passed on as it comes and only its text is kept, so it may be longer
 * (a 32k-token stream is about 6 MB of events).
 */
export const GATEWAY = {
  port: 8201,
  callTimeoutMs: 600_000,
  streamIdleMs: 120_000,
  maxRequestBytes: 8 * 1024 * 1024,
  maxResponseBytes: 8 * 1024 * 1024,
  maxStreamBytes: 64 * 1024 * 1024,
  maxJsonDepth: 64,
  /** calls of one episode in flight at once; past it: 429 */
  maxInFlight: 4,
  /** connections one door holds open at once; past it a new one is closed (other doors are untouched) */
  maxConnections: 16,
  /** the time a harness has to send a whole request (headers and body) */
  requestReceiveMs: 60_000,
  /**
   * after a harness hangs up, how long its call's reply is still read (never past callTimeoutMs)
   * so that the usage the upstream reports at its end is counted; a reply still unfinished then
   * is counted by the estimate below, at the most its cap allowed (docs/gateway.md, "how tokens
   * are counted")
   */
  hangUpDrainMs: 60_000,
  /**
   * the estimate of a call whose upstream reported no usage: tokens per byte of the request sent
   * and of the reply received. One per byte is a bound, not an average: a byte-level BPE (GPT,
   * Llama 3, Qwen) or a SentencePiece with byte fallback makes at most one token of each byte of
   * text, whatever the language, while the usual 1 per 4 bytes is English prose's average and
   * undercounts code, numbers, CJK text or random strings by up to 4 times
   */
  estimatedTokensPerByte: 1,
} as const;
// ---- the built-in shell toolset and task verifiers (src/tools/shell, src/verifier; docs/harbor.md) ----

/**
 * The shell toolset's bounds. `bash`: a call's timeout unless it names one (`timeout_s`), and the
 * most it may name; the output a call returns keeps its first `outputHeadBytes` and last
 * `outputTailBytes` (a mark in between says how many bytes were dropped); the longest command.
 * A call past its timeout is killed (its whole process group), then given `killGraceMs` to end
 * before the shell itself is replaced; a new shell has `startTimeoutMs` to say it is ready.
 * `read_file`: bytes read unless `limit` says, and the most it may say. `write_file`: the largest
 * content. `controlMaxBytes`: what the shell's control channel (its fd 3, which the model's
 * commands can write to) may carry per call before the shell is ended: the server parses it, so a
 * flood there would cost the server's time, every episode's.
 */
export const SHELL_TOOLS = {
  controlMaxBytes: 16 * 1024,
  defaultTimeoutS: 120,
  maxTimeoutS: 3600,
  outputHeadBytes: 16 * 1024,
  outputTailBytes: 16 * 1024,
  maxCommandBytes: 1024 * 1024,
  killGraceMs: 5000,
  startTimeoutMs: 15_000,
  readDefaultBytes: 64 * 1024,
  readMaxBytes: 1024 * 1024,
  writeMaxBytes: 1024 * 1024,
} as const;

/**
 * A task's verifier (tests/test.sh): its timeout unless the task names one, and what of its
 * output is kept for the transcript (first and last bytes; never shown to the model) and for a
 * failure's message (the last bytes).
 */
export const VERIFIER = { defaultTimeoutS: 600, outputHeadBytes: 16 * 1024, outputTailBytes: 16 * 1024, failureTailBytes: 4 * 1024 } as const;

/**
 * The admission queue's lanes (src/episodes/capacity/lanes.ts): the highest lane's oldest reset
 * is served first, except that at least one of every `oldestEvery` grants from the queue goes to
 * the oldest reset of all, whatever its lane. A reset of a lower lane so waits at most
 * `oldestEvery` times as many grants as plain FIFO would make it wait (1: plain FIFO).
 */
export const LANE_SHARE = { oldestEvery: 4 } as const;

// ---- verified tasks served through episodes (src/episodes/verified-task.ts; docs/harbor.md) ----

/**
 * Harness episodes (src/episodes/harness-task.ts; docs/gateway.md): where the server puts the
 * turn's instruction and its shipped harness in the env's container, how much of the harness's
 * output it keeps (head and tail), and how long a `wait` step waits at most (and by default)
 * before it answers with the harness's progress.
 */
export const HARNESS = {
  dir: '/tmp/openenv',
  instructionFile: '/tmp/openenv/instruction.md',
  shippedPath: '/tmp/openenv/openenv_harness.py',
  outputHeadBytes: 8 * 1024,
  outputTailBytes: 8 * 1024,
  waitDefaultS: 10,
  waitMaxS: 60,
} as const;

/**
 * What an env may leave in its container's writable layer when its bundle says nothing
 * (--default-storage-mb and --default-max-files; bundle.json's `resources.storage_mb` and
 * `max_files` win; 0 turns a default off). `storageMb`: what the shipped Harbor dataset's tasks
 * each declare, far above what GridSim's and the fixture's http envs write (nothing), and a
 * bound on what --max-concurrent-envs envs at once can take of the host's disk (8 × 2 GB);
 * Harbor's own default is 10240, which a task that needs it can declare. `maxFiles`: entries
 * (files and directories created, changed or deleted) in the layer: above a large
 * node_modules or a source tree, while a layer of 100,000 costs the engine about 0.3 s a look
 * and its removal about 1.3 s on an idle engine (300,000 empty files: 17 s to make, 7.75 s to
 * remove). The file bound is kept loosely (an env making files at full speed was stopped at
 * 1.4 to 2.3 times it: docs/security.md).
 */
export const ENV_LAYER_DEFAULTS = { storageMb: 2048, maxFiles: 100_000 } as const;

/**
 * How long an ended episode's cost reading (src/episodes/episode-cost.ts: the env's CPU, peak
 * memory, bytes written) may take before its env is removed and its final observation sent: past
 * it the figures not read yet are null. The Docker backend's reading takes some milliseconds where
 * the server sees the host's cgroup files (an inspect with the layer's size: more with many files,
 * about 0.8 s at 100,000); elsewhere it waits for the engine's stats, which answer at the stats
 * collector's next tick, up to about a second later (src/sandbox/engine/usage.ts).
 */
export const EPISODE_COST_READ_MS = 1_500;

// ---- E2B-compatible sandboxes (src/e2b/, docs/e2b.md) ----

/**
 * The E2B side of the server. `envdVersion`: the version of E2B's in-sandbox daemon whose API it
 * serves, as create answers it (the SDKs gate features on it: 0.5.7 has octet-stream uploads and
 * closing stdin; file metadata, 0.6.2, is not served, so the SDKs refuse it themselves).
 * `timeoutS`: a create's lifetime when it names none (E2B's own defaults: 15 s for POST
 * /sandboxes, 300 s for /v2). `image`: what a sandbox of an image named by its metadata
 * (--e2b-image-key) gets: an env's resources (memory, CPUs, processes, the writable layer's
 * bound: an agent installs Node and a CLI there) and how long its container has to come up.
 * `transcript`: what the console keeps of a command's stdout and stderr each (head and tail).
 * `processes`: processes one sandbox may run through the API at once. `listDirMax`: entries one
 * ListDir answers at most. `killGraceMs`: after a command's timeout killed it, how long its output
 * may take to close. `pulls`: images pulled at once, and how long one may take. `files`: a
 * write's body read ahead (held in memory) while the sandbox is asked where the file goes; its
 * chunks smaller than `wholeChunkBytes` gathered to `coalesceBytes` for the engine; what a read
 * holds of the engine's stream while its client is slower (`readBufferBytes`).
 */
export const E2B = {
  envdVersion: '0.5.7',
  timeoutS: { v1: 15, v2: 300 },
  image: { memoryMb: 4096, cpus: 2, pids: 4096, storageMb: 20_480, deployTimeoutMs: 120_000 },
  transcript: { headBytes: 4 * 1024, tailBytes: 4 * 1024 },
  processes: 256,
  listDirMax: 10_000,
  killGraceMs: 5000,
  pulls: { concurrent: 2, timeoutMs: 900_000 },
  files: { readAheadBytes: 8 * 1024 * 1024, coalesceBytes: 1024 * 1024, wholeChunkBytes: 64 * 1024, readBufferBytes: 1024 * 1024 },
} as const;

/**
 * An episode's step bound (call_tool steps) when --max-steps is not given: `calls`, or for a task
 * with a time budget (a Harbor task's agent timeout: shell and harness tasks) one call per
 * `secondsPerCall` of it when that is more (a 30-minute task: 180 calls). A harness episode's
 * `wait` calls are not counted; its harness runs to its own budget. Given, --max-steps bounds
 * every task alike.
 */
export const MAX_STEPS = { calls: 64, secondsPerCall: 10 } as const;

/**
 * The step bound of a task, unless --max-steps `given` one: from its time budget (its own, else
 * the sum of its turns' when every turn has one).
 */
export function maxStepsFor(task: { time_budget_s?: number; per_turn?: readonly { time_budget_s?: number }[] }, given?: number): number {
  if (given !== undefined) return given;
  const turns = task.per_turn ?? [];
  const timeBudgetS =
    task.time_budget_s ?? (turns.length > 0 && turns.every((t) => t.time_budget_s !== undefined) ? turns.reduce((a, t) => a + t.time_budget_s!, 0) : undefined);
  if (timeBudgetS === undefined) return MAX_STEPS.calls;
  return Math.max(MAX_STEPS.calls, Math.ceil(timeBudgetS / MAX_STEPS.secondsPerCall));
}
