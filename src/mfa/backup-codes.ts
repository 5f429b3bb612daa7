import { createHash, randomInt, timingSafeEqual } from 'node:crypto';

export const BACKUP_CODE_COUNT = 10;
export const BACKUP_CODE_LENGTH = 10;
/** No 0/O, 1/I/L: codes are read off paper and typed in. 31 symbols: about 49 bits a code. */
const ALPHABET = '23456789ABCDEFGHJKMNPQRSTUVWXYZ';

export function generateBackupCodes(count = BACKUP_CODE_COUNT): string[] {
  const codes = new Set<string>();
  while (codes.size < count) {
    let code = '';
    for (let i = 0; i < BACKUP_CODE_LENGTH; i++) code += ALPHABET[randomInt(ALPHABET.length)];
    codes.add(code);
  }
  return [...codes];
}

/** Case, spaces and dashes do not matter when a code is typed. */
export function normalizeBackupCode(code: string): string {
  return code.replace(/[\s-]/g, '').toUpperCase();
}

/**
 * SHA-256 is enough here: the codes are random with about 49 bits of entropy, not passwords, and
 * guessing is capped by the MFA failure ban.
 */
export function hashBackupCode(code: string): string {
  return createHash('sha256').update(normalizeBackupCode(code), 'utf8').digest('hex');
}

/** Index of the stored hash matching `code`, or -1; compares every hash in constant time. */
export function findBackupCode(hashes: readonly string[], code: string): number {
  const candidate = Buffer.from(hashBackupCode(code), 'hex');
  let found = -1;
  hashes.forEach((h, i) => {
    const stored = Buffer.from(h, 'hex');
    if (stored.length === candidate.length && timingSafeEqual(stored, candidate) && found < 0) found = i;
  });
  return found;
}
