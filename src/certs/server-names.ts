// The names (DNS and IP) the MQTTS server certificate is issued for.
import { isIP } from 'node:net';

export interface ServerNames {
  commonName: string;
  dns: string[];
  ips: string[];
}

const HOSTNAME = /^(\*\.)?[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$/;

export function normalizeServerNames(hostnames: string[]): ServerNames {
  const dns = new Set<string>(['localhost']);
  const ips = new Set<string>(['127.0.0.1', '::1']);
  for (const raw of hostnames) {
    const name = String(raw).trim().toLowerCase();
    if (isIP(name) === 4) ips.add(name);
    else if (isIP(name) === 6) ips.add(canonicalIpv6(name));
    else if (name.length <= 253 && HOSTNAME.test(name)) dns.add(name);
    else throw new Error(`invalid server hostname ${JSON.stringify(raw)}`);
  }
  const first = hostnames[0]?.trim().toLowerCase();
  const commonName = first ? (isIP(first) === 6 ? canonicalIpv6(first) : first) : 'localhost';
  return { commonName, dns: [...dns], ips: [...ips] };
}

function canonicalIpv6(ip: string): string {
  // WHATWG URL serialises IPv6 in RFC 5952 form, the same form pem.ts reports for SAN entries.
  return new URL(`http://[${ip}]/`).hostname.slice(1, -1);
}
