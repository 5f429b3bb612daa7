// run-alone: its time oracle (50 ms per input up to 64 KiB; REST 200 ms) measures the machine.
// Fuzz: the certificate parsers (issue 35 B) — see certs-target.ts for the inputs and oracles.
import { northFuzzSuite } from './north-support.js';

northFuzzSuite(async () => (await import('./certs-target.js')).certsTarget, 'certificates and CSRs (PEM, DER, PKCS#10)');
