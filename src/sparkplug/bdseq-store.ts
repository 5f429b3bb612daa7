// bdSeq, the birth/death sequence number of an edge node's MQTT sessions (0 to 255, then 0
// again; one more at every CONNECT). It outlives the daemon: after a kill -9 and a restart the
// new session's bdSeq differs from the one in the will the broker still holds or delivers late,
// so a host never takes the old NDEATH for the death of the new session.
import type { Store } from '../store/index.js';

export interface BdSeqStore {
  /** The bdSeq of the next session of this edge node, durable once it resolves. */
  next(groupId: string, edgeNodeId: string): Promise<number>;
}

const PREFIX = 'sparkplug-bdseq';

/** Without a store (tests of the edge node alone), the numbers last as long as the process. */
export function createBdSeqStore(store: Store | undefined): BdSeqStore {
  const memory = new Map<string, number>();
  return {
    async next(groupId, edgeNodeId) {
      const key = [PREFIX, `${groupId}/${edgeNodeId}`];
      const last = (store ? (store.kv.get(key) as number | undefined) : memory.get(key[1]!)) ?? -1;
      const bdSeq = (last + 1) % 256;
      if (store) await store.kv.put(key, bdSeq);
      else memory.set(key[1]!, bdSeq);
      return bdSeq;
    },
  };
}
