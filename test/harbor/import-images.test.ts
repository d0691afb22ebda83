/**
 * `import harbor` and a task's image, without Docker: a task naming both [environment]
 * docker_image and environment/Dockerfile gets the one --images chooses (auto: the image when the
 * engine has it, else the Dockerfile built), said in one note per choice, and no --base-image
 * rule is ever suggested for a task's own image; a compose file changing only `main` is taken
 * (its environment, working_dir and healthcheck mapped), anything else refused by name; and the
 * bundle, packed, records no absolute path of this machine.
 */
import { execFileSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { importHarbor, parseBaseImageRule, readCompose, readTaskConfig, type ImportOptions } from '../../src/authoring/harbor/index.js';
import { packBundle } from '../../src/authoring/pack.js';

const FIXTURES = path.resolve(import.meta.dirname, '../fixtures/harbor-tasks');
const PREBUILT = path.join(FIXTURES, 'prebuilt-and-dockerfile');
const TASK_IMAGE = 'example.org/tb2/prebuilt-task:1.0';
const RULE = parseBaseImageRule('debian:bookworm=openenv-local/debian:bookworm');

const made: string[] = [];
afterAll(() => {
  for (const d of made) rmSync(d, { recursive: true, force: true });
});
function temp(): string {
  const d = mkdtempSync(path.join(os.tmpdir(), 'harbor-images-'));
  made.push(d);
  return d;
}

function opts(sources: string[], out: string, extra: Partial<ImportOptions> = {}): ImportOptions {
  return { sources, out, baseImages: [RULE], ignoreInternet: false, skipRefused: false, force: false, ...extra };
}

/** an engine that has exactly these images, recording what it was asked */
function engine(has: string[]) {
  const asked: string[] = [];
  return {
    asked,
    hasImages: async (refs: string[]) => {
      asked.push(...refs);
      return new Set(refs.filter((r) => has.includes(r)));
    },
  };
}

const manifestOf = (out: string) => JSON.parse(readFileSync(path.join(out, 'bundle.json'), 'utf8'));
const rowOf = (out: string) => JSON.parse(readFileSync(path.join(out, 'tasks/train.jsonl'), 'utf8').split('\n')[0]!);
const imageNote = (r: Awaited<ReturnType<typeof importHarbor>>) => r.notes.filter((n) => n.field === '[environment] docker_image');

describe('import harbor: docker_image and environment/Dockerfile', () => {
  it('auto, the engine has the task image: the env runs it, the Dockerfile is not built, and it says so', async () => {
    const root = temp();
    const e = engine([TASK_IMAGE]);
    const r = await importHarbor(opts([PREBUILT], path.join(root, 'out'), { hasImages: e.hasImages }));
    expect(r.written).toBe(true);
    expect(e.asked).toContain(TASK_IMAGE);
    expect(manifestOf(r.out).envs['prebuilt-and-dockerfile']).toMatchObject({ kind: 'shell', image: TASK_IMAGE });
    expect(manifestOf(r.out).envs['prebuilt-and-dockerfile'].build).toBeUndefined();
    expect(r.tasks[0]).toMatchObject({ id: 'prebuilt-and-dockerfile', image: 'docker_image' });
    expect(imageNote(r)).toEqual([
      {
        field: '[environment] docker_image',
        message: 'used: the engine has this image (--images auto); its environment/Dockerfile is not built',
        tasks: ['prebuilt-and-dockerfile'],
      },
    ]);
    expect(r.missingImages).toEqual([]);
  });

  it('auto, the engine lacks the task image: environment/Dockerfile is built (its FROM mapped), and it says so; no base rule for the task image', async () => {
    const root = temp();
    const r = await importHarbor(opts([PREBUILT], path.join(root, 'out'), { hasImages: engine([]).hasImages }));
    expect(r.written).toBe(true);
    const env = manifestOf(r.out).envs['prebuilt-and-dockerfile'];
    expect(env).toMatchObject({ kind: 'shell', build: 'envs/prebuilt-and-dockerfile', build_network: 'none' });
    expect(env.image).toBeUndefined();
    expect(readFileSync(path.join(r.out, 'envs/prebuilt-and-dockerfile/Dockerfile'), 'utf8')).toMatch(/^FROM openenv-local\/debian:bookworm$/m);
    expect(readFileSync(path.join(r.out, 'envs/prebuilt-and-dockerfile/ledger.csv'), 'utf8')).toContain('emil,1000');
    expect(r.tasks[0]).toMatchObject({ image: 'Dockerfile' });
    expect(imageNote(r).map((n) => n.message)).toEqual([
      'the engine does not have this image: environment/Dockerfile is built instead (--images auto; --images prebuilt has the engine pull it at serve time)',
    ]);
    // the images the build needs: the mapped FROM, never the task's own image
    expect(r.missingImages).toEqual([{ image: 'openenv-local/debian:bookworm', kind: 'base', tasks: ['prebuilt-and-dockerfile'] }]);
  });

  it('auto with no engine answering: the Dockerfile is built, saying the image was not checked; the engine is asked once for all tasks', async () => {
    const root = temp();
    const ds = path.join(root, 'ds');
    cpSync(PREBUILT, path.join(ds, 'a'), { recursive: true });
    cpSync(PREBUILT, path.join(ds, 'b'), { recursive: true });
    let calls = 0;
    const r = await importHarbor(opts([ds], path.join(root, 'out'), { hasImages: async () => (calls++, null) }));
    expect(calls).toBe(1);
    expect(r.missingImages).toBeNull();
    expect(imageNote(r)).toEqual([
      {
        field: '[environment] docker_image',
        message: 'not checked (no Docker engine answers): environment/Dockerfile is built instead (--images auto; --images prebuilt uses the image)',
        tasks: ['a', 'b'],
      },
    ]);
    expect(Object.values(manifestOf(r.out).envs).every((e: any) => e.build !== undefined)).toBe(true);
  });

  it('--images prebuilt: the image even when the engine lacks it (named as the task image, pulled at serve time); --images dockerfile: the build even when it has it', async () => {
    const root = temp();
    const pre = await importHarbor(opts([PREBUILT], path.join(root, 'pre'), { images: 'prebuilt', hasImages: engine([]).hasImages }));
    expect(manifestOf(pre.out).envs['prebuilt-and-dockerfile']).toMatchObject({ image: TASK_IMAGE });
    expect(imageNote(pre).map((n) => n.message)).toEqual(['used (--images prebuilt); its environment/Dockerfile is not built']);
    expect(pre.missingImages).toEqual([{ image: TASK_IMAGE, kind: 'task', tasks: ['prebuilt-and-dockerfile'] }]);

    const e = engine([TASK_IMAGE]);
    const built = await importHarbor(opts([PREBUILT], path.join(root, 'built'), { images: 'dockerfile', hasImages: e.hasImages }));
    expect(manifestOf(built.out).envs['prebuilt-and-dockerfile']).toMatchObject({ build: 'envs/prebuilt-and-dockerfile' });
    expect(imageNote(built).map((n) => n.message)).toEqual(['not used: environment/Dockerfile is built instead (--images dockerfile)']);
    expect(e.asked).not.toContain(TASK_IMAGE);
  });

  it('one note per choice, grouping the tasks; a docker_image without a Dockerfile is used whatever --images says', async () => {
    const root = temp();
    const ds = path.join(root, 'ds');
    cpSync(PREBUILT, path.join(ds, 'has-image'), { recursive: true });
    cpSync(PREBUILT, path.join(ds, 'has-image-too'), { recursive: true });
    cpSync(PREBUILT, path.join(ds, 'lacks-image'), { recursive: true });
    const toml = readFileSync(path.join(PREBUILT, 'task.toml'), 'utf8');
    writeFileSync(path.join(ds, 'lacks-image/task.toml'), toml.replace(TASK_IMAGE, 'example.org/tb2/other:1.0'));
    cpSync(PREBUILT, path.join(ds, 'image-only'), { recursive: true });
    rmSync(path.join(ds, 'image-only/environment/Dockerfile'));
    writeFileSync(path.join(ds, 'image-only/task.toml'), toml.replace(TASK_IMAGE, 'example.org/tb2/image-only:1.0'));
    for (const images of ['auto', 'dockerfile'] as const) {
      const r = await importHarbor(opts([ds], path.join(root, images), { images, hasImages: engine([TASK_IMAGE]).hasImages }));
      const notes = Object.fromEntries(imageNote(r).map((n) => [n.message, n.tasks]));
      expect(notes['used: the task has no environment/Dockerfile']).toEqual(['image-only']);
      if (images === 'auto') {
        expect(notes['used: the engine has this image (--images auto); its environment/Dockerfile is not built']).toEqual(['has-image', 'has-image-too']);
        expect(Object.entries(notes).find(([m]) => m.startsWith('the engine does not have this image'))?.[1]).toEqual(['lacks-image']);
      }
      // the task image the engine lacks is named as the task's, never offered a base rule
      expect(r.missingImages).toContainEqual({ image: 'example.org/tb2/image-only:1.0', kind: 'task', tasks: ['image-only'] });
      expect(r.missingImages!.filter((m) => m.kind === 'base').map((m) => m.image)).toEqual(['openenv-local/debian:bookworm']);
    }
  });

  it('the CLI never suggests a --base-image rule for a task image (with no engine: says it built the Dockerfile)', () => {
    const root = temp();
    const cli = path.resolve(import.meta.dirname, '../../dist/cli/openenv-bundle.js');
    const out = execFileSync(
      process.execPath,
      [cli, 'import', 'harbor', PREBUILT, '--out', path.join(root, 'out'), '--base-image', 'debian:bookworm=openenv-local/debian:bookworm'],
      { encoding: 'utf8', env: { ...process.env, DOCKER_HOST: `unix://${path.join(root, 'no-engine.sock')}` } },
    );
    expect(out).toContain('[environment] docker_image: not checked (no Docker engine answers): environment/Dockerfile is built instead');
    expect(out).not.toContain(`--base-image ${TASK_IMAGE}`);
    const bad = (() => {
      try {
        execFileSync(process.execPath, [cli, 'import', 'harbor', PREBUILT, '--out', path.join(root, 'bad'), '--images', 'pull'], {
          encoding: 'utf8',
          stdio: 'pipe',
        });
        return null;
      } catch (e) {
        return e as { status: number; stderr: string };
      }
    })();
    expect(bad?.status).toBe(2);
    expect(bad?.stderr).toMatch(/--images.*auto, prebuilt, dockerfile/);
  });
});

describe('import harbor: compose files', () => {
  it('a file changing only main: taken, its environment, working_dir and healthcheck mapped, network_mode none kept', async () => {
    const root = temp();
    const r = await importHarbor(opts([path.join(FIXTURES, 'compose-main-only')], path.join(root, 'out')));
    expect(r.refused).toEqual([]);
    expect(r.written).toBe(true);
    const env = manifestOf(r.out).envs['compose-main-only'];
    expect(env).toMatchObject({ kind: 'shell', build: 'envs/compose-main-only', workdir: '/app', environment: { GREETING_NAME: 'pelican' } });
    expect(rowOf(r.out).per_turn).toEqual([{ ready_check: { command: 'test -f /app/README.txt', interval_s: 1, timeout_s: 5, retries: 5 } }]);
    expect(r.notes).toContainEqual({
      field: 'environment/docker-compose.yaml services.main.network_mode',
      message: 'none: kept (every env here has no network)',
      tasks: ['compose-main-only'],
    });
  });

  it("task.toml's settings win over the compose file's", async () => {
    const root = temp();
    const src = path.join(root, 'src');
    cpSync(path.join(FIXTURES, 'compose-main-only'), src, { recursive: true });
    const toml = readFileSync(path.join(src, 'task.toml'), 'utf8');
    writeFileSync(path.join(src, 'task.toml'), `${toml}workdir = "/srv"\n[environment.env]\nGREETING_NAME = "heron"\n`);
    const r = await importHarbor(opts([src], path.join(root, 'out')));
    expect(manifestOf(r.out).envs.src).toMatchObject({ workdir: '/srv', environment: { GREETING_NAME: 'heron' } });
  });

  it('a sidecar service: the env gets it as a sidecar (its folder of environment/ copied, its Dockerfile mapped), main depending on it healthy', async () => {
    const root = temp();
    const r = await importHarbor(
      opts([path.join(FIXTURES, 'compose-sidecar')], path.join(root, 'out'), { baseImages: [RULE, parseBaseImageRule('python:3=openenv-local/python:3')] }),
    );
    expect(r.refused).toEqual([]);
    expect(r.written).toBe(true);
    const env = manifestOf(r.out).envs['compose-sidecar'];
    expect(env.environment).toEqual({ GREETING_NAME: 'pelican', KV_HOST: 'db', KV_PORT: '7000' });
    expect(env.sidecars).toEqual({
      db: {
        build: 'sidecars/compose-sidecar/db',
        build_network: 'none',
        environment: { KV_PORT: '7000' },
        healthcheck: { command: ['python3', '/kv.py', 'check'], interval_s: 1, timeout_s: 5, retries: 30 },
      },
    });
    expect(readFileSync(path.join(r.out, 'sidecars/compose-sidecar/db/Dockerfile'), 'utf8')).toMatch(/^FROM openenv-local\/python:3$/m);
    expect(readFileSync(path.join(r.out, 'sidecars/compose-sidecar/db/kv.py'), 'utf8')).toContain('socketserver');
    expect(r.notes).toContainEqual({
      field: 'environment/db/Dockerfile',
      message: 'python:3 mapped to openenv-local/python:3 (--base-image)',
      tasks: ['compose-sidecar'],
    });
  });

  it('a sidecar from an image: mapped by the rules; its healthcheck as a shell command; its resources dropped, noted', () => {
    const r = readCompose(
      [
        'services:',
        '  main:',
        '    depends_on: [cache]',
        '  cache:',
        '    image: redis:7',
        '    mem_limit: 1g',
        '    restart: always',
        '    healthcheck: { test: "redis-cli ping", interval: 2s }',
      ].join('\n'),
      'environment/docker-compose.yaml',
    );
    expect(r.refusals).toEqual([]);
    expect(r.sidecars).toEqual([
      { name: 'cache', image: 'redis:7', environment: {}, healthcheck: { command: 'redis-cli ping', intervalS: 2, timeoutS: 30, retries: 3 } },
    ]);
    expect(r.notes.map((n) => n.field)).toEqual([
      'environment/docker-compose.yaml services.cache.mem_limit',
      'environment/docker-compose.yaml services.cache.restart',
    ]);
  });

  const sidecarRefusals: [string, string, RegExp][] = [
    ['ports', 'services:\n  db:\n    image: x\n    ports: ["5432:5432"]\n', /services\.db\.ports: publishes ports on the host/],
    ['a host volume', 'services:\n  db:\n    image: x\n    volumes: ["/srv:/data"]\n', /services\.db\.volumes: mounts volumes/],
    ['privileged', 'services:\n  db:\n    image: x\n    privileged: true\n', /services\.db\.privileged: a privileged container/],
    ['cap_add', 'services:\n  db:\n    image: x\n    cap_add: [NET_ADMIN]\n', /services\.db\.cap_add: adds capabilities/],
    [
      'network_mode host',
      'services:\n  db:\n    image: x\n    network_mode: host\n',
      /services\.db\.network_mode: "host": a sidecar here is on the episode's own network/,
    ],
    [
      'a command',
      'services:\n  db:\n    image: x\n    command: ["serve"]\n',
      /services\.db\.command: replaces the image's command: not supported for a sidecar yet/,
    ],
    [
      'a build outside environment/',
      'services:\n  db:\n    build: ../db\n',
      /services\.db\.build: builds "\.\.\/db": a sidecar builds a folder of environment\/ here/,
    ],
    ['neither build nor image', 'services:\n  db:\n    environment: { A: "1" }\n', /services\.db: neither build nor image/],
    ['a name that is no host name', 'services:\n  My_DB:\n    image: x\n', /services\.My_DB: a service beside main becomes a sidecar reached by its name/],
    [
      'a one-shot dependency',
      'services:\n  main:\n    depends_on: { init: { condition: service_completed_successfully } }\n  init:\n    image: x\n',
      /services\.main\.depends_on\.init\.condition: "service_completed_successfully": a sidecar here runs for the whole episode/,
    ],
    ['a dependency on no service', 'services:\n  main:\n    depends_on: [db]\n', /services\.main\.depends_on\.db: names no service of this file/],
  ];
  it.each(sidecarRefusals)('refuses a sidecar with %s by name', (_what, text, expected) => {
    const r = readCompose(text, 'environment/docker-compose.yaml');
    expect(r.refusals.map((f) => `${f.field}: ${f.message}`).join('\n')).toMatch(expected);
  });

  const refusals: [string, string, RegExp][] = [
    ['ports', 'services:\n  main:\n    ports: ["8080:80"]\n', /services\.main\.ports: publishes ports on the host/],
    ['a host volume', 'services:\n  main:\n    volumes: ["/var/run/docker.sock:/var/run/docker.sock"]\n', /services\.main\.volumes: mounts volumes/],
    ['privileged', 'services:\n  main:\n    privileged: true\n', /services\.main\.privileged: a privileged container/],
    ['cap_add', 'services:\n  main:\n    cap_add: [NET_ADMIN]\n', /services\.main\.cap_add: adds capabilities/],
    ['network_mode host', 'services:\n  main:\n    network_mode: host\n', /services\.main\.network_mode: "host": envs here have no network; only "none"/],
    ['network_mode bridge', 'services:\n  main:\n    network_mode: bridge\n', /services\.main\.network_mode: "bridge"/],
    [
      'a network that is not internal',
      'services:\n  main:\n    networks: [outside]\nnetworks:\n  outside: {}\n',
      /services\.main\.networks: outside: a network that is not internal/,
    ],
    ['another build context', 'services:\n  main:\n    build: ../other\n', /services\.main\.build: builds "\.\.\/other"\/Dockerfile/],
    ['build args', 'services:\n  main:\n    build:\n      context: .\n      args: { A: "1" }\n', /services\.main\.build: builds with args/],
    ['another image', 'services:\n  main:\n    image: ubuntu:24.04\n', /services\.main\.image: "ubuntu:24\.04"/],
    [
      'a host variable',
      'services:\n  main:\n    environment:\n      TOKEN: ${TOKEN}\n',
      /services\.main\.environment\.TOKEN: its value "\$\{TOKEN\}" reads a variable of the host/,
    ],
    ['a value from the host', 'services:\n  main:\n    environment: [TOKEN]\n', /services\.main\.environment\.TOKEN: takes its value from the host/],
    ['top-level volumes', 'services:\n  main: {}\nvolumes:\n  data: {}\n', /docker-compose\.yaml volumes: named volumes/],
    ['an unknown key', 'services:\n  main:\n    storage_opt: { size: 1G }\n', /services\.main\.storage_opt: not supported/],
    ['not YAML', 'services: [\n', /docker-compose\.yaml: not valid YAML/],
  ];
  it.each(refusals)('refuses %s by name', (_what, text, expected) => {
    const r = readCompose(text, 'environment/docker-compose.yaml');
    expect(r.refusals.map((f) => `${f.field}: ${f.message}`).join('\n')).toMatch(expected);
  });

  it('takes internal networks, Harbor’s own variables, compose healthcheck forms and drops what changes nothing, noted', () => {
    const r = readCompose(
      [
        'services:',
        '  main:',
        '    image: ${MAIN_IMAGE_NAME}',
        '    build: { context: "${CONTEXT_DIR}" }',
        '    networks: [inner]',
        '    environment: ["A=1", "B=x=y"]',
        '    hostname: box',
        '    mem_limit: 2g',
        '    healthcheck: { test: ["CMD", "test", "-f", "/a b"], interval: 1m30s, timeout: 500ms, retries: 2, start_period: 3s }',
        'networks:',
        '  inner: { internal: true }',
      ].join('\n'),
      'environment/compose.yaml',
    );
    expect(r.refusals).toEqual([]);
    expect(r.main).toEqual({
      environment: { A: '1', B: 'x=y' },
      healthcheck: { command: "test -f '/a b'", intervalS: 90, timeoutS: 0.5, retries: 2, startPeriodS: 3 },
    });
    expect(r.notes.map((n) => n.field)).toEqual([
      'environment/compose.yaml services.main.networks',
      'environment/compose.yaml services.main.hostname',
      'environment/compose.yaml services.main.mem_limit',
    ]);
  });

  it('two compose files refuse the task, naming both', async () => {
    const root = temp();
    const src = path.join(root, 'two');
    cpSync(path.join(FIXTURES, 'compose-main-only'), src, { recursive: true });
    cpSync(path.join(src, 'environment/docker-compose.yaml'), path.join(src, 'environment/compose.yaml'));
    const r = await importHarbor(opts([src], path.join(root, 'out')));
    expect(r.refused[0]!.findings).toContainEqual({
      field: 'environment/docker-compose.yaml, environment/compose.yaml',
      message: 'two compose files: Harbor reads one; keep one',
    });
  });
});

describe('import harbor: a step of its own separate verifier', () => {
  it("is taken as the task's is, and its verifier environment of its own (another image) refused by name (the docs/harbor.md field table says so)", () => {
    const toml = [
      'schema_version = "1.1"',
      '[[steps]]',
      'name = "one"',
      '[steps.verifier]',
      'environment_mode = "separate"',
      '[steps.verifier.environment]',
      'docker_image = "v:1"',
    ].join('\n');
    const r = readTaskConfig(toml, { ignoreInternet: false });
    expect(r.refusals).toEqual([{ field: '[[steps]] 1 [steps.verifier] environment', message: expect.stringMatching(/^a verifier environment of its own/) }]);
    expect(r.config?.steps?.[0]?.verifierMode).toBe('separate');
  });
});

describe('import harbor: nothing of this machine in the bundle', () => {
  it("records the task's source as the dataset's name and the task's, and the packed archive holds no absolute path", async () => {
    const root = temp();
    const ds = path.join(root, 'my-dataset');
    mkdirSync(ds);
    cpSync(PREBUILT, path.join(ds, 'ledger-sum'), { recursive: true });
    cpSync(path.join(FIXTURES, 'compose-main-only'), path.join(ds, 'greet'), { recursive: true });
    const r = await importHarbor(opts([ds], path.join(root, 'out'), { hasImages: engine([]).hasImages }));
    const rows = readFileSync(path.join(r.out, 'tasks/train.jsonl'), 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(rows.map((row) => row.meta.harbor.source).sort()).toEqual(['my-dataset/greet', 'my-dataset/ledger-sum']);
    const one = await importHarbor(opts([path.join(ds, 'greet')], path.join(root, 'one')));
    expect(rowOf(one.out).meta.harbor.source).toBe('greet');

    const packed = await packBundle(r.out, path.join(root, 'packed'));
    const listing = execFileSync('tar', ['-xzOf', packed.file], { encoding: 'latin1', maxBuffer: 64 << 20 });
    for (const p of [root, process.cwd(), FIXTURES]) expect(listing.includes(p), `the archive holds ${p}`).toBe(false);
  });
});
