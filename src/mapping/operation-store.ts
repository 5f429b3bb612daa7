// Target states set by operations outlive a restart (docs/design.md §13): kept in the store with the
// definition hash they were set against, and dropped once the service file changes (or drops)
// that resource.
import { prefixRange, type MappingOperationRecord, type Store } from '../store/index.js';
import type { StoredTargets } from './runtime.js';

const PREFIX = 'mapping-operation';
const keyOf = (id: string) => [PREFIX, id];

export interface OperationStore extends StoredTargets {
  /** Keeps the target an operation set (durable when it resolves). */
  save(id: string, targetState: MappingOperationRecord['targetState'], definitionHash: string): Promise<void>;
  /** Drops every record whose resource no longer has that definition. */
  prune(current: (id: string) => string | undefined): Promise<number>;
}

export function createOperationStore(store: Store): OperationStore {
  const read = (id: string) => store.kv.get(keyOf(id)) as MappingOperationRecord | undefined;
  return {
    get(id, definitionHash) {
      const r = read(id);
      return r && r.definitionHash === definitionHash ? r.targetState : undefined;
    },
    async save(id, targetState, definitionHash) {
      await store.kv.put(keyOf(id), { targetState, definitionHash, setAt: Date.now() } satisfies MappingOperationRecord);
    },
    async prune(current) {
      const stale: string[] = [];
      for (const { key, value } of store.kv.getRange(prefixRange(PREFIX))) {
        const id = String((key as unknown[])[1]);
        if (current(id) !== (value as MappingOperationRecord).definitionHash) stale.push(id);
      }
      if (stale.length) await store.transaction(() => stale.forEach((id) => store.kv.remove(keyOf(id))));
      return stale.length;
    },
  };
}
