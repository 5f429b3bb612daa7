// Side-effect imports esbuild bundles (the stylesheet).
declare module '*.css';
