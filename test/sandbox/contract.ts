/**
 * The Sandbox contract, one suite for every backend: deploy and readiness, the failure paths with
 * their reasons, abort at any step, teardown (idempotent, shared, `onEnvRemoved`), an id deployed
 * again, and close(). Each backend's file runs it with a harness saying how to make the sandbox
 * and how to see that nothing of it is left; what only one backend has (limits, networks, labels,
 * image tags) stays in that backend's own tests.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SandboxError, type EnvSpec, type Sandbox } from '../../src/sandbox/sandbox.js';
import { fmtS } from '../../src/util/time.js';
import { waitFor } from '../../scripts/lib/wait.js';

export interface ContractHarness<S extends Sandbox = Sandbox> {
  /** a sandbox of the backend; `close()` is the suite's to call */
  make(): S;
  /** the fixture's echo env image, built on `sandbox` */
  image(sandbox: S): Promise<string>;
  /** asserts that nothing deployed by `sandbox` is left (resources, networks held) */
  nothingLeft(sandbox: S): void | Promise<void>;
  /** true once something of the env `id` runs (a process, a container), before it is ready */
  started(sandbox: S, id: string): boolean | Promise<boolean>;
  /** describe, or the backend's guard around it (describeDocker) */
  describe?: (name: string, fn: () => void) => void;
  /**
   * How long the backend may take before an env's process can start at all (a swarm schedules a
   * task first), added to the short deploy timeouts of the failure cases so that they time out
   * waiting for readiness, as they mean to. Default 0.
   */
  startMs?: number;
  /**
   * How long the engine may still list what a finished removal removed (a swarm manager lists an
   * overlay it accepted the removal of for a moment longer): the checks of what is left after a
   * teardown retry for that long, and the wait each needed is logged. Default 0: listed once, at
   * once.
   */
  settleMs?: number;
  /**
   * The engine cannot always tell a kill for the memory limit from another SIGKILL (gVisor: the
   * engine saw `OOMKilled` both true and false): an env over its memory then fails as env_crashed
   * with exit code 137 and the hint that 137 is often the memory limit. Default false: env_oom.
   */
  oomMayBeUnseen?: boolean;
}

/** bundle.json's `echo` env, with overrides */
export function echoSpec(image: string, overrides: Partial<EnvSpec> = {}): EnvSpec {
  return {
    name: 'echo',
    image,
    port: 8000,
    readyPath: '/health',
    deployTimeoutMs: 30_000,
    resources: { memoryMb: 128, cpus: 0.5, pids: 64 },
    environment: {},
    ...overrides,
  };
}

export async function rejection(p: Promise<unknown>): Promise<Error> {
  try {
    await p;
  } catch (err) {
    return err as Error;
  }
  throw new Error('expected the promise to reject, but it resolved');
}

export async function post(baseUrl: string, path: string, body: unknown): Promise<{ status: number; json: any }> {
  const res = await fetch(`${baseUrl}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(10_000),
  });
  return { status: res.status, json: await res.json() };
}

/** runs `check` (it throws while unmet) until it passes or `ms` have passed, then once more for its own error */
async function settled(ms: number, what: string, check: () => void | Promise<void>): Promise<void> {
  const started = Date.now();
  while (Date.now() - started < ms) {
    try {
      await check();
      console.log(`${what}: settled after ${Date.now() - started} ms`);
      return;
    } catch {
      await new Promise((r) => setTimeout(r, 250));
    }
  }
  await check();
}

export function sandboxContract<S extends Sandbox>(name: string, h: ContractHarness<S>): void {
  const deafMs = 2000 + (h.startMs ?? 0);
  const notFoundMs = 1500 + (h.startMs ?? 0);
  (h.describe ?? describe)(`the Sandbox contract: ${name}`, () => {
    let sandbox: S;
    let image = '';
    const settleMs = h.settleMs ?? 0;
    const nothingLeft = () => settled(settleMs, 'nothing left', () => h.nothingLeft(sandbox));

    beforeAll(async () => {
      sandbox = h.make();
      image = await h.image(sandbox);
    });
    afterAll(async () => {
      await sandbox?.sweep();
      await sandbox?.close();
    });

    it('deploys an env that answers the env contract at its base URL; teardown removes it, telling onEnvRemoved once', async () => {
      const handle = await sandbox.deploy({ envId: 'ct-ok', env: echoSpec(image) });
      expect(handle.envId).toBe('ct-ok');
      expect((await fetch(`${handle.baseUrl}/health`, { signal: AbortSignal.timeout(10_000) })).status).toBe(200);
      expect((await post(handle.baseUrl, '/reset', { task_id: 'fx-echo-0', data: { finish_score: 0.5 }, seed: 1 })).status).toBe(200);
      expect((await post(handle.baseUrl, '/tools/call', { name: 'echo', arguments: { text: 'hello' } })).json).toMatchObject({ text: 'hello' });
      expect(await post(handle.baseUrl, '/finish', {})).toEqual({ status: 200, json: { scores: { quality: 0.5 } } });
      expect(await sandbox.listEnvIds()).toContain('ct-ok');
      expect(sandbox.networksInUse()).toBe(1);
      const d = await sandbox.diagnose(handle);
      expect(d).toMatchObject({ running: true, exitCode: null, oomKilled: false });
      expect(d.logTail).toMatch(/POST \/tools\/call -> 200/);
      let removed = 0;
      await sandbox.teardown('ct-ok', { onEnvRemoved: () => removed++ });
      expect(removed).toBe(1);
      await settled(settleMs, 'the episode no longer listed', async () => expect(await sandbox.listEnvIds()).not.toContain('ct-ok'));
      await expect(sandbox.diagnose(handle)).resolves.toMatchObject({ running: false, exitCode: null });
      await nothingLeft();
    });

    it('waits for an env that takes a while to get ready', async () => {
      const h1 = await sandbox.deploy({ envId: 'ct-slow', env: echoSpec(image, { environment: { ECHO_READY_AFTER_MS: '1500' } }) });
      expect((await fetch(`${h1.baseUrl}/health`)).status).toBe(200);
      // the env answers 503 for its first 1.5 s: a deploy that returned has seen it ready
      expect(await sandbox.diagnose(h1)).toMatchObject({ running: true });
      expect((await sandbox.diagnose(h1)).logTail).toMatch(/GET \/health -> 503/);
      await sandbox.teardown('ct-slow');
      await nothingLeft();
    });

    it('an env that never listens: deploy_timeout once its deploy timeout passes, with its log tail, and nothing left', async () => {
      const err = (await rejection(
        sandbox.deploy({ envId: 'ct-deaf', env: echoSpec(image, { deployTimeoutMs: deafMs, environment: { ECHO_NO_LISTEN: '1' } }) }),
      )) as SandboxError;
      expect(err).toBeInstanceOf(SandboxError);
      expect(err.reason).toBe('deploy_timeout');
      expect(err.message).toContain(`env \`echo\` was not ready within its deploy timeout (${fmtS(deafMs)})`);
      expect(err.details.logTail).toContain('ECHO_NO_LISTEN set: not listening');
      await nothingLeft();
    });

    it('a ready path that answers 404: deploy_timeout, saying so', async () => {
      const err = (await rejection(
        sandbox.deploy({ envId: 'ct-404', env: echoSpec(image, { deployTimeoutMs: notFoundMs, readyPath: '/ready-nowhere' }) }),
      )) as SandboxError;
      expect(err.reason).toBe('deploy_timeout');
      expect(err.message).toContain(`(${fmtS(notFoundMs)}): GET /ready-nowhere on port `);
      expect(err.message).toMatch(/last got HTTP 404$/);
      expect(err.details.logTail).toMatch(/GET \/ready-nowhere -> 404/);
      await nothingLeft();
    });

    it('an env that exits during deploy: env_crashed with its exit code and log, noticed before the deadline', async () => {
      // a deadline far past the test's own timeout: a crash reported at all was noticed at once
      const err = (await rejection(
        sandbox.deploy({ envId: 'ct-crash', env: echoSpec(image, { deployTimeoutMs: 600_000, environment: { ECHO_EXIT_AT_START: '7' } }) }),
      )) as SandboxError;
      expect(err.reason).toBe('env_crashed');
      expect(err.details.exitCode).toBe(7);
      expect(err.message).toContain('exited with code 7');
      expect(err.details.logTail).toContain('ECHO_EXIT_AT_START set: exiting with code 7');
      await nothingLeft();
    });

    it('an env over its memory limit: env_oom, exit 137', async () => {
      const err = (await rejection(sandbox.deploy({ envId: 'ct-oom', env: echoSpec(image, { environment: { ECHO_ALLOCATE_MB: '400' } }) }))) as SandboxError;
      expect(err.details.exitCode).toBe(137);
      if (h.oomMayBeUnseen && err.reason === 'env_crashed') {
        console.info(`[${name}] the engine did not see the OOM kill: ${err.message}`);
        expect(err.message).toMatch(/137: killed by SIGKILL, e\.g\. for reaching its memory limit/);
      } else {
        expect(err.reason).toBe('env_oom');
        expect(err.message).toContain('128 MB');
      }
      await nothingLeft();
    });

    it('diagnoses an env that crashed after deploy: not running, its exit code and last log lines', async () => {
      const h1 = await sandbox.deploy({ envId: 'ct-diag', env: echoSpec(image) });
      await post(h1.baseUrl, '/reset', { task_id: 'fx-echo-0', data: {} });
      await expect(post(h1.baseUrl, '/tools/call', { name: 'crash', arguments: { code: 5 } })).rejects.toThrow();
      await waitFor(async () => !(await sandbox.diagnose(h1)).running, 10_000, 'the crash seen');
      const d = await sandbox.diagnose(h1);
      expect(d).toMatchObject({ running: false, exitCode: 5, oomKilled: false });
      expect(d.logTail).toMatch(/crash requested: exiting with code 5$/);
      // an exited env still has its resources until its teardown
      expect(await sandbox.listEnvIds()).toContain('ct-diag');
      await sandbox.teardown('ct-diag');
      await nothingLeft();
    });

    describe('abort', () => {
      it('rejects at once, creating nothing, when the signal is already aborted', async () => {
        const err = await rejection(sandbox.deploy({ envId: 'ct-abort0', env: echoSpec(image), signal: AbortSignal.abort() }));
        expect(err.name).toBe('AbortError');
        await nothingLeft();
      });

      it('stops a deploy waiting for readiness and removes what it created', async () => {
        const ac = new AbortController();
        const p = rejection(
          sandbox.deploy({ envId: 'ct-abort1', env: echoSpec(image, { environment: { ECHO_READY_AFTER_MS: '600000' } }), signal: ac.signal }),
        );
        await waitFor(() => h.started(sandbox, 'ct-abort1'), 30_000, 'the env started');
        ac.abort();
        expect((await p).name).toBe('AbortError');
        await nothingLeft();
      });

      it('leaves nothing whatever step the abort lands in', async () => {
        const outcomes = await Promise.all(
          [0, 2, 5, 10, 20, 40, 80, 150, 250, 400].map(async (delay, i) => {
            const ac = new AbortController();
            const p = sandbox.deploy({ envId: `ct-abort-at-${i}`, env: echoSpec(image), signal: ac.signal });
            setTimeout(() => ac.abort(), delay);
            try {
              await p;
              await sandbox.teardown(`ct-abort-at-${i}`);
              return 'ready first';
            } catch (err) {
              expect((err as Error).name).toBe('AbortError');
              return 'aborted';
            }
          }),
        );
        expect(outcomes).toContain('aborted');
        await nothingLeft();
      });

      it('is what a teardown during the deploy does', async () => {
        const p = rejection(sandbox.deploy({ envId: 'ct-torn', env: echoSpec(image, { environment: { ECHO_READY_AFTER_MS: '600000' } }) }));
        await waitFor(() => h.started(sandbox, 'ct-torn'), 30_000, 'the env started');
        await sandbox.teardown('ct-torn');
        expect((await p).name).toBe('AbortError');
        await nothingLeft();
      });
    });

    describe('teardown', () => {
      it('is idempotent and shares one removal between concurrent calls, each caller told once', async () => {
        await sandbox.deploy({ envId: 'ct-td', env: echoSpec(image) });
        const told: string[] = [];
        const a = sandbox.teardown('ct-td', { onEnvRemoved: () => told.push('a') });
        const b = sandbox.teardown('ct-td', { onEnvRemoved: () => told.push('b') });
        await Promise.all([a, b, sandbox.teardown('ct-td')]);
        expect(told.sort()).toEqual(['a', 'b']);
        await sandbox.teardown('ct-td');
        let nothing = 0;
        await sandbox.teardown('ct-never-deployed', { onEnvRemoved: () => nothing++ });
        expect(nothing).toBe(1);
        await nothingLeft();
      });

      it('lets the id be deployed again afterwards, and not before', async () => {
        await sandbox.deploy({ envId: 'ct-again', env: echoSpec(image) });
        await expect(sandbox.deploy({ envId: 'ct-again', env: echoSpec(image) })).rejects.toThrow(/already has an env/);
        await sandbox.teardown('ct-again');
        const h1 = await sandbox.deploy({ envId: 'ct-again', env: echoSpec(image) });
        expect((await fetch(`${h1.baseUrl}/health`)).status).toBe(200);
        await sandbox.teardown('ct-again');
        await nothingLeft();
      });
    });

    it('close() stops the deploys in flight, which remove what they created; later calls are refused', async () => {
      const closing = h.make();
      const img = await h.image(closing);
      const p = rejection(closing.deploy({ envId: 'ct-close', env: echoSpec(img, { environment: { ECHO_READY_AFTER_MS: '600000' } }) }));
      await waitFor(() => h.started(closing, 'ct-close'), 30_000, 'the env started');
      await closing.close();
      expect((await p).name).toBe('AbortError');
      await settled(settleMs, 'nothing left', () => h.nothingLeft(closing));
      await expect(closing.ping()).rejects.toThrow(/closed/);
      await expect(closing.deploy({ envId: 'ct-late', env: echoSpec(img) })).rejects.toMatchObject({ reason: 'engine_error' });
    });
  });
}
