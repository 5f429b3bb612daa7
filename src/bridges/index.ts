// Bridges to upstream brokers with store-and-forward (docs/design.md §14). `Bridge` resources are
// declared in service files and run by the mapping runtime (created, diffed, restarted like
// connections); this part is their engine: the upstream client (upstream.ts), the queue in the
// gateway's LMDB environment (bridge-queue.ts, database `bridge-queue`: backups carry it), the
// topic rules (topic-rules.ts) and the permission checks of the runAs user (run-as.ts).
import type { Logger } from '../log/index.js';
import type { Store } from '../store/index.js';
import type { StagedTable, StoragePolicy } from '../storage/index.js';
import { Bridge, type BridgeDataPlane, type BridgeFigures } from './bridge.js';
import { bridgeDefinition, type BridgeProperties } from './bridge-definition.js';
import { BridgeQueue } from './bridge-queue.js';
import type { BridgeAccess } from './run-as.js';

export { Bridge, type BridgeDataPlane, type BridgeFigures, type BridgeState, type BridgeTarget, type TappedMessage } from './bridge.js';
export { bridgeProblems, bridgeSchema, QUEUE_DEFAULTS, type BridgeDefinition, type BridgeProperties } from './bridge-definition.js';
export { DROP_REASONS, type DropReason, type QueueFigures } from './bridge-queue.js';
export type { BridgeAccess, BridgePrincipal } from './run-as.js';
export { displayUrl } from './upstream.js';
export { createBridgeSysTopics } from './bridge-sys-topics.js';

export const QUEUE_DATABASE = 'bridge-queue';

export interface BridgeService {
  /** Builds the bridge of a resource (not started); its queue is the one its id had before, if any. */
  create(id: string, properties: BridgeProperties, changed: () => void): Bridge;
  /** The bridge left the service files: its queue is deleted. */
  discard(id: string): void;
  /** Is there a gatewayd user of that name (service files naming an unknown runAs are refused)? */
  knownUser(username: string): boolean;
  /** Every running bridge's figures, by id (for /metrics and $SYS). */
  figures(): BridgeFigures[];
}

export function createBridgeService(deps: {
  store: Store;
  /** The gateway's storage policy: the queues are one of its tables. */
  storage: StoragePolicy;
  log: Logger;
  access: BridgeAccess;
  /** The broker's data plane (undefined while the broker is off). */
  dataPlane: () => BridgeDataPlane | undefined;
  /** Where caFile, certFile and keyFile are. */
  dataDir: string;
  /** Default client ids are <clientIdPrefix>.<bridge id> (the hostname, as Mosquitto). */
  clientIdPrefix: string;
}): BridgeService {
  const { store } = deps;
  const log = deps.log.child({ part: 'bridges' });
  let table: StagedTable<Buffer> | undefined;
  /** Queues by bridge id: one per id for the life of the process, so a restarted bridge keeps its pending writes. */
  const queues = new Map<string, BridgeQueue>();
  const running = new Map<string, Bridge>();
  let listening = false;

  const queueOf = (id: string, limits: BridgeQueue['limits']): BridgeQueue => {
    if (!table) {
      table = deps.storage.table<Buffer>(QUEUE_DATABASE, { keyEncoding: 'ordered-binary', encoding: 'binary' });
      // A write lost to a failed commit: its queue counts the message as dropped.
      table.onLost = (write) => (write.owner === undefined ? undefined : queues.get(write.owner)?.lost(write));
    }
    if (!listening) {
      listening = true;
      // A restore swapped the store (the storage policy reopened the table first): each queue is what the restored store holds.
      store.onReopen(() => {
        for (const q of queues.values()) q.reload();
        for (const b of running.values()) b.forgetAccess();
      });
    }
    let q = queues.get(id);
    if (!q) {
      q = new BridgeQueue({ table, store, policy: deps.storage }, id, limits);
      queues.set(id, q);
      if (q.size) log.info('bridge queue found', { id, messages: q.size });
    }
    return q;
  };

  return {
    create(id, properties, changed) {
      const def = bridgeDefinition(id, properties, { clientIdPrefix: deps.clientIdPrefix, dataDir: deps.dataDir });
      const queue = queueOf(id, def.queue);
      const bridge: Bridge = new Bridge({
        def,
        queue,
        dataPlane: deps.dataPlane(),
        access: deps.access,
        log,
        changed,
        stopped: () => {
          if (running.get(id) === bridge) running.delete(id);
        },
      });
      running.set(id, bridge);
      return bridge;
    },
    discard(id) {
      const q = queues.get(id);
      if (!q) return;
      if (q.size) log.warn('bridge removed: its queue is deleted', { id, messages: q.size });
      q.clear();
      queues.delete(id);
    },
    knownUser: (username) => deps.access.principal(username) !== undefined,
    figures: () => [...running.values()].map((b) => b.figures()).sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0)),
  };
}
