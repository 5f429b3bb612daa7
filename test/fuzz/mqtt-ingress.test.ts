// run-alone: its time oracle (50 ms per input up to 64 KiB; REST 200 ms) measures the machine.
// Fuzz: MQTT ingress (issue 35 B) — see mqtt-ingress-target.ts for the inputs and oracles.
import { northFuzzSuite } from './north-support.js';

northFuzzSuite(async () => (await import('./mqtt-ingress-target.js')).mqttIngressTarget, 'MQTT ingress (aedes, mqtt-packet, gatewayd hooks, LMDB persistence)');
