import * as ScryptModule from 'scrypt-kdf';

// The package's runtime has only a default export while its typings declare named ones.
const Scrypt = ((ScryptModule as unknown as { default?: typeof ScryptModule }).default ?? ScryptModule) as typeof ScryptModule;

export interface PasswordHasher {
  hash(password: string): Promise<string>;
  verify(hash: string | undefined, password: string): Promise<boolean>;
}

/**
 * scrypt-kdf keys carry their own parameters and salt, so raising the cost later keeps old
 * hashes verifiable. verify() of an absent hash still runs one derivation so that an unknown
 * username costs as much time as a wrong password.
 */
export function createPasswordHasher(options: { logN: number }): PasswordHasher {
  let dummy: Promise<string> | undefined;
  const hash = async (password: string) => Buffer.from(await Scrypt.kdf(password, { logN: options.logN, r: 8, p: 1 })).toString('base64');
  return {
    hash,
    async verify(stored, password) {
      if (!stored) {
        dummy ??= hash('gatewayd-dummy-password');
        await Scrypt.verify(await dummy, password);
        return false;
      }
      try {
        return await Scrypt.verify(stored, password);
      } catch {
        return false;
      }
    },
  };
}
