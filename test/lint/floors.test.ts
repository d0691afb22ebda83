// The lint's floors rule (eslint.config.js, floors/no-upward-imports): a file imports only from its
// own floor and the floors below, and nothing outside src/sandbox/ imports src/sandbox/engine/.
// Fixtures are linted through ESLint's own API, at paths of the repository.
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { ESLint, Linter } from 'eslint';
import { describe, expect, it } from 'vitest';

const ROOT = path.resolve(import.meta.dirname, '../..');
// the config is plain JavaScript, outside the typed project: imported by its URL, typed here
const { floorsPlugin } = (await import(pathToFileURL(path.join(ROOT, 'eslint.config.js')).href)) as { floorsPlugin: ESLint.Plugin };

function lint(file: string, text: string): string[] {
  const linter = new Linter({ configType: 'flat' });
  const config = [{ files: ['**/*.js'], plugins: { floors: floorsPlugin }, rules: { 'floors/no-upward-imports': 'error' as const } }];
  return linter.verify(text, config, { filename: path.join(ROOT, file) }).map((m) => m.message);
}

describe('floors/no-upward-imports', () => {
  it('lets a room import its own floor and the floors below', () => {
    expect(lint('src/episodes/fixture.js', "import { x } from '../sandbox/sandbox.js';\nimport { y } from '../util/json.js';\n")).toEqual([]);
  });

  it('reports an import of a floor above', () => {
    expect(lint('src/sandbox/fixture.js', "import { x } from '../episodes/episode.js';\n")).toEqual([
      'src/sandbox imports src/episodes, a floor above it (src/episodes/episode.js): move what it needs down, to the floor of whoever uses it',
    ]);
  });

  it('reports a file on no floor', () => {
    expect(lint('src/nowhere-room.js', '')).toEqual(['src/nowhere-room.js is on no floor: add its room to FLOORS in eslint.config.js']);
  });

  it('keeps src/sandbox/engine/ to the sandbox: the rest of src/ goes through the Docker backend door', () => {
    expect(lint('src/authoring/fixture.js', "import { imageExists } from '../sandbox/engine/image-build.js';\n")).toEqual([
      "src/authoring/fixture.js imports src/sandbox/engine/image-build.js: outside src/sandbox/ use the Sandbox interface or the Docker backend's door (src/sandbox/docker/index.ts)",
    ]);
    expect(lint('src/authoring/fixture.js', "export { imageExists } from '../sandbox/engine/image-build.js';\n")).toHaveLength(1);
    expect(lint('src/authoring/fixture.js', "import { imageExists } from '../sandbox/docker/index.js';\n")).toEqual([]);
    expect(lint('src/sandbox/docker/fixture.js', "import { imageExists } from '../engine/image-build.js';\n")).toEqual([]);
    // tests may reach in: they test the engine machinery itself
    expect(lint('test/fixture.js', "import { imageExists } from '../src/sandbox/engine/image-build.js';\n")).toEqual([]);
  });

  it('is on for every file of src/ in the repository config', async () => {
    const eslint = new ESLint({ cwd: ROOT });
    for (const file of ['src/authoring/prebuild.ts', 'src/tools/shell/index.ts', 'src/sandbox/lockdown.ts']) {
      const config = await eslint.calculateConfigForFile(path.join(ROOT, file));
      expect(config.rules['floors/no-upward-imports'], file).toEqual([2]);
    }
  });
});
