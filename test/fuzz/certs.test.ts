// Fuzz: the certificate parsers (issue 35 B; test/fuzz/targets/certs.ts has the inputs and oracles).
import { fuzzSuite } from './support/fuzz-suite.js';

fuzzSuite({ target: 'certs', timeMs: 6_000, minPerCpuSecond: 200 });
