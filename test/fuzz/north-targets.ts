// The northbound fuzz targets (issue 35 B), for `npm run fuzz:north` and the tests: MQTT ingress,
// the certificate parsers, backup archives and the REST API. The lead's unified runner takes
// this list at merge (the southbound helper's targets live in test/fuzz/support/).
import type { NorthTarget } from './north-support.js';

/** Loaded on demand: each target pulls in its part of the gateway. */
export const northTargets: Record<string, () => Promise<NorthTarget<any, any>>> = {
  'mqtt-ingress': async () => (await import('./mqtt-ingress-target.js')).mqttIngressTarget,
  'mqtt-model': async () => (await import('./mqtt-model-target.js')).mqttModelTarget,
  certs: async () => (await import('./certs-target.js')).certsTarget,
  archive: async () => (await import('./archive-target.js')).archiveTarget,
  rest: async () => (await import('./rest-target.js')).restTarget,
};
