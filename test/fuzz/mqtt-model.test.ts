// run-alone: its time oracle (1 s per command list) measures the machine.
// Fuzz: MQTT sessions against a model (issue 35 B) — see mqtt-model-target.ts.
import { northFuzzSuite } from './north-support.js';

northFuzzSuite(async () => (await import('./mqtt-model-target.js')).mqttModelTarget, 'MQTT sessions against a model (connect, subscribe, publish QoS 0/1/2, disconnect, malformed connections between)');
