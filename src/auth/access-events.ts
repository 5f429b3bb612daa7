import type { AccessChange } from '../mqtt/mqtt-access.js';

export type { AccessChange };

/**
 * Change notifications after a commit: the permission engine drops cached sets, the broker
 * drops cached decisions or disconnects sessions. Listeners run synchronously and must not throw.
 */
export function createAccessEvents() {
  const listeners = new Set<(change: AccessChange) => void>();
  return {
    emit(change: AccessChange): void {
      for (const listener of listeners) listener(change);
    },
    on(listener: (change: AccessChange) => void): () => void {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
  };
}
export type AccessEvents = ReturnType<typeof createAccessEvents>;
