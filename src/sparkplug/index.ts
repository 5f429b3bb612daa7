// Sparkplug B (docs/design.md §14): an encoding of the data plane. A `type: Sparkplug` resource of a
// service file makes the gateway an edge node for the endpoints it names; the mapping runtime
// builds it (SparkplugResource), this part gives it what every edge node shares: the payload
// codec, bdSeq kept in the store, the values kept while its host is away (a table of the storage
// policy, one NodeHistory per resource for the life of the process), and its sessions' way to the
// broker as runAs; the runtime gets them through createSparkplugSupport's SparkplugNodes
// (src/mapping knows no more of it).
import type { Logger } from '../log/index.js';
import type { SparkplugNodes } from '../mapping/runtime.js';
import type { Store } from '../store/index.js';
import type { StagedTable, StoragePolicy } from '../storage/index.js';
import { createBdSeqStore } from './bdseq-store.js';
import { createNodeConnector, type IdentityPort } from './node-connector.js';
import { HISTORY_DATABASE, NodeHistory, type StoredValue } from './node-history.js';
import { createPayloadCodec } from './payload-codec.js';
import { SparkplugResource, type SparkplugSupport } from './sparkplug-resource.js';

export { SparkplugResource, type SparkplugSupport } from './sparkplug-resource.js';
export type { IdentityPort } from './node-connector.js';
export { HISTORY_DATABASE, HISTORY_DROP_REASONS, type HistoryDropReason, type HistoryFigures } from './node-history.js';

export function createSparkplugSupport(deps: {
  identity: IdentityPort;
  /** The embedded broker's plain MQTT listener, once it listens (undefined when it is off). */
  localBroker(): { host: string; port: number } | undefined;
  /** bdSeq outlives restarts there (absent: in memory). */
  store?: Store;
  /** Where kept values live (absent, or without a store: nothing is kept). */
  storage?: StoragePolicy;
  dataDir: string;
  log: Logger;
}): SparkplugNodes {
  const log = deps.log.child({ part: 'sparkplug' });
  const { store, storage } = deps;
  let table: StagedTable<StoredValue> | undefined;
  /** One per resource id for the life of the process: a restarted resource finds its counts as they are. */
  const histories = new Map<string, NodeHistory>();
  const historyOf = (id: string, limits: NodeHistory['limits']): NodeHistory | undefined => {
    if (!store || !storage) return undefined;
    if (!table) {
      table = storage.table<StoredValue>(HISTORY_DATABASE, { keyEncoding: 'ordered-binary' });
      // A value lost to a failed commit is counted as dropped by its history.
      table.onLost = (write) => (write.owner === undefined ? undefined : histories.get(write.owner)?.lost(write));
      // A restore swapped the store (the storage policy reopened the table first): each history is what the restored store holds.
      store.onReopen(() => {
        for (const h of histories.values()) h.reload();
      });
    }
    let history = histories.get(id);
    if (!history) {
      history = new NodeHistory({ table, store }, id, limits, log);
      histories.set(id, history);
      if (history.size) log.info('sparkplug history found', { id, values: history.size });
    }
    history.limits = limits;
    return history;
  };
  const support: SparkplugSupport = {
    codec: createPayloadCodec(),
    bdSeq: createBdSeqStore(store),
    historyOf: (def) => historyOf(def.id, { maxValues: def.history.maxValues, maxAgeSeconds: def.history.maxAgeSeconds, durability: def.history.durability }),
    connectorFor: (def, topics, bridgeTarget) => createNodeConnector(def, topics, { identity: deps.identity, localBroker: deps.localBroker, dataDir: deps.dataDir, bridgeTarget, log }),
  };
  return {
    create: (ctx, def, endpointOf, bridgeTarget) => new SparkplugResource(ctx, def, endpointOf, support, bridgeTarget),
    discard(id) {
      // Its resource left the service files: what it kept goes with it.
      const history = histories.get(id);
      if (!history) return;
      if (history.size) log.warn('sparkplug edge node removed: its kept values are deleted', { id, values: history.size });
      history.clear();
      histories.delete(id);
    },
  };
}
