/**
 * The warm pool's options as the built server takes them: --warm-pool-group's values (a whole
 * number, or auto; a bad one exits 2 saying what is wrong), and --warm-pool with the model
 * gateway (taken with --model-url; refused with only --model-from-reset, saying why).
 */
import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { OptionsSchema } from '../../src/config.js';
import { SERVE_JS } from '../support/serve-process.js';
import { FIXTURE_BUNDLE } from '../support/app.js';

const parse = (o: Record<string, unknown>) => OptionsSchema.safeParse({ maxConcurrentEnvs: 4, ...o });

describe('--warm-pool-group', () => {
  it('takes a whole number or auto, 1 (off) by default', () => {
    expect(parse({}).data?.warmPoolGroup).toBe(1);
    expect(parse({ warmPool: 2, warmPoolGroup: '8' }).data?.warmPoolGroup).toBe(8);
    expect(parse({ warmPool: 2, warmPoolGroup: 'auto' }).data?.warmPoolGroup).toBe('auto');
    expect(parse({ warmPoolGroup: '0' }).success).toBe(false);
    expect(parse({ warmPoolGroup: 'some' }).success).toBe(false);
  });

  it('the built server exits 2 on a bad value, saying what it takes', () => {
    const run = spawnSync(process.execPath, [SERVE_JS, FIXTURE_BUNDLE, '--warm-pool', '2', '--warm-pool-group', 'many'], { encoding: 'utf8' });
    expect(run.status).toBe(2);
    expect(run.stderr).toMatch(/^error: --warm-pool-group: a whole number of resets \(1 or more\), or auto/);
  });
});

describe('--warm-pool with the model gateway', () => {
  it('goes with --model-url; with only --model-from-reset it is refused, saying a pooled env opens its door with the server upstream', () => {
    expect(parse({ warmPool: 2, modelUrl: 'http://127.0.0.1:9/v1' }).success).toBe(true);
    expect(parse({ warmPool: 2, modelUrl: 'http://127.0.0.1:9/v1', modelFromReset: true }).success).toBe(true);
    const r = parse({ warmPool: 2, modelFromReset: true });
    expect(r.success).toBe(false);
    expect(r.error!.issues.map((i) => [i.path.join('.'), i.message])).toEqual([
      ['warmPool', expect.stringMatching(/open their model doors at their deploy, with the server's upstream: give --model-url/)],
    ]);
  });
});
