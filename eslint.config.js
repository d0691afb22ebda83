// ESLint (flat config) with typescript-eslint: the recommended rules everywhere, and the
// type-aware ones that catch async mistakes (a promise nobody awaits or catches) in the server.
import js from '@eslint/js';
import globals from 'globals';
import tseslint from 'typescript-eslint';

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
