// A loopback port for a peer that must be told its port number (slapd, RabbitMQ, Mosquitto,
// PostgreSQL, etcd, haproxy): checked free by binding it, and released. Also "a port nothing
// listens on" for connection-refused cases.
//
// Taken outside the kernel's ephemeral range: a port from that range, once released, can be given
// to any listen(0) or outgoing connection of the test files running beside before the peer binds
// it, and a RabbitMQ node binds its distribution port seconds after it is told (CI:
// "dist_port_already_used ... not_erlang"). Below the range nothing is assigned by the kernel; a
// port is handed out once per process, picked at random so that processes rarely meet.
import { randomInt } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';

/** Ports below the ephemeral range start here (above the well-known and most registered services). */
const TOLD_PORTS_FROM = 10_000;
const ATTEMPTS = 200;

/** The first port of the kernel's ephemeral range (Linux's default when it cannot be read). */
function ephemeralRangeStart(): number {
  try {
    const first = Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]);
    return Number.isInteger(first) && first > 0 ? first : 32_768;
  } catch {
    return 32_768;
  }
}

const toldPortsTo = ephemeralRangeStart();
const handedOut = new Set<number>();

/** Binds `port` (0: the kernel picks) on `host` and releases it; resolves the port, or undefined when it is taken. */
function bindAndRelease(port: number, host: string): Promise<number | undefined> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', (err: NodeJS.ErrnoException) => (err.code === 'EADDRINUSE' || err.code === 'EACCES' ? resolve(undefined) : reject(err)));
    server.listen({ port, host }, () => {
      const bound = (server.address() as { port: number }).port;
      server.close(() => resolve(bound));
    });
  });
}

export async function freePort(host = '127.0.0.1'): Promise<number> {
  const port = toldPortsTo - TOLD_PORTS_FROM >= 1000 ? await freePortIn(TOLD_PORTS_FROM, toldPortsTo, host) : undefined;
  if (port !== undefined) return port;
  // A machine whose ephemeral range leaves no room below it, or a crowded one: the kernel's choice.
  const kernels = await bindAndRelease(0, host);
  if (kernels === undefined) throw new Error(`no free port on ${host}`);
  return kernels;
}

/** A port in [from, to) free on `host` and not handed out before by this process (random picks, bounded); undefined if none was found. */
export async function freePortIn(from: number, to: number, host = '127.0.0.1'): Promise<number | undefined> {
  for (let i = 0; i < ATTEMPTS; i++) {
    const candidate = randomInt(from, to);
    if (handedOut.has(candidate)) continue;
    const port = await bindAndRelease(candidate, host);
    if (port !== undefined) {
      handedOut.add(port);
      return port;
    }
  }
  return undefined;
}
