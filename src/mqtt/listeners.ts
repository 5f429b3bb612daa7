// Sockets of the broker's listeners: binding, the verified TLS client certificate, URL paths.
import { createHash } from 'node:crypto';
import type net from 'node:net';
import type tls from 'node:tls';
import type { MqttCredentials } from './mqtt-access.js';

/**
 * Listen backlog of the TCP and TLS listeners (the kernel caps it at net.core.somaxconn).
 * Node's default of 511 overflows when ~1,000 devices reconnect at once after a gateway reboot;
 * dropped SYNs are retried by the client only after 1 s, then 3 s...
 */
const LISTEN_BACKLOG = 2048;

/** The verified client certificate of a TLS socket, if any (unverified ones are ignored). */
export function peerCertificate(socket: tls.TLSSocket): MqttCredentials['certificate'] {
  if (!socket.authorized) return undefined;
  const cert = socket.getPeerCertificate();
  if (!cert || !cert.raw) return undefined;
  const fingerprint256 = createHash('sha256').update(cert.raw).digest('hex');
  const cn: unknown = cert.subject?.CN;
  const commonName = Array.isArray(cn) ? String(cn[0] ?? '') : typeof cn === 'string' ? cn : '';
  return { fingerprint256, commonName };
}

export function pathOf(url: string | undefined): string {
  if (!url) return '';
  const q = url.indexOf('?');
  return q === -1 ? url : url.slice(0, q);
}

export function listen(server: net.Server, port: number, host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const onError = (err: Error) => reject(err);
    server.once('error', onError);
    server.listen({ port, host, backlog: LISTEN_BACKLOG }, () => {
      server.removeListener('error', onError);
      resolve((server.address() as net.AddressInfo).port);
    });
  });
}

