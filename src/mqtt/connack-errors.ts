// CONNACK refusals: an Error carrying the MQTT 3.1.1 return code, which aedes 2 maps to the
// MQTT 5 reason code (4 → 0x86 bad user name or password, 5 → 0x87 not authorized, ...).
import { isAppError } from '../errors/errors.js';

export type ConnackError = Error & { returnCode: 2 | 3 | 4 | 5 };

export function connackError(returnCode: 2 | 3 | 4 | 5, message: string): ConnackError {
  const err = new Error(message) as ConnackError;
  err.returnCode = returnCode;
  return err;
}

export interface AuthenticationRefusal {
  returnCode: 3 | 4 | 5;
  /** What the refusal's audit line says. */
  reason: string;
  /** A fault rather than a decision of the rules: worth an error line besides the audit line. */
  fault: boolean;
}

/**
 * The CONNACK of a failure of access.authenticate. A throttled attempt (429: the name or the
 * address is locked after failures) is the brute-force limits doing their job, audited like a
 * wrong password; an error line for each would let a client locked out by its own guesses write
 * two lines per attempt (thousands a second) where one says it all.
 */
export function refusalFor(err: unknown): AuthenticationRefusal {
  if (isAppError(err)) {
    if (err.status === 401) return { returnCode: 4, reason: 'bad username or password', fault: false };
    if (err.status === 403) return { returnCode: 5, reason: 'not authorized', fault: false };
    if (err.status === 429) return { returnCode: 3, reason: 'too many failed attempts', fault: false };
  }
  return { returnCode: 3, reason: 'authentication failed', fault: true };
}

