// In-process fuzz of Sparkplug B DCMD decoding and the writes it triggers (test/fuzz/targets/sparkplug-dcmd.ts).
import { fuzzSuite } from './support/fuzz-suite.js';

fuzzSuite({ target: 'sparkplug-dcmd', timeMs: 6_000, minPerCpuSecond: 300 });
