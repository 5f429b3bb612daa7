// Fuzz: MQTT ingress (issue 35 B): the real broker on in-process streams with valid and mutated
// packets of every type (test/fuzz/targets/mqtt-ingress.ts has the inputs and oracles).
import { fuzzSuite } from './support/fuzz-suite.js';

fuzzSuite({ target: 'mqtt-ingress', timeMs: 8_000, minPerCpuSecond: 100 });
