// run-alone: its model waits for each answer for at most 1 s of wall time, which a loaded machine stretches.
// Fuzz: MQTT sessions against a model (issue 35 B; test/fuzz/targets/mqtt-model.ts).
import { fuzzSuite } from './support/fuzz-suite.js';

fuzzSuite({ target: 'mqtt-model', timeMs: 6_000, minPerCpuSecond: 20, minExecutions: 20 });
