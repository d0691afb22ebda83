/**
 * The web console's build: `vite build -c web/vite.config.ts` writes dist/web, which the server
 * serves at /web/. Relative asset URLs (base './') keep it working under any prefix: behind a
 * TLS proxy, or at /t/<token>/web/ with --token-in-path. Preact's JSX through esbuild's own
 * automatic runtime (no plugin needed). Every asset is in the build: no CDN.
 */
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vite';

export default defineConfig({
  root: fileURLToPath(new URL('.', import.meta.url)),
  base: './',
  esbuild: { jsx: 'automatic', jsxImportSource: 'preact' },
  build: {
    outDir: fileURLToPath(new URL('../dist/web', import.meta.url)),
    emptyOutDir: true,
    target: 'es2022',
    // one small page: no source maps shipped, no inlined assets beyond tiny ones
    sourcemap: false,
    reportCompressedSize: true,
  },
});
