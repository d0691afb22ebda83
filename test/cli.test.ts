/** The server's options: one schema for flags and environment; bad values exit 2 with what is wrong. */
import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { layerDefaults, networkStockSize, OPTION_NAMES, kebab, OptionsSchema } from '../src/config.js';
import { ENV_LAYER_DEFAULTS, NETWORK_STOCK, SUBNET_POOL } from '../src/defaults.js';
import { serveCommand } from '../src/cli/serve.js';
import { SERVE_JS } from './support/serve-process.js';
import { FIXTURE_BUNDLE } from './support/app.js';

const parseCli = (argv: string[], env: NodeJS.ProcessEnv) => {
  const { bundlePath, ...options } = serveCommand.parse(argv, env);
  return { bundlePath, options };
};
const helpText = () => serveCommand.usage('node dist/serve.js');

describe('the server options', () => {
  it('has the documented defaults', () => {
    const cli = parseCli(['b'], {});
    expect(cli.bundlePath).toBe('b');
    expect(cli.options).toMatchObject({
      host: '127.0.0.1',
      port: 8200,
      maxConcurrentEnvs: 8,
      resetTimeout: 600,
      toolTimeout: 60,
      idleTimeout: 1800,
      tokenEnv: 'AGENTENV_TOKEN',
      shutdownTimeout: 30,
      instance: 'default',
      buildArg: [],
      maxWaiting: 1024,
      episodeTimeout: 3600,
      pingInterval: 20,
      subnetPool: '10.213.0.0/16',
    });
    // no --max-steps: each task's bound is derived from its time budget (maxStepsFor, src/defaults.ts)
    expect(cli.options.maxSteps).toBeUndefined();
  });

  it('reads flags, environment variables, and lets a flag win', () => {
    const cli = parseCli(['b', '--max-concurrent-envs', '16', '--build-arg', 'A=1', '--build-arg', 'B=x=y', '--reward', 'min'], {
      OPENENV_MAX_CONCURRENT_ENVS: '4',
      OPENENV_RESET_TIMEOUT: '30',
      LOG_LEVEL: 'debug',
    });
    expect(cli.options).toMatchObject({ maxConcurrentEnvs: 16, resetTimeout: 30, buildArg: ['A=1', 'B=x=y'], reward: 'min', logLevel: 'debug' });
  });

  it('refuses bad values and contradictions with a message naming the option', () => {
    expect(() => parseCli(['b', '--port', 'abc'], {})).toThrow(/--port/);
    expect(() => parseCli(['b', '--max-concurrent-envs', '0'], {})).toThrow(/--max-concurrent-envs/);
    expect(() => parseCli(['b', '--build-arg', 'novalue'], {})).toThrow(/KEY=VALUE/);
    expect(() => parseCli(['b', '--idle-timeout', '5', '--tool-timeout', '60'], {})).toThrow(/idle timeout \(5 s\) is shorter than the tool timeout \(60 s\)/);
    expect(() => parseCli(['b', '--subnet-pool', '10.0.0.1/16'], {})).toThrow(/--subnet-pool/);
    expect(() => parseCli(['b', '--frobnicate', '1'], {})).toThrow(/frobnicate/);
    expect(() => parseCli([], {})).toThrow(/missing BUNDLE/);
  });

  it("--e2b-model-door needs the server's own upstream; --e2b-model-door-host sends the harness's key, so not --model-key-env's", () => {
    expect(() => parseCli(['b', '--e2b-model-door'], {})).toThrow(/--e2b-model-door forwards .*give --model-url/);
    expect(() => parseCli(['b', '--e2b-model-door', '--model-from-reset'], {})).toThrow(/give --model-url/);
    expect(() => parseCli(['b', '--e2b-model-door-host', 'slime-head'], {})).toThrow(/--e2b-model-door-host forwards .*give --model-url/);
    expect(() => parseCli(['b', '--e2b-model-door-host', 'slime-head', '--model-url', 'http://h:1/v1', '--model-key-env', 'K'], {})).toThrow(
      /--model-key-env's key would replace it/,
    );
    expect(() => parseCli(['b', '--e2b-model-door-host', 'Not_A_Host', '--model-url', 'http://h:1/v1'], {})).toThrow(/--e2b-model-door-host/);
    expect(parseCli(['b', '--e2b-model-door-host', 'slime-head', '--model-url', 'http://h:1/v1'], {}).options).toMatchObject({
      e2bModelDoor: false,
      e2bModelDoorHost: 'slime-head',
    });
  });

  it('--default-storage-mb and --default-max-files: ENV_LAYER_DEFAULTS unless given, 0 or off for no bound, a bad value named', () => {
    expect(layerDefaults(parseCli(['b'], {}).options)).toEqual({ storageMb: ENV_LAYER_DEFAULTS.storageMb, maxFiles: ENV_LAYER_DEFAULTS.maxFiles });
    expect(layerDefaults(parseCli(['b', '--default-storage-mb', '512', '--default-max-files', 'off'], {}).options)).toEqual({ storageMb: 512, maxFiles: null });
    expect(layerDefaults(parseCli(['b'], { OPENENV_DEFAULT_STORAGE_MB: 'OFF', OPENENV_DEFAULT_MAX_FILES: '0' }).options)).toEqual({
      storageMb: null,
      maxFiles: null,
    });
    expect(() => parseCli(['b', '--default-storage-mb', '1.5'], {})).toThrow(/--default-storage-mb: expected a whole number, or off/);
    expect(() => parseCli(['b', '--default-max-files', '-1'], {})).toThrow(/--default-max-files/);
    const help = helpText();
    expect(help).toMatch(/--default-storage-mb MB\|off [^]*?\n\s+default: 2048; env: OPENENV_DEFAULT_STORAGE_MB\n/);
    expect(help.replace(/\s+/g, ' ')).toContain('past it the env is stopped and its episode ends storage_exceeded (0 or off: no bound');
  });

  it('--help lists every option with its default', () => {
    const text = helpText();
    for (const name of OPTION_NAMES) expect(text).toContain(`--${kebab(name)}`);
    expect(text).toMatch(/--max-concurrent-envs N .*\n\s+default: 8; env: OPENENV_MAX_CONCURRENT_ENVS\n/);
    // a default behind a refinement is shown too, the real one (defaults.ts)
    expect(text).toMatch(new RegExp(`--subnet-pool CIDR .*\\n\\s+default: ${SUBNET_POOL.replace(/\./g, '\\.')};`));
    expect(text).toMatch(/--log-level LEVEL .*\n\s+default: info; env: OPENENV_LOG_LEVEL, LOG_LEVEL\n/);
    const run = spawnSync(process.execPath, [SERVE_JS, '--help'], { encoding: 'utf8' });
    expect(run.status).toBe(0);
    expect(run.stdout).toContain('--reset-timeout');
  });

  it('the process exits 2 on a bad value, saying what is wrong', () => {
    const run = spawnSync(process.execPath, [SERVE_JS, FIXTURE_BUNDLE, '--reset-timeout=-3'], { encoding: 'utf8' });
    expect(run.status).toBe(2);
    expect(run.stderr).toMatch(/^error: --reset-timeout: Number must be greater than 0\nRun 'node dist\/serve.js --help'/);
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

describe('the network stock the server keeps (--network-stock)', () => {
  const stock = (input: Record<string, unknown>) => networkStockSize(OptionsSchema.parse(input));

  it('defaults to --max-concurrent-envs, at most NETWORK_STOCK.defaultMax (64)', () => {
    expect(NETWORK_STOCK.defaultMax).toBe(64);
    expect(stock({})).toBe(8);
    expect(stock({ maxConcurrentEnvs: 40 })).toBe(40);
    expect(stock({ maxConcurrentEnvs: 64 })).toBe(64);
    expect(stock({ maxConcurrentEnvs: 256 })).toBe(64);
  });

  it('takes --network-stock as given (0: none), within what the subnet pool holds beside the cap', () => {
    expect(stock({ networkStock: 0, maxConcurrentEnvs: 32 })).toBe(0);
    expect(stock({ networkStock: 100, maxConcurrentEnvs: 8 })).toBe(100);
    // a /24 holds 16 /28 episode networks: 12 in use at most leaves 4 for the stock
    expect(stock({ subnetPool: '10.9.9.0/24', maxConcurrentEnvs: 12 })).toBe(4);
    expect(stock({ subnetPool: '10.9.9.0/24', maxConcurrentEnvs: 16 })).toBe(0);
    expect(stock({ subnetPool: '10.9.9.0/24', maxConcurrentEnvs: 4, networkStock: 50 })).toBe(12);
  });

  it("on swarm is not shrunk to --subnet-pool (overlays take the swarm's own subnets)", () => {
    expect(stock({ sandbox: 'swarm', subnetPool: '10.9.9.0/24', maxConcurrentEnvs: 16 })).toBe(16);
  });
});
