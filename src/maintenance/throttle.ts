import { PassThrough, Transform, type TransformCallback } from 'node:stream';

/**
 * Limits the average rate of a byte stream (maintenance.ioBytesPerSecond): a backup or an
 * extraction then cannot saturate the flash of a small gateway. Each chunk passes at once;
 * the next one is accepted when the budget allows. 0 means unlimited.
 */
export function throttle(bytesPerSecond: number): Transform {
  if (!bytesPerSecond) return new PassThrough();
  let nextAt = 0;
  let timer: NodeJS.Timeout | undefined;
  return new Transform({
    transform(chunk: Buffer, _encoding, callback: TransformCallback) {
      const now = performance.now();
      nextAt = Math.max(nextAt, now) + (chunk.length / bytesPerSecond) * 1000;
      this.push(chunk);
      const wait = nextAt - now;
      if (wait < 1) return callback();
      timer = setTimeout(() => {
        timer = undefined;
        callback();
      }, wait);
    },
    destroy(err, callback) {
      if (timer) clearTimeout(timer);
      callback(err);
    },
  });
}
