/**
 * A Sandbox that hands every call of its core, and its images, to another one: the base of the
 * tests' fault-injecting wrappers, which override only the calls they break. Its optional parts
 * (shell, usage, lockdown, ...) are the wrapped sandbox's.
 */
import type { DeployRequest, EnvHandle, Sandbox, TeardownOptions } from '../../src/sandbox/sandbox.js';

export class DelegatingSandbox<S extends Sandbox = Sandbox> implements Sandbox {
  // the optional parts: what the wrapped sandbox offers, this one offers (a subclass may replace one)
  readonly modelDoors?: boolean;
  readonly instanceClaim?: Sandbox['instanceClaim'];
  readonly deadInstances?: Sandbox['deadInstances'];
  readonly stock?: Sandbox['stock'];
  readonly lockdown?: Sandbox['lockdown'];
  readonly shell?: Sandbox['shell'];
  readonly usage?: Sandbox['usage'];

  constructor(readonly inner: S) {
    this.modelDoors = inner.modelDoors;
    this.instanceClaim = inner.instanceClaim;
    this.deadInstances = inner.deadInstances;
    this.stock = inner.stock;
    this.lockdown = inner.lockdown;
    this.shell = inner.shell;
    this.usage = inner.usage;
  }
  ping() {
    return this.inner.ping();
  }
  get images() {
    return this.inner.images;
  }
  deploy(req: DeployRequest): Promise<EnvHandle> {
    return this.inner.deploy(req);
  }
  diagnose(handle: EnvHandle) {
    return this.inner.diagnose(handle);
  }
  teardown(episodeId: string, opts?: TeardownOptions) {
    return this.inner.teardown(episodeId, opts);
  }
  sweep() {
    return this.inner.sweep();
  }
  listEnvIds() {
    return this.inner.listEnvIds();
  }
  networksInUse() {
    return this.inner.networksInUse();
  }
  close() {
    return this.inner.close();
  }
}
