import { CONFIG_EXIT_CODE, ConfigError, loadConfig } from './config/index.js';
import { createLogger, type Logger } from './log/index.js';
import { createDaemon } from './daemon.js';
import { upgradeDataDirectory } from './maintenance/data-upgrade.js';
import { DataFormatError, isStorageFailure } from './store/index.js';
import { capYoungGeneration, collectWhenIdle, releaseYoungGeneration } from './heap-footprint.js';
import { resumeOptimizer } from './start-up-tiering.js';
import { wireGateway } from './wiring.js';

/**
 * Ends a start that cannot go on: a configuration or a data directory gatewayd cannot use is one
 * line on stderr and exit 78 (systemd does not restart it: a restart would fail the same way);
 * anything else is logged, exit 1.
 */
function exitStartFailed(err: unknown, log: Logger): never {
  if (err instanceof ConfigError || err instanceof DataFormatError) {
    process.stderr.write(`gatewayd: ${err.message}\n`);
    process.exit(CONFIG_EXIT_CODE);
  }
  log.error('start failed', { error: err instanceof Error ? { message: err.message, stack: err.stack } : String(err) });
  process.exit(1);
}

/** Reads the configuration, wires the parts, starts them and stops them on SIGTERM/SIGINT. */
export async function main(): Promise<void> {
  let config;
  try {
    config = loadConfig();
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`gatewayd: ${err.message}\n`);
      process.exit(CONFIG_EXIT_CODE);
    }
    throw err;
  }
  const log = createLogger({ level: config.log.level });
  const startedAt = process.hrtime.bigint();
  // The data directory's format, before anything opens the store for writing: an older one is
  // copied and migrated, a newer one refused in one line (exit 78: systemd does not restart).
  try {
    await upgradeDataDirectory({ dataDir: config.dataDir, log });
  } catch (err) {
    exitStartFailed(err, log);
  }
  const gateway = wireGateway(config, log);
  const daemon = createDaemon({ parts: gateway.parts, log });

  let shuttingDown = false;
  const shutdown = (signal: string) => {
    if (shuttingDown) return;
    shuttingDown = true;
    log.lifecycle('stopping', { signal });
    // A stop that hangs must not keep the service from restarting.
    setTimeout(() => {
      log.error('stop timed out; exiting');
      process.exit(1);
    }, config.http.shutdownTimeoutMs + 5000).unref();
    daemon.stop().then(
      () => {
        log.lifecycle('stopped');
        process.exit(0);
      },
      (err: unknown) => {
        log.error('stop failed', { error: err });
        process.exit(1);
      },
    );
  };
  // lmdb-js leaves the cause of a failed commit in a promise nobody awaits: a full disk must not
  // end the daemon (writes answer 507, everything else goes on). Anything else unhandled is a bug.
  process.on('unhandledRejection', (reason) => {
    if (isStorageFailure(reason)) return gateway.services.store.noteWriteFailure(reason);
    log.error('unhandled rejection; exiting', { error: reason instanceof Error ? { message: reason.message, stack: reason.stack } : String(reason) });
    process.exit(1);
  });
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));

  try {
    await daemon.start();
  } catch (err) {
    exitStartFailed(err, log);
  }
  // SIGTERM during start-up: the parts started so far are being stopped; never say ready.
  if (shuttingDown) return;
  log.lifecycle('ready', {
    ...gateway.ports(),
    dataDir: config.dataDir,
    startupMs: Math.round(Number(process.hrtime.bigint() - startedAt) / 1e6),
  });
  resumeOptimizer();
  releaseYoungGeneration();
  capYoungGeneration();
  collectWhenIdle();
}
