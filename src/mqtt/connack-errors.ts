// CONNACK refusals: an Error carrying the MQTT 3.1.1 return code, which aedes 2 maps to the
// MQTT 5 reason code (4 → 0x86 bad user name or password, 5 → 0x87 not authorized, ...).
import { isAppError } from '../errors/errors.js';

export type ConnackError = Error & { returnCode: 2 | 3 | 4 | 5 };

export function connackError(returnCode: 2 | 3 | 4 | 5, message: string): ConnackError {
  const err = new Error(message) as ConnackError;
  err.returnCode = returnCode;
  return err;
}

/** CONNACK code for a failure of access.authenticate. */
export function returnCodeFor(err: unknown): 3 | 4 | 5 {
  if (isAppError(err)) {
    if (err.status === 401) return 4;
    if (err.status === 403) return 5;
  }
  return 3;
}

