// Sparkplug B (docs/design.md §14): an encoding of the data plane. A `type: Sparkplug` resource of a
// service file makes the gateway an edge node for the endpoints it names; the mapping runtime
// builds it (SparkplugResource), this part gives it what every edge node shares: the payload
// codec, bdSeq kept in the store, and its sessions' way to the broker as runAs; the runtime
// gets them through createSparkplugSupport's SparkplugNodes (src/mapping knows no more of it).
import type { Logger } from '../log/index.js';
import type { SparkplugNodes } from '../mapping/runtime.js';
import type { Store } from '../store/index.js';
import { createBdSeqStore } from './bdseq-store.js';
import { createNodeConnector, type IdentityPort } from './node-connector.js';
import { createPayloadCodec } from './payload-codec.js';
import { SparkplugResource, type SparkplugSupport } from './sparkplug-resource.js';

export { SparkplugResource, type SparkplugSupport } from './sparkplug-resource.js';
export type { IdentityPort } from './node-connector.js';

export function createSparkplugSupport(deps: {
  identity: IdentityPort;
  /** The embedded broker's plain MQTT listener, once it listens (undefined when it is off). */
  localBroker(): { host: string; port: number } | undefined;
  /** bdSeq outlives restarts there (absent: in memory). */
  store?: Store;
  dataDir: string;
  log: Logger;
}): SparkplugNodes {
  const log = deps.log.child({ part: 'sparkplug' });
  const support: SparkplugSupport = {
    codec: createPayloadCodec(),
    bdSeq: createBdSeqStore(deps.store),
    connectorFor: (def, topics, bridgeTarget) => createNodeConnector(def, topics, { identity: deps.identity, localBroker: deps.localBroker, dataDir: deps.dataDir, bridgeTarget, log }),
  };
  return { create: (ctx, def, endpointOf, bridgeTarget) => new SparkplugResource(ctx, def, endpointOf, support, bridgeTarget) };
}
