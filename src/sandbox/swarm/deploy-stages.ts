/**
 * Where a swarm deploy's time goes, stage by stage: each mark closes the stage that ran since the
 * previous one. The `env ready` log line carries them as `<stage>Ms` fields, and the swarm bench
 * reads them back to say which stage a burst waits on.
 */
export const DEPLOY_STAGES = [
  /** the node listing (the unschedulable check) */
  'nodes',
  /** the toolbox's volume on every node checked (an env that gets the toolbox: shell.ts) */
  'toolbox',
  /** the episode's overlay created (or taken from the stock) */
  'overlay',
  /** the model door opened on it: the server's container joined, its address up, the gateway's door listening (an env with a door) */
  'door',
  /** the service created */
  'service',
  /** until the scheduler had assigned the task to a node */
  'schedule',
  /** until the node reported the task running */
  'start',
  /** until the task's overlay address was known */
  'address',
  /** what was left to wait, then, for the server's own container to join the overlay (it joins meanwhile) */
  'attach',
  /** until the env answered its ready path (a shell env: an exec in it, through its node's engine) */
  'ready',
] as const;
export type DeployStage = (typeof DEPLOY_STAGES)[number];

export class DeployStages {
  private last: number;
  private readonly ms = new Map<DeployStage, number>();

  constructor(
    startedAt: number,
    private readonly now: () => number = Date.now,
  ) {
    this.last = startedAt;
  }

  /** closes `stage` now; a stage marked again (or skipped) adds nothing of the others' time */
  mark(stage: DeployStage): void {
    const t = this.now();
    this.ms.set(stage, (this.ms.get(stage) ?? 0) + (t - this.last));
    this.last = t;
  }

  has(stage: DeployStage): boolean {
    return this.ms.has(stage);
  }

  /** `{ nodes, overlay, … }` in ms, the stages that ran, in order */
  byStage(): Partial<Record<DeployStage, number>> {
    const out: Partial<Record<DeployStage, number>> = {};
    for (const s of DEPLOY_STAGES) {
      const v = this.ms.get(s);
      if (v !== undefined) out[s] = v;
    }
    return out;
  }

  /** `{ nodesMs, overlayMs, … }`, the stages that ran, in order (the `env ready` line's fields) */
  fields(): Record<string, number> {
    return Object.fromEntries(Object.entries(this.byStage()).map(([s, v]) => [`${s}Ms`, v]));
  }
}
