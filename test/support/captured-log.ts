// A logger whose JSON lines a test reads back (parsed, in the order written).
import { Writable } from 'node:stream';
import { createLogger, type Logger } from '../../src/log/index.js';

export interface CapturedLog {
  log: Logger;
  lines: Record<string, unknown>[];
}

/** A logger at `level` (default info) writing into `lines`. */
export function capturedLog(level = 'info'): CapturedLog {
  const lines: Record<string, unknown>[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString().split('\n')) if (line) lines.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  });
  return { log: createLogger({ level, stream }), lines };
}
