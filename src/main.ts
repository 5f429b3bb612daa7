#!/usr/bin/env node
// The entry of the daemon process. It stays this small on purpose: V8's optimizing compiler is
// paused, and its young generation held at its initial size, before the daemon's modules are even
// loaded (loading them is most of the start-up work); daemon-process.ts undoes both at ready
// (docs/footprint.md), and disabled `debug` instances are made free before any library creates
// one (quiet-debug.ts). Before all that, the platform check: a machine gatewayd cannot run on
// (Node, glibc, CPU) is told so in one line, before a native module could fail to load
// (docs/platforms.md). None of the modules imported here loads a native module.
// `gatewayd --version` prints the release and the data format it reads, and exits: no
// configuration read, no data directory touched, nothing started.
import { pathToFileURL } from 'node:url';
import { holdYoungGeneration } from './heap-footprint.js';
import { gatewaydVersion } from './maintenance/version.js';
import { refuseUnsupportedPlatform } from './platform/index.js';
import { quietDisabledDebug } from './quiet-debug.js';
import { pauseOptimizer } from './start-up-tiering.js';
import { DATA_FORMAT_VERSION } from './store/data-format.js';

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  if (process.argv.slice(2).includes('--version')) {
    process.stdout.write(`gatewayd ${gatewaydVersion()} (data format ${DATA_FORMAT_VERSION})\n`);
    process.exit(0);
  }
  refuseUnsupportedPlatform();
  pauseOptimizer();
  holdYoungGeneration();
  quietDisabledDebug();
  const { main } = await import('./daemon-process.js');
  await main();
}
