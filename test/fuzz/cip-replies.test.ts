// In-process fuzz of the EtherNet/IP reply parsers, their reassembly and fragmented reads (test/fuzz/targets/cip-replies.ts).
import { fuzzSuite } from './support/fuzz-suite.js';

fuzzSuite({ target: 'cip-replies', timeMs: 6_000, minPerCpuSecond: 300 });
