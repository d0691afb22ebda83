/** Why an env can no longer be reached: the reason a handle's `gone` signal aborts with, whichever backend watched it. */
export type GoneEvent =
  /** its container exited (docker) */
  | 'die'
  /** its container was removed from the engine (docker) */
  | 'destroy'
  /** its container left the episode network, or the network went (docker) */
  | 'disconnect'
  /** the node its task ran on is down, unknown or disconnected (swarm) */
  | 'node_gone'
  /** its task ended (swarm) */
  | 'task_ended'
  /** its service has no task any more: it was removed (swarm) */
  | 'service_gone';

export class EnvGoneError extends Error {
  override readonly name = 'EnvGoneError';
  constructor(
    readonly event: GoneEvent,
    message: string,
    /** the exit code, when the engine reported one */
    readonly exitCode: number | null = null,
  ) {
    super(message);
  }
}
