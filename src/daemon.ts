import type { Logger } from './log/index.js';

/** A part of the daemon with a lifecycle. Parts start in order and stop in reverse order. */
export interface Part {
  name: string;
  start(): Promise<void>;
  stop(): Promise<void>;
}

export interface Daemon {
  start(): Promise<void>;
  /** Idempotent; resolves when every started part has stopped (or failed to, logged). */
  stop(): Promise<void>;
}

export function createDaemon(deps: { parts: Part[]; log: Logger }): Daemon {
  const { parts, log } = deps;
  const started: Part[] = [];
  let stopping: Promise<void> | undefined;

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
        try {
          await part.start();
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
      stopping ??= stopStarted();
      return stopping;
    },
  };
}
