// In-process fuzz of Modbus TCP answers through our driver, our MBAP port and modbus-serial (test/fuzz/targets/modbus-answers.ts).
import { fuzzSuite } from './support/fuzz-suite.js';

fuzzSuite({ target: 'modbus-answers', timeMs: 6_000, minPerCpuSecond: 300 });
