// Runs aedes-persistence's abstract test suite, unmodified, under node:test against the LMDB
// persistence: each instance on a fresh LMDB store in a temp dir. Started as a child process by
// test/mqtt-persistence-abstract.test.ts, which turns its results into one mocha test each.
// With ABSTRACT_READS=disk every call first waits until the earlier writes are on disk, so the
// suite's reads go to LMDB instead of the writes not yet committed.
import { mkdtempSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { test } from 'node:test';
import { createLmdbPersistence, type LmdbPersistence } from '../../src/mqtt/persistence/index.js';
import { openStore } from '../../src/store/index.js';

const require = createRequire(import.meta.url);
const abstractSuite = require('aedes-persistence/abstract.js') as (options: object) => void;

const dirs: string[] = [];
process.on('exit', () => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

abstractSuite({
  test,
  // aedes 2 calls the promise interface with setup(broker): the suite's "async" mode.
  testAsync: true,
  persistence: async () => {
    const dir = mkdtempSync(join(tmpdir(), 'gatewayd-abstract-'));
    dirs.push(dir);
    const store = openStore({ dir });
    const persistence = createLmdbPersistence({
      store,
      limits: { maxQueuedMessages: 1000, maxRetainedMessages: 10_000, maxRetainedBytes: 16 * 1024 * 1024, sessionExpirySeconds: 3600 },
    });
    // The suite destroys each instance; the store belongs to this runner and closes after it.
    const destroy = persistence.destroy.bind(persistence);
    persistence.destroy = async () => {
      await destroy();
      await store.close();
    };
    return process.env.ABSTRACT_READS === 'disk' ? readingFromDisk(persistence) : persistence;
  },
});

const STREAMS = new Set(['createRetainedStream', 'createRetainedStreamCombi', 'outgoingStream', 'streamWill', 'getClientList']);

/** The same persistence, each call made once the writes before it are flushed. */
function readingFromDisk(persistence: LmdbPersistence): LmdbPersistence {
  return new Proxy(persistence, {
    get(target, property) {
      const value = Reflect.get(target, property) as unknown;
      if (typeof value !== 'function' || property === 'setup' || property === 'destroy' || typeof property !== 'string') {
        return typeof value === 'function' ? value.bind(target) : value;
      }
      const method = value as (...args: unknown[]) => unknown;
      if (STREAMS.has(property)) {
        return (...args: unknown[]) =>
          Readable.from(
            (async function* () {
              await target.flush();
              yield* method.apply(target, args) as Readable;
            })(),
          );
      }
      return async (...args: unknown[]) => {
        await target.flush();
        return method.apply(target, args);
      };
    },
  });
}
