import type { Logger } from './log/index.js';

/** A part of the daemon with a lifecycle. Parts start in order and stop in reverse order. */
export interface Part {
  name: string;
  start(): Promise<void>;
  stop(): Promise<void>;
}

export interface Daemon {
  /** Starts the parts in order; resolves early, with the rest not started, when stop() is called meanwhile. */
  start(): Promise<void>;
  /** Idempotent; resolves when every started part has stopped (or failed to, logged). */
  stop(): Promise<void>;
}

export function createDaemon(deps: { parts: Part[]; log: Logger }): Daemon {
  const { parts, log } = deps;
  const started: Part[] = [];
  let stopping: Promise<void> | undefined;
  /** The start() of the part being started now (a stop waits for it, then stops it too). */
  let starting: Promise<void> | undefined;

  async function stopStarted(): Promise<void> {
    while (started.length) {
      const part = started.pop()!;
      try {
        await part.stop();
        log.debug('part stopped', { part: part.name });
      } catch (err) {
        log.error('part failed to stop', { part: part.name, error: err });
      }
    }
  }

  return {
    async start() {
      for (const part of parts) {
        // A stop during start-up (SIGTERM while the PKI or the mapping starts): start nothing more.
        if (stopping) return;
        try {
          starting = part.start();
          await starting;
        } catch (err) {
          // Leave nothing half-running: stop what did start, then report.
          await stopStarted();
          throw err;
        }
        started.push(part);
        log.debug('part started', { part: part.name });
      }
    },
    stop() {
      stopping ??= (async () => {
        await starting?.catch(() => undefined);
        await stopStarted();
      })();
      return stopping;
    },
  };
}
