/**
 * A bundle never reaches out of itself through a link or blocks on a FIFO (the reward-integrity
 * issue's hostile task folders, as a bundle carries them): the loader refuses a verifier's tests
 * folder or a turn's upload that resolves outside the bundle; what copies them into a container
 * (verifier/pack.ts) refuses a link or a FIFO inside them by name, never following or opening
 * it; `pack` refuses a FIFO as it refuses a link.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadBundle } from '../../src/bundle/index.js';
import { packBundle } from '../../src/authoring/pack.js';
import { packFolder } from '../../src/container/index.js';
import { baseManifest, bundleError, removeTempDirs, row, tempDir, writeBundle } from './helpers.js';

afterAll(removeTempDirs);

/** a shell env task verified by verifiers/a, its second turn uploading uploads/b */
function verifiedBundle(): string {
  return writeBundle({
    manifest: {
      ...baseManifest(),
      envs: { box: { kind: 'shell', image: 'openenv-local/debian:bookworm' } },
      toolsets: { ts: { env: 'box', builtin: ['shell'] } },
      scores: { reward: { min: 0, max: 1 } },
    },
    tasks: {
      'tasks/train.jsonl': [
        row('t-0', {
          turns: ['One.', 'Two.'],
          per_turn: [{ verifier: { tests: 'verifiers/a' } }, { verifier: { tests: 'verifiers/a' }, upload: 'uploads/b' }],
        }),
      ],
    },
    files: { 'verifiers/a/test.sh': 'echo 1 > /logs/verifier/reward.txt\n', 'uploads/b/config.txt': 'x\n' },
  });
}

/** a folder outside the bundle holding what a verifier folder would */
function outsideFolder(): string {
  const dir = tempDir('bundle-outside-');
  writeFileSync(path.join(dir, 'test.sh'), 'echo the host secret\n');
  return dir;
}

describe('links and FIFOs in a bundle', () => {
  it("the loader refuses a verifier's tests folder or an upload that is a link leaving the bundle", async () => {
    for (const rel of ['verifiers/a', 'uploads/b']) {
      const dir = verifiedBundle();
      rmSync(path.join(dir, rel), { recursive: true });
      symlinkSync(outsideFolder(), path.join(dir, rel));
      const message = (await bundleError(loadBundle(dir))).message;
      expect(message, rel).toMatch(
        new RegExp(
          `field "per_turn\\[\\d\\]\\.${rel.startsWith('v') ? 'verifier\\.tests' : 'upload'}": expected a folder of the bundle.*"${rel}" resolves outside the bundle folder`,
        ),
      );
    }
  });

  it("copying a verifier's tests or an upload into a container refuses a link or a FIFO there by name, never following or opening it", async () => {
    const dir = tempDir();
    writeFileSync(path.join(dir, 'test.sh'), 'true\n');
    symlinkSync('/etc/hostname', path.join(dir, 'leak'));
    await expect(packFolder(dir, '')).rejects.toThrow(
      `${path.join(dir, 'leak')} is neither a file nor a folder (symbolic links are not copied into a container)`,
    );
    const piped = tempDir();
    mkdirSync(path.join(piped, 'sub'));
    execFileSync('mkfifo', [path.join(piped, 'sub/pipe')]);
    await expect(packFolder(piped, '')).rejects.toThrow(`${path.join(piped, 'sub/pipe')} is neither a file nor a folder`);
  });

  it('pack refuses a FIFO in the bundle by name, at once', async () => {
    const dir = writeBundle({ tasks: { 'tasks/train.jsonl': [row('t-0')] } });
    execFileSync('mkfifo', [path.join(dir, 'tasks/pipe')]);
    await expect(packBundle(dir, tempDir())).rejects.toThrow('tasks/pipe is neither a file nor a folder; list it in .bundleignore');
  });
});
