/**
 * A Sandbox that hands every call of its core, and its images, to another one: the base of the
 * tests' fault-injecting wrappers, which override only the calls they break.
 */
import type { DeployRequest, EnvHandle, Sandbox, TeardownOptions } from '../../src/sandbox/sandbox.js';

export class DelegatingSandbox<S extends Sandbox = Sandbox> implements Sandbox {
  constructor(readonly inner: S) {}
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
  listEpisodeIds() {
    return this.inner.listEpisodeIds();
  }
  networksInUse() {
    return this.inner.networksInUse();
  }
  close() {
    return this.inner.close();
  }
}
