import * as ScryptModule from 'scrypt-kdf';
import { ConcurrencyLimiter } from '../mqtt/limits.js';

// The package's runtime has only a default export while its typings declare named ones.
const Scrypt = ((ScryptModule as unknown as { default?: typeof ScryptModule }).default ?? ScryptModule) as typeof ScryptModule;

export interface PasswordHasher {
  hash(password: string): Promise<string>;
  verify(hash: string | undefined, password: string): Promise<boolean>;
  /** Whether a stored hash was made with other parameters than hash() uses now (auth.passwordHashCost changed since). */
  needsRehash?(hash: string): boolean;
}

/**
 * scrypt-kdf keys carry their own parameters and salt, so raising the cost later keeps old
 * hashes verifiable. verify() of an absent hash still runs one derivation so that an unknown
 * username costs as much time as a wrong password.
 *
 * Each derivation holds 128 × r × 2^logN bytes while it runs (32 MiB at logN 15) and libuv would
 * run four at once: wrong passwords from a few sockets took 4 × 32 MiB (issue 35). So at most
 * `maxConcurrent` derivations run at a time, the others wait in FIFO order; every caller's
 * derivation still runs (an unknown username costs what a wrong password costs).
 */
export function createPasswordHasher(options: { logN: number; maxConcurrent?: number }): PasswordHasher {
  const gate = new ConcurrencyLimiter(options.maxConcurrent ?? 1);
  const gated = <T>(derive: () => Promise<T>): Promise<T> => new Promise<T>((resolve, reject) => gate.schedule((release) => void derive().then(resolve, reject).finally(release)));
  let dummy: Promise<string> | undefined;
  const hash = (password: string) => gated(async () => Buffer.from(await Scrypt.kdf(password, { logN: options.logN, r: 8, p: 1 })).toString('base64'));
  return {
    hash,
    needsRehash(stored) {
      try {
        const params = Scrypt.viewParams(stored);
        return params.logN !== options.logN || params.r !== 8 || params.p !== 1;
      } catch {
        return false; // not a scrypt-kdf key: verify() refuses it anyway
      }
    },
    async verify(stored, password) {
      if (!stored) {
        dummy ??= hash('gatewayd-dummy-password');
        const key = await dummy;
        await gated(() => Scrypt.verify(key, password));
        return false;
      }
      try {
        return await gated(() => Scrypt.verify(stored, password));
      } catch {
        return false;
      }
    },
  };
}
