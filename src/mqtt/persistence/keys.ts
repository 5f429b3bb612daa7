// LMDB keys are at most 1978 bytes, MQTT topics and client ids up to 65535: long strings are
// cut to a literal prefix (so prefix range scans still find them) followed by U+0000 and a hash
// of the whole string. MQTT strings may not contain U+0000 (MQTT-1.5.3-2), and a cut key is
// always longer than the limit while an uncut one never is, so the two kinds cannot collide.
import { createHash } from 'node:crypto';

/** Byte limits of one string component: composite keys hold a client id and one more string. */
export const CLIENT_KEY_BYTES = 480;
export const FILTER_KEY_BYTES = 1200;
export const RETAINED_KEY_BYTES = 1900;

/** `value` itself when it fits in `maxBytes` UTF-8 bytes, else its cut-and-hashed form. */
export function boundedKey(value: string, maxBytes: number): string {
  if (value.length * 3 <= maxBytes || Buffer.byteLength(value) <= maxBytes) return value;
  const bytes = Buffer.from(value);
  return bytes.subarray(0, charBoundary(bytes, maxBytes)).toString() + '\u0000' + createHash('sha256').update(value).digest('base64url');
}

/** The largest end ≤ `max` that does not split a UTF-8 character of `bytes`. */
function charBoundary(bytes: Buffer, max: number): number {
  let end = Math.min(max, bytes.length);
  while (end > 0 && end < bytes.length && (bytes[end]! & 0xc0) === 0x80) end--;
  return end;
}

/** The binary key of a retained topic: byte order is what prefix ranges rely on. */
export function retainedKey(topic: string): Buffer {
  return Buffer.from(boundedKey(topic, RETAINED_KEY_BYTES));
}

/**
 * The binary key range holding every retained topic that starts with `prefix`. A prefix
 * longer than a cut key's literal part is shortened so that cut keys are still inside.
 */
export function retainedPrefixRange(prefix: string): { start: Buffer; end?: Buffer } {
  let start = Buffer.from(prefix);
  if (start.length > RETAINED_KEY_BYTES - 4) start = start.subarray(0, charBoundary(start, RETAINED_KEY_BYTES - 4));
  const end = Buffer.from(start);
  // The smallest key above every key that starts with `start`: increment with carry.
  for (let i = end.length - 1; i >= 0; i--) {
    if (end[i] < 0xff) {
      end[i]++;
      return { start, end: end.subarray(0, i + 1) };
    }
  }
  return { start };
}
