// Builds the web UI (ui/, Preact + signals, TSX) with esbuild into dist/ui, as the last step of
// `npm run build`: hashed, minified ES modules split into chunks (the topic explorer and the QR
// code are loaded only when used), one stylesheet, index.html naming them, and a .gz copy of
// each file (level 9) that the daemon serves to browsers that accept gzip.
// dist/ui-build.json (not served) lists what the first page loads, for the size budget test.
import { build, type Metafile } from 'esbuild';
import { mkdirSync, readFileSync, rmSync, writeFileSync, readdirSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync, constants as zlib } from 'node:zlib';

export interface UiBuildReport {
  /** Files (relative to dist/ui) the first page loads: index.html, the entry, its static imports, the CSS. */
  firstPage: string[];
  /** Every output file with the source files (relative to the repository) bundled into it. */
  outputs: Record<string, { bytes: number; inputs: string[] }>;
}

const root = fileURLToPath(new URL('../..', import.meta.url));
const entry = 'ui/src/main.tsx';

function packageVersion(): string {
  return (JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { version: string }).version;
}

/** The entry's JS, every chunk it imports statically (transitively), and its CSS. */
function firstPageOutputs(meta: Metafile, outDir: string): string[] {
  const outputs = meta.outputs;
  const start = Object.keys(outputs).find((k) => outputs[k]!.entryPoint === entry);
  if (!start) throw new Error(`esbuild produced no output for ${entry}`);
  const seen = new Set<string>();
  const visit = (file: string) => {
    if (seen.has(file)) return;
    seen.add(file);
    for (const imp of outputs[file]!.imports) if (imp.kind === 'import-statement' && !imp.external) visit(imp.path);
  };
  visit(start);
  const css = outputs[start]!.cssBundle;
  if (css) seen.add(css);
  return [...seen].map((f) => relative(outDir, join(root, f)));
}

export async function buildUi(): Promise<UiBuildReport> {
  const outDir = join(root, 'dist/ui');
  const assets = join(outDir, 'assets');
  rmSync(outDir, { recursive: true, force: true });
  mkdirSync(assets, { recursive: true });

  const result = await build({
    absWorkingDir: root,
    entryPoints: { app: entry },
    outdir: assets,
    bundle: true,
    splitting: true,
    format: 'esm',
    // Browsers of the last few years (tablets included); no polyfills.
    target: ['chrome100', 'firefox100', 'safari15', 'edge100'],
    jsx: 'automatic',
    jsxImportSource: 'preact',
    minify: true,
    metafile: true,
    entryNames: '[name]-[hash]',
    chunkNames: '[name]-[hash]',
    assetNames: '[name]-[hash]',
    // The release the footer names: this build's package.json, the version GET /health answers.
    define: { 'process.env.NODE_ENV': '"production"', __GATEWAYD_VERSION__: JSON.stringify(packageVersion()) },
    charset: 'utf8',
    logLevel: 'warning',
    tsconfig: join(root, 'ui/tsconfig.json'),
  });
  const meta = result.metafile;
  const firstPage = firstPageOutputs(meta, outDir);

  const tags = firstPage
    .map((file) => {
      if (file.endsWith('.css')) return `<link rel="stylesheet" href="/${file}">`;
      return file === firstPage[0] ? `<script type="module" src="/${file}"></script>` : `<link rel="modulepreload" href="/${file}">`;
    })
    .join('\n    ');
  const template = readFileSync(join(root, 'ui/index.html'), 'utf8');
  if (!template.includes('<!-- assets -->')) throw new Error('ui/index.html lacks the <!-- assets --> marker');
  writeFileSync(join(outDir, 'index.html'), template.replace('<!-- assets -->', tags));

  const outputs: UiBuildReport['outputs'] = {};
  for (const [file, out] of Object.entries(meta.outputs)) {
    outputs[relative(outDir, join(root, file))] = { bytes: out.bytes, inputs: Object.keys(out.inputs) };
  }
  for (const dir of [outDir, assets]) {
    for (const name of readdirSync(dir)) {
      const path = join(dir, name);
      if (!statSync(path).isFile()) continue;
      const body = readFileSync(path);
      const gz = gzipSync(body, { level: zlib.Z_BEST_COMPRESSION });
      if (gz.length < body.length) writeFileSync(`${path}.gz`, gz);
    }
  }
  const report: UiBuildReport = { firstPage: ['index.html', ...firstPage], outputs };
  writeFileSync(join(root, 'dist/ui-build.json'), JSON.stringify(report, null, 2));
  return report;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const report = await buildUi();
  const gz = report.firstPage.reduce((n, f) => n + gzipSync(readFileSync(join(root, 'dist/ui', f)), { level: 9 }).length, 0);
  console.log(`web UI built into dist/ui: first page ${(gz / 1024).toFixed(1)} KiB gzipped (${report.firstPage.length} files)`);
}
