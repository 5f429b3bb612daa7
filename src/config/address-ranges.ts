// Address ranges of the configuration (`http.plainAllowedFrom`): CIDR blocks or single
// addresses, IPv4 or IPv6, checked with net.BlockList (which also matches IPv4-mapped IPv6
// addresses such as ::ffff:127.0.0.1 against IPv4 ranges, as a dual-stack listener reports them).
import { BlockList, isIP } from 'node:net';

/** Parses the list; throws an Error naming the first entry that is not an address or CIDR block. */
export function parseAddressRanges(entries: string[]): BlockList {
  const list = new BlockList();
  for (const entry of entries) {
    const [address = '', prefix, extra] = entry.trim().split('/');
    const family = isIP(address);
    const bits = family === 4 ? 32 : 128;
    const length = prefix === undefined ? bits : /^\d{1,3}$/.test(prefix) ? Number(prefix) : NaN;
    if (family === 0 || extra !== undefined || !(length >= 0 && length <= bits)) {
      throw new Error(`${JSON.stringify(entry)} is not an IP address or CIDR block (such as 192.168.10.0/24 or fd00::/8)`);
    }
    list.addSubnet(address, length, family === 4 ? 'ipv4' : 'ipv6');
  }
  return list;
}

/** Whether `address` (as a socket reports it) lies in one of the ranges. */
export function inAddressRanges(list: BlockList, address: string | undefined): boolean {
  if (!address) return false;
  const family = isIP(address);
  return family !== 0 && list.check(address, family === 4 ? 'ipv4' : 'ipv6');
}
