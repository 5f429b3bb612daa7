// The HTTPS listener (docs/https.md): the same Express app as the plain port, TLS 1.2 and 1.3
// only, forward-secret AEAD cipher suites, Strict-Transport-Security on every answer, and a
// certificate that can change under it (setSecureContext: the next handshake uses the new one,
// open connections keep theirs).
import { randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:https';
import type { SecureContextOptions } from 'node:tls';
import type { Express } from 'express';
import type { Logger } from '../log/index.js';
import { HTTP_SERVER_TIMEOUTS, listenerPart } from './http-server.js';
import type { CertificatePair, ServerCertificateSource } from './server-certificate.js';

/**
 * TLS 1.3's three suites, and for TLS 1.2 only ECDHE with AES-GCM or ChaCha20-Poly1305 (Mozilla's
 * "intermediate" list without the finite-field DHE suites): every suite forward secret and AEAD.
 * The client's order decides (honorCipherOrder off): all are strong, and a client without AES
 * instructions can put ChaCha20 first.
 */
export const HTTPS_CIPHERS = [
  'TLS_AES_128_GCM_SHA256',
  'TLS_AES_256_GCM_SHA384',
  'TLS_CHACHA20_POLY1305_SHA256',
  'ECDHE-ECDSA-AES128-GCM-SHA256',
  'ECDHE-RSA-AES128-GCM-SHA256',
  'ECDHE-ECDSA-AES256-GCM-SHA384',
  'ECDHE-RSA-AES256-GCM-SHA384',
  'ECDHE-ECDSA-CHACHA20-POLY1305',
  'ECDHE-RSA-CHACHA20-POLY1305',
].join(':');

/** One year; no includeSubDomains: the gateway's name may be a parent of names it does not serve. */
export const STRICT_TRANSPORT_SECURITY = 'max-age=31536000';

/** How long a client may take for its handshake (Node's default is 120 s). */
const HANDSHAKE_TIMEOUT_MS = 20_000;

export function createHttpsServerPart(deps: { app: Express; host: string; port: number; shutdownTimeoutMs: number; certificate: ServerCertificateSource; log: Logger }) {
  // Fixed for the process, so that session tickets issued before a certificate reload still
  // resume after it (setSecureContext would otherwise make new ticket keys).
  const protocol = { minVersion: 'TLSv1.2', maxVersion: 'TLSv1.3', ciphers: HTTPS_CIPHERS, honorCipherOrder: false, ticketKeys: randomBytes(48) } satisfies SecureContextOptions;
  // The certificate comes at start (the gateway CA is loaded by the pki part); until then the
  // server has none and does not listen.
  const server: Server = createServer({ ...HTTP_SERVER_TIMEOUTS, handshakeTimeout: HANDSHAKE_TIMEOUT_MS, ...protocol }, deps.app);
  // setSecureContext takes the whole option set: what it is not given it resets to its defaults.
  const useCertificate = (pair: CertificatePair) => server.setSecureContext({ ...pair, ...protocol });
  server.prependListener('request', (_req, res) => res.setHeader('Strict-Transport-Security', STRICT_TRANSPORT_SECURITY));
  server.on('tlsClientError', (err, socket) => deps.log.debug('https handshake failed', { remote: socket.remoteAddress, error: err.message }));
  return listenerPart('https', server, {
    ...deps,
    beforeListen: async () => {
      useCertificate(await deps.certificate.load());
      deps.certificate.watch(useCertificate);
    },
    afterClose: () => deps.certificate.close(),
  });
}
