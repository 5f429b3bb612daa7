// run-alone: its time oracle (50 ms per input up to 64 KiB; REST 200 ms) measures the machine.
// Fuzz: the REST API at random (issue 35 B) — see rest-target.ts; every constraint one at a time,
// deterministically, is test/openapi-fuzz.test.ts.
import { northFuzzSuite } from './north-support.js';

northFuzzSuite(async () => (await import('./rest-target.js')).restTarget, 'REST API (random bodies and cases over the OpenAPI document)');
