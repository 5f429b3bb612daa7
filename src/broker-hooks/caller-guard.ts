import { createHash, timingSafeEqual } from 'node:crypto';
import { isIPv4 } from 'node:net';
import type { Request, RequestHandler } from 'express';
import type { GatewayConfig } from '../config/index.js';
import { inAddressRanges, parseAddressRanges } from '../config/address-ranges.js';
import { ForbiddenError, TooManyRequestsError } from '../errors/errors.js';
import type { Logger } from '../log/index.js';
import { TokenBucket } from '../mqtt/limits.js';

/** The header a broker that can send headers (EMQX) carries the shared secret in. */
export const SECRET_HEADER = 'x-gatewayd-hook-secret';

/** `::ffff:10.0.0.1` (an IPv4 client of a dual-stack socket) as `10.0.0.1`. */
export function plainAddress(address: string): string {
  return address.startsWith('::ffff:') && isIPv4(address.slice(7)) ? address.slice(7) : address;
}

/** The secret the caller sent: the header, else the password of HTTP Basic (a URL's userinfo: RabbitMQ, VerneMQ). */
function presentedSecret(req: Request): string | undefined {
  const header = req.get(SECRET_HEADER);
  if (header !== undefined) return header;
  const auth = req.get('authorization');
  if (!auth || !/^basic /i.test(auth)) return undefined;
  const decoded = Buffer.from(auth.slice(6).trim(), 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  return colon < 0 ? undefined : decoded.slice(colon + 1);
}

/** Same length digests, compared in constant time: neither length nor content leaks. */
function sameSecret(given: string, expected: string): boolean {
  const a = createHash('sha256').update(given).digest();
  const b = createHash('sha256').update(expected).digest();
  return timingSafeEqual(a, b);
}

/**
 * Only the cluster may call the hooks, and not too often. Runs before the body is parsed or
 * validated: a refused caller gets 403 and learns nothing, not even about request schemas.
 * 1. hooks enabled; 2. the socket's peer address (never a forwarded-for header) in allowFrom;
 * 3. the shared secret, when one is configured; 4. the hooks' rate limit (429).
 */
export function createCallerGuard(deps: { config: GatewayConfig['brokerHooks']; log: Logger }): RequestHandler {
  const { config, log } = deps;
  const allowed = parseAddressRanges(config.allowFrom);
  const bucket = new TokenBucket(config.maxRequestsPerSecond);
  // A refused or throttled caller is logged once a minute at most per address (a misconfigured
  // or runaway cluster retries a lot; its requests are not logged one by one).
  const lastWarned = new Map<string, number>();
  const warn = (address: string, why: string) => {
    const now = Date.now();
    if ((lastWarned.get(address) ?? 0) > now - 60_000) return;
    if (lastWarned.size > 1000) lastWarned.clear();
    lastWarned.set(address, now);
    log.warn('broker hook call refused', { remote: address, reason: why });
  };

  return (req, _res, next) => {
    if (!config.enabled) throw new ForbiddenError('the broker hooks are disabled (brokerHooks.enabled)');
    const address = plainAddress(req.socket.remoteAddress ?? '');
    if (!inAddressRanges(allowed, address)) {
      warn(address, 'address not in brokerHooks.allowFrom');
      throw new ForbiddenError('this address may not call the broker hooks');
    }
    if (config.secret) {
      const given = presentedSecret(req);
      if (given === undefined || !sameSecret(given, config.secret)) {
        warn(address, 'missing or wrong hook secret');
        throw new ForbiddenError('this caller may not call the broker hooks');
      }
    }
    if (!bucket.take()) {
      warn(address, `over brokerHooks.maxRequestsPerSecond (${config.maxRequestsPerSecond})`);
      throw new TooManyRequestsError('broker hook rate limit exceeded', 1);
    }
    next();
  };
}
