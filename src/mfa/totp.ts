import { createRequire } from 'node:module';
import type * as Otplib from 'otplib';

// otplib (and its hash and base32 libraries) is loaded by the first MFA enrolment or code.
const requireCjs = createRequire(import.meta.url);
let otplibModule: typeof Otplib | undefined;
const otplib = (): typeof Otplib => (otplibModule ??= requireCjs('otplib') as typeof Otplib);

/** docs/design.md §7: what every authenticator app understands. */
export const TOTP_ALGORITHM = 'SHA1';
export const TOTP_DIGITS = 6;
export const TOTP_PERIOD_SECONDS = 30;
/** One step of clock drift either way (epochTolerance is in seconds). */
const DRIFT_SECONDS = TOTP_PERIOD_SECONDS;

/** A new shared secret: 20 random bytes (160 bits, RFC 4226's recommendation), base32. */
export function newTotpSecret(): string {
  return otplib().generateSecret({ length: 20 });
}

/** otpauth://totp/<issuer>:<account>?secret=…&issuer=…&algorithm=SHA1&digits=6&period=30 */
export function otpauthUri(options: { issuer: string; account: string; secret: string }): string {
  const label = `${encodeURIComponent(options.issuer)}:${encodeURIComponent(options.account)}`;
  const query = new URLSearchParams({
    secret: options.secret,
    issuer: options.issuer,
    algorithm: TOTP_ALGORITHM,
    digits: String(TOTP_DIGITS),
    period: String(TOTP_PERIOD_SECONDS),
  });
  return `otpauth://totp/${label}?${query.toString().replace(/\+/g, '%20')}`;
}

/**
 * The time step the OTP belongs to when it is valid now (±1 step) and later than
 * `afterStep`; undefined otherwise. Malformed input is just invalid. The clock is read at
 * call time (Date.now()).
 */
export function verifyTotp(secret: string, otp: string, afterStep?: number): number | undefined {
  if (!/^\d{6}$/.test(otp)) return undefined;
  const currentStep = Math.floor(Date.now() / 1000 / TOTP_PERIOD_SECONDS);
  // Every acceptable step was already used (or the clock went back): nothing can pass.
  if (afterStep !== undefined && afterStep >= currentStep + 1) return undefined;
  try {
    const result = otplib().verifySync({
      secret,
      token: otp,
      algorithm: 'sha1',
      digits: TOTP_DIGITS,
      period: TOTP_PERIOD_SECONDS,
      epochTolerance: DRIFT_SECONDS,
      ...(afterStep !== undefined ? { afterTimeStep: afterStep } : {}),
    });
    // The functional API types TOTP and HOTP results together; a TOTP result carries timeStep.
    return result.valid && 'timeStep' in result ? result.timeStep : undefined;
  } catch {
    return undefined;
  }
}
