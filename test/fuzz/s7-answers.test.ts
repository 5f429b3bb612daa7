// In-process fuzz of the S7 answer parsers and their stream reassembly (test/fuzz/targets/s7-answers.ts).
import { fuzzSuite } from './support/fuzz-suite.js';

fuzzSuite({ target: 's7-answers', timeMs: 10_000, minExecutions: 10_000 });
