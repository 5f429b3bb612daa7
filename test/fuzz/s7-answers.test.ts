// In-process fuzz of the S7 answer parsers and their stream reassembly (test/fuzz/targets/s7-answers.ts).
import { fuzzSuite } from './support/fuzz-suite.js';

fuzzSuite({ target: 's7-answers', timeMs: 6_000, minPerCpuSecond: 2_000 });
