// ESLint (flat config) with typescript-eslint: the recommended rules everywhere, and the
// type-aware ones that catch async mistakes (a promise nobody awaits or catches) in the server.
import path from 'node:path';
import js from '@eslint/js';
import globals from 'globals';
import tseslint from 'typescript-eslint';

/**
 * The house's floors, top to bottom: a file may import from its own floor and the floors below,
 * never from one above (a lower room that needs an upper one's code is the wrong owner of it).
 * A room is a folder or a file; a file belongs to the longest room its path starts with.
 */
const FLOORS = [
  ['test', 'web'],
  ['scripts'],
  // the processes and the command line
  ['src/cli', 'src/serve.ts', 'src/rows.ts'],
  // what the commands run
  ['src/eval', 'src/rows', 'src/authoring'],
  // the bundle server's client (eval, play, rows, the scripts)
  ['src/client'],
  ['src/app.ts'],
  ['src/routes'],
  ['src/plugins'],
  ['src/runtime.ts'],
  // who holds an episode; the E2B sandboxes (episodes of another kind, held by their SDK clients)
  ['src/sessions', 'src/e2b'],
  // the console's observers of episodes
  ['src/console'],
  // the step machine
  ['src/episodes'],
  // where a slot is taken and freed
  ['src/episodes/capacity'],
  // the bundle format (its built-in toolsets and turn rules come from the rooms below)
  ['src/bundle'],
  // rooms an episode uses (built-in tools, verifiers, the model gateway)
  ['src/tools', 'src/verifier', 'src/gateway'],
  // work inside an env's container: the server's steps through the toolbox, files as the agent's user, the stop
  ['src/container'],
  // the engine backends, then what both share
  ['src/sandbox/docker', 'src/sandbox/swarm'],
  ['src/sandbox/engine'],
  // the sandbox's contract: the interface, env identity, env lifecycles
  ['src/sandbox'],
  // every failure decision: the facts a sandbox reports (a SandboxError carries one), what each means
  ['src/failures.ts'],
  ['src/config.ts', 'src/errors.ts', 'src/metrics.ts', 'src/logging.ts', 'src/http-connections.ts'],
  // every wire shape
  ['src/protocol'],
  // the ground floor: imports nothing of ours (the small helpers every floor uses, the tunables)
  ['src/util', 'src/defaults.ts'],
];

const ROOT = import.meta.dirname;
const ROOMS = FLOORS.flatMap((rooms, floor) => rooms.map((room) => ({ room, floor })));

/** the room of a repository-relative path (an import's `.js` read as the `.ts` it is built from), or null */
function roomOf(rel) {
  const p = rel.replace(/\.js$/, '.ts');
  const candidates = /\.[a-z]+$/.test(p) ? [p] : [p, `${p}.ts`];
  let best = null;
  for (const r of ROOMS) {
    const isFile = r.room.endsWith('.ts');
    const holds = candidates.some((c) => (isFile ? c === r.room : c === r.room || c.startsWith(`${r.room}/`)));
    if (holds && (!best || r.room.length > best.room.length)) best = r;
  }
  return best;
}

export const floorsPlugin = {
  rules: {
    'no-upward-imports': {
      meta: { type: 'problem', schema: [], messages: {} },
      create(context) {
        const rel = path.relative(ROOT, context.filename).split(path.sep).join('/');
        const own = roomOf(rel);
        if (!own) {
          return {
            Program(node) {
              context.report({ node, message: `${rel} is on no floor: add its room to FLOORS in eslint.config.js` });
            },
          };
        }
        const check = (node, source) => {
          if (typeof source !== 'string' || !source.startsWith('.')) return;
          const target = path
            .relative(ROOT, path.resolve(path.dirname(context.filename), source))
            .split(path.sep)
            .join('/');
          // the engine machinery both backends share is the sandbox's own: the rest of src/ goes
          // through the Sandbox interface or a backend's door (src/sandbox/docker/index.ts)
          if (rel.startsWith('src/') && !rel.startsWith('src/sandbox/') && target.startsWith('src/sandbox/engine/')) {
            context.report({
              node,
              message: `${rel} imports ${target}: outside src/sandbox/ use the Sandbox interface or the Docker backend's door (src/sandbox/docker/index.ts)`,
            });
            return;
          }
          const to = roomOf(target);
          if (!to || to.floor >= own.floor) return;
          context.report({
            node,
            message: `${own.room} imports ${to.room}, a floor above it (${target}): move what it needs down, to the floor of whoever uses it`,
          });
        };
        return {
          ImportDeclaration: (node) => check(node, node.source.value),
          ExportNamedDeclaration: (node) => node.source && check(node, node.source.value),
          ExportAllDeclaration: (node) => check(node, node.source.value),
          ImportExpression: (node) => node.source.type === 'Literal' && check(node, node.source.value),
        };
      },
    },
  },
};

/**
 * A file of src/ over MAX_LINES lines opens with the reason it is long: its first comment (before
 * any code) says "Long because" and why (one shape that reads best whole, a table, a protocol
 * followed step by step). Without a reason, split it where it parts naturally.
 */
export const MAX_LINES = 450;
const LONG_BECAUSE = /\bLong because\b\s*(.*)/is;

export const sizePlugin = {
  rules: {
    'long-file-reason': {
      meta: { type: 'suggestion', schema: [], messages: {} },
      create(context) {
        return {
          Program(node) {
            const source = context.sourceCode;
            const lines = source.lines.length - (source.lines.at(-1) === '' ? 1 : 0);
            if (lines <= MAX_LINES) return;
            const first = source.getAllComments()[0];
            const opens = first && (!node.body[0] || first.range[1] <= node.body[0].range[0]);
            const reason = opens
              ? LONG_BECAUSE.exec(first.value)?.[1]
                  .replace(/[\s*]+/g, ' ')
                  .trim()
              : undefined;
            if (reason && reason.length >= 20) return;
            const rel = path.relative(ROOT, context.filename).split(path.sep).join('/');
            context.report({
              node,
              loc: { line: 1, column: 0 },
              message: `${rel} has ${lines} lines (over ${MAX_LINES}): split it where it parts naturally, or open it with a comment that says "Long because" and why`,
            });
          },
        };
      },
    },
  },
};

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', 'bench-results/**', 'test-artifacts/**', 'bundles/**/app/**', 'docker/prebuilt/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: { globals: { ...globals.node } },
    rules: {
      // `_name` marks what a destructuring leaves out on purpose
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', destructuredArrayIgnorePattern: '^_' }],
    },
  },
  {
    // env build contexts run alone in their container, where a .js file is CommonJS
    files: ['test/bundle/fixtures/**/*.js'],
    languageOptions: { sourceType: 'commonjs' },
    rules: { '@typescript-eslint/no-require-imports': 'off' },
  },
  {
    // Tests read JSON replies whose shape is exactly what they assert next; typing each reply
    // would restate the protocol's schemas in every test. The clients the tests share with the
    // scripts hand those replies over as they came. The server's code never uses `any`.
    files: ['test/**/*.ts', 'scripts/lib/ws-client.ts', 'scripts/lib/swarm-lab.ts'],
    rules: { '@typescript-eslint/no-explicit-any': 'off' },
  },
  {
    files: ['src/**/*.ts'],
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': ['error', { checksVoidReturn: { arguments: false } }],
      '@typescript-eslint/await-thenable': 'error',
    },
  },
  {
    files: ['src/**/*.ts', 'test/**/*.ts', 'scripts/**/*.ts', 'web/**/*.{ts,tsx}'],
    plugins: { floors: floorsPlugin },
    rules: { 'floors/no-upward-imports': 'error' },
  },
  {
    files: ['src/**/*.ts'],
    plugins: { size: sizePlugin },
    rules: { 'size/long-file-reason': 'error' },
  },
  // The sandbox's layers: what both backends use lives in engine/, and no backend reaches into
  // the other (nor the engine layer into either).
  ...[
    ['src/sandbox/swarm/**/*.ts', ['../docker/*']],
    ['src/sandbox/docker/**/*.ts', ['../swarm/*']],
    ['src/sandbox/engine/**/*.ts', ['../docker/*', '../swarm/*']],
  ].map(([dir, group]) => ({
    files: [dir],
    rules: { 'no-restricted-imports': ['error', { patterns: [{ group, message: 'shared engine code belongs in src/sandbox/engine/' }] }] },
  })),
);
