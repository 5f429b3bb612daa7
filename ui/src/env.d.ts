// Side-effect imports esbuild bundles (the stylesheet).
declare module '*.css';

/** The gatewayd release, from package.json at build time (scripts/build-ui.ts); the footer shows it. */
declare const __GATEWAYD_VERSION__: string;
