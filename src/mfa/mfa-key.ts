import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { ConfigError } from '../config/index.js';
import { writeFileAtomic } from '../store/write-file-atomic.js';

export const MFA_KEY_BYTES = 32;

/** Accepts 32 raw bytes, or 64 hex digits, or base64 of 32 bytes (surrounding whitespace ignored). */
export function parseMfaKey(content: Buffer): Buffer | undefined {
  if (content.length === MFA_KEY_BYTES) return content;
  const text = content.toString('utf8').trim();
  if (/^[0-9a-fA-F]{64}$/.test(text)) return Buffer.from(text, 'hex');
  if (/^[A-Za-z0-9+/_-]{43}=?$/.test(text)) {
    const key = Buffer.from(text, text.includes('-') || text.includes('_') ? 'base64url' : 'base64');
    if (key.length === MFA_KEY_BYTES) return key;
  }
  return undefined;
}

/**
 * The AES-256 key that seals TOTP secrets at rest: from `mfa.encryptionKeyFile` when set (it
 * must exist), else `<data>/mfa.key`, created on first start (32 random bytes, mode 0600,
 * written atomically). The key is not part of store backups: keep it with them.
 */
export function loadOrCreateMfaKey(options: { keyFile: string; dataDir: string }): { key: Buffer; path: string; created: boolean } {
  if (options.keyFile) {
    let content: Buffer;
    try {
      content = readFileSync(options.keyFile);
    } catch (err) {
      throw new ConfigError('mfa.encryptionKeyFile', `cannot read ${options.keyFile}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`);
    }
    const key = parseMfaKey(content);
    if (!key) throw new ConfigError('mfa.encryptionKeyFile', 'must hold a 32-byte key: 32 raw bytes, 64 hex digits or base64');
    return { key, path: options.keyFile, created: false };
  }
  const path = join(options.dataDir, 'mfa.key');
  if (existsSync(path)) {
    const key = parseMfaKey(readFileSync(path));
    if (!key) throw new Error(`${path} does not hold a 32-byte key; MFA secrets cannot be read`);
    return { key, path, created: false };
  }
  const key = randomBytes(MFA_KEY_BYTES);
  writeFileAtomic(path, key, 0o600);
  return { key, path, created: true };
}
