/**
 * What an episode (episode.ts) is given: the server's settings for it, its dependencies (its
 * lease's, the sandbox, the bundle, the reward, the log and metrics, the model gateway's side),
 * and the observer that sees its life.
 */
import type { Logger } from 'pino';
import type { LoadedBundle } from '../bundle/index.js';
import type { Metrics } from '../metrics.js';
import type { Action } from '../protocol/frames.js';
import type { Lane } from '../protocol/lanes.js';
import type { StepOutcome } from '../protocol/observations.js';
import type { EnvHandle, Sandbox } from '../sandbox/sandbox.js';
import type { EnvLeaseDeps } from './capacity/env-lease.js';
import type { EnvCaller } from './env-client.js';
import type { Episode } from './episode.js';
import type { HarnessRun } from './harness-task.js';
import type { ModelAccess } from './model-access.js';
import type { RewardFn } from './reward.js';
import type { VerifierRecord } from './verified-task.js';

export interface EpisodeSettings {
  /** --reset-timeout: the longest a reset waits in the queue for a slot (a reset may ask for less) */
  resetTimeoutMs: number;
  /** --split-priority: the lane a split's resets wait in (a reset may name its own; others: normal) */
  splitLanes: ReadonlyMap<string, Lane>;
  toolTimeoutMs: number;
  episodeTimeoutMs: number;
  /** --max-steps; undefined: derived per task from its time budget (maxStepsFor, src/defaults.ts) */
  maxSteps: number | undefined;
}

/** what an episode needs: its lease's dependencies (slot, pool, deploys) and its own */
export interface EpisodeDeps extends EnvLeaseDeps {
  /** besides the lease's deploy and teardown: a look at an env that failed a call, and the reconciler's list */
  sandbox: Pick<Sandbox, 'deploy' | 'teardown' | 'diagnose' | 'listEnvIds' | 'shell' | 'usage'>;
  bundle: LoadedBundle;
  settings: EpisodeSettings;
  reward: RewardFn;
  log: Logger;
  metrics: Metrics;
  /** sees each episode's life (the web console's history, --record); it can never fail an episode */
  observer?: EpisodeObserver;
  /** how the episode calls its env (default: an EnvClient over HTTP to the env's baseUrl) */
  connect?: (handle: EnvHandle) => EnvCaller;
  /** the model gateway's side of episodes (a credential per env, issued at deploy, revoked before teardown) */
  modelAccess?: ModelAccess;
}

/** Callbacks at the points of an episode's life; a throwing callback is logged and ignored. */
export interface EpisodeObserver {
  onCreated?(ep: Episode): void;
  /** the reset succeeded: `outcome` is what the client receives */
  onReset?(ep: Episode, outcome: StepOutcome): void;
  /** a step answered (`startedAt` in the episode's clock); a step that throws is not reported */
  onStep?(ep: Episode, action: Action, outcome: StepOutcome, startedAt: number): void;
  /** the episode ended (it may still be tearing down); reason, reward, scores, failure are set */
  onEnded?(ep: Episode): void;
  /** a verifier ran (its output is the transcript's, never the model's) */
  onVerifier?(ep: Episode, record: VerifierRecord): void;
  /** a harness episode's harness run ended (its exit and output) */
  onHarness?(ep: Episode, run: HarnessRun): void;
}
