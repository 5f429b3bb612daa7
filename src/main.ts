#!/usr/bin/env node
// The entry of the daemon process. It stays this small on purpose: V8's optimizing compiler is
// paused before the daemon's modules are even loaded (loading them is most of the start-up
// work), and daemon-process.ts turns it back on at ready (README "Footprint").
import { pathToFileURL } from 'node:url';
import { pauseOptimizer } from './start-up-tiering.js';

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  pauseOptimizer();
  const { main } = await import('./daemon-process.js');
  await main();
}
