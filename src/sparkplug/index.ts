// Sparkplug B (DESIGN §14): an encoding of the data plane. A `type: Sparkplug` resource of a
// service file makes the gateway an edge node for the endpoints it names; the mapping runtime
// builds it (SparkplugResource), this part gives it what every edge node shares: the payload
// codec, bdSeq kept in the store, and its sessions' way to the broker as runAs.
import type { Logger } from '../log/index.js';
import type { SparkplugDef } from '../mapping/service-files.js';
import type { Store } from '../store/index.js';
import { createBdSeqStore } from './bdseq-store.js';
import { createNodeConnector, type IdentityPort } from './node-connector.js';
import { createPayloadCodec } from './payload-codec.js';
import type { SparkplugSupport } from './sparkplug-resource.js';
import type { EdgeNodeTopics } from './sparkplug-topics.js';

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
}): SparkplugSupport {
  const log = deps.log.child({ part: 'sparkplug' });
  return {
    codec: createPayloadCodec(),
    bdSeq: createBdSeqStore(deps.store),
    connectorFor: (def: SparkplugDef, topics: EdgeNodeTopics) => createNodeConnector(def, topics, { identity: deps.identity, localBroker: deps.localBroker, dataDir: deps.dataDir, log }),
  };
}
