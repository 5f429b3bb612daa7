// Fuzz: the REST API at random (issue 35 B; test/fuzz/targets/rest.ts); every constraint one at a
// time, deterministically, is test/openapi-fuzz.test.ts.
import { fuzzSuite } from './support/fuzz-suite.js';

fuzzSuite({ target: 'rest', timeMs: 6_000, minPerCpuSecond: 20, minExecutions: 30 });
