// A bare aedes 2 broker (default hooks) on 127.0.0.1:0, on the LMDB persistence of a store in
// `dir` (or on aedes' in-memory persistence without one): what the persistence tests, the crash
// child process and the benchmark run.
import net from 'node:net';
import { Aedes, type AedesOptions } from 'aedes';
import { acknowledgeWhenDurable, createLmdbPersistence, type LmdbPersistence, type LmdbPersistenceDeps, type LmdbPersistenceLimits } from '../../src/mqtt/persistence/index.js';
import { openStore, type Store } from '../../src/store/index.js';

export const TEST_LIMITS: LmdbPersistenceLimits = {
  maxQueuedMessages: 1000,
  maxRetainedMessages: 10_000,
  maxRetainedBytes: 16 * 1024 * 1024,
  sessionExpirySeconds: 7 * 24 * 3600,
};

export interface BareBroker {
  aedes: Aedes;
  port: number;
  /** Set with a store dir. */
  store?: Store;
  persistence?: LmdbPersistence;
  close(): Promise<void>;
}

export interface BareBrokerOptions {
  /** LMDB store directory; without it aedes' in-memory persistence. */
  dir?: string;
  /** An already open store (instead of dir); close() leaves it open. */
  store?: Store;
  limits?: Partial<LmdbPersistenceLimits>;
  /** Hold PUBACK/PUBREC until the publish is on disk (default true with LMDB). */
  durableAcks?: boolean;
  persistence?: Partial<Omit<LmdbPersistenceDeps, 'store' | 'limits'>>;
  aedes?: AedesOptions;
}

export async function startBareBroker(options: BareBrokerOptions = {}): Promise<BareBroker> {
  const store = options.store ?? (options.dir ? openStore({ dir: options.dir }) : undefined);
  const persistence = store ? createLmdbPersistence({ store, limits: { ...TEST_LIMITS, ...options.limits }, ...options.persistence }) : undefined;
  const aedes = new Aedes({ ...options.aedes, ...(persistence ? { persistence } : {}) });
  if (persistence && options.durableAcks !== false) acknowledgeWhenDurable(aedes, persistence);
  await aedes.listen();
  // As the daemon's listener: every packet sent at once (benchmarks compare the two).
  const server = net.createServer({ noDelay: true }, (socket) => aedes.handle(socket));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    aedes,
    port: (server.address() as net.AddressInfo).port,
    store,
    persistence,
    async close() {
      server.close();
      await new Promise<void>((resolve) => aedes.close(() => resolve()));
      await persistence?.destroy();
      if (store && !options.store) await store.close();
    },
  };
}
