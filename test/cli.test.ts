/** serve.ts's options: one schema for flags and environment; bad values exit 2 with what is wrong. */
import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { OPTION_NAMES, kebab } from '../src/config.js';
import { SUBNET_POOL } from '../src/defaults.js';
import { helpText, parseCli } from '../src/serve.js';
import { SERVE_JS } from './support/serve-process.js';
import { FIXTURE_BUNDLE } from './support/app.js';

describe('serve.ts options', () => {
  it('has the documented defaults', () => {
    const cli = parseCli(['b'], {});
    if (cli === 'help') throw new Error('unexpected');
    expect(cli.bundlePath).toBe('b');
    expect(cli.options).toMatchObject({
      host: '127.0.0.1',
      port: 8200,
      maxConcurrentEnvs: 8,
      resetTimeout: 600,
      toolTimeout: 60,
      idleTimeout: 1800,
      maxSteps: 64,
      tokenEnv: 'AGENTENV_TOKEN',
      shutdownTimeout: 30,
      instance: 'default',
      buildArg: [],
      maxWaiting: 1024,
      episodeTimeout: 3600,
      pingInterval: 20,
      subnetPool: '10.213.0.0/16',
    });
  });

  it('reads flags, environment variables, and lets a flag win', () => {
    const cli = parseCli(['b', '--max-concurrent-envs', '16', '--build-arg', 'A=1', '--build-arg', 'B=x=y', '--reward', 'min'], {
      OPENENV_MAX_CONCURRENT_ENVS: '4',
      OPENENV_RESET_TIMEOUT: '30',
      LOG_LEVEL: 'debug',
    });
    if (cli === 'help') throw new Error('unexpected');
    expect(cli.options).toMatchObject({ maxConcurrentEnvs: 16, resetTimeout: 30, buildArg: ['A=1', 'B=x=y'], reward: 'min', logLevel: 'debug' });
  });

  it('refuses bad values and contradictions with a message naming the option', () => {
    expect(() => parseCli(['b', '--port', 'abc'], {})).toThrow(/--port/);
    expect(() => parseCli(['b', '--max-concurrent-envs', '0'], {})).toThrow(/--max-concurrent-envs/);
    expect(() => parseCli(['b', '--build-arg', 'novalue'], {})).toThrow(/KEY=VALUE/);
    expect(() => parseCli(['b', '--idle-timeout', '5', '--tool-timeout', '60'], {})).toThrow(/idle timeout \(5 s\) is shorter than the tool timeout \(60 s\)/);
    expect(() => parseCli(['b', '--subnet-pool', '10.0.0.1/16'], {})).toThrow(/--subnet-pool/);
    expect(() => parseCli(['b', '--frobnicate', '1'], {})).toThrow(/frobnicate/);
    expect(() => parseCli([], {})).toThrow(/missing the bundle/);
  });

  it('--help lists every option with its default', () => {
    const text = helpText();
    for (const name of OPTION_NAMES) expect(text).toContain(`--${kebab(name)}`);
    expect(text).toMatch(/--max-concurrent-envs <value>[\s\S]*default: 8/);
    // a default behind a refinement is shown too, the real one (defaults.ts)
    expect(text).toMatch(new RegExp(`--subnet-pool <value>.*\\n\\s+default: ${SUBNET_POOL.replace(/\./g, '\\.')};`));
    expect(text).not.toMatch(/--subnet-pool <value>.*\n\s+default: none/);
    const run = spawnSync(process.execPath, [SERVE_JS, '--help'], { encoding: 'utf8' });
    expect(run.status).toBe(0);
    expect(run.stdout).toContain('--reset-timeout');
  });

  it('the process exits 2 on a bad value, saying what is wrong', () => {
    const run = spawnSync(process.execPath, [SERVE_JS, FIXTURE_BUNDLE, '--reset-timeout=-3'], { encoding: 'utf8' });
    expect(run.status).toBe(2);
    expect(run.stderr).toMatch(/--reset-timeout: Number must be greater than 0/);
  });

  it('refuses a non-loopback host without a token unless --insecure-no-token', () => {
    const run = spawnSync(process.execPath, [SERVE_JS, FIXTURE_BUNDLE, '--host', '0.0.0.0'], { encoding: 'utf8', env: { ...process.env, AGENTENV_TOKEN: '' } });
    expect(run.status).toBe(2);
    expect(run.stderr).toMatch(/without a token/);
  });

  it('an invalid bundle stops the process at start with file, line and field', async () => {
    const { mkdtempSync, cpSync, appendFileSync, rmSync } = await import('node:fs');
    const { join } = await import('node:path');
    const { tmpdir } = await import('node:os');
    const dir = mkdtempSync(join(tmpdir(), 'badbundle-'));
    try {
      cpSync(FIXTURE_BUNDLE, dir, { recursive: true });
      appendFileSync(join(dir, 'tasks/eval.jsonl'), JSON.stringify({ task_id: 'x', toolset: 'echo', system_prompt: 's', turns: [] }) + '\n');
      const run = spawnSync(process.execPath, [SERVE_JS, dir, '--port', '0'], { encoding: 'utf8' });
      expect(run.status).toBe(1);
      expect(run.stderr).toMatch(/tasks\/eval\.jsonl line 3, field "turns"/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
