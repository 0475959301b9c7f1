// Bundles the harness page (React, @grafana/ui, @grafana/data, @grafana/runtime)
// with esbuild: one file, built once, reused by every browser test run.
import { build } from 'esbuild';
import { fileURLToPath } from 'node:url';
import path from 'node:path';

const here = path.dirname(fileURLToPath(import.meta.url));
const started = Date.now();
await build({
  entryPoints: [path.join(here, 'harness/index.tsx')],
  outfile: path.join(here, 'harness/build/harness.js'),
  bundle: true,
  format: 'iife',
  platform: 'browser',
  target: 'es2020',
  minify: true,
  jsx: 'transform',
  define: { 'process.env.NODE_ENV': '"production"', global: 'window' },
  loader: { '.svg': 'text', '.png': 'empty', '.woff': 'empty', '.woff2': 'empty', '.ttf': 'empty', '.eot': 'empty' },
  logLevel: 'warning',
});
console.log(`harness bundled in ${((Date.now() - started) / 1000).toFixed(1)} s`);
