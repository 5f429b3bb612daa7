// The certificate the HTTPS listener presents: the gateway CA's server certificate (the one
// MQTTS presents, for the names of mqtt.serverHostnames), or the operator's files
// (http.tlsCertFile / http.tlsKeyFile, from the plant's PKI), watched so that a renewed pair is
// used from the next handshake on, without a restart.
import { X509Certificate } from 'node:crypto';
import { watch, type FSWatcher } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { basename, dirname } from 'node:path';
import { createSecureContext } from 'node:tls';
import type { Logger } from '../log/index.js';

export interface CertificatePair {
  cert: string;
  key: string;
}

export interface ServerCertificateSource {
  /** The pair to use now; the operator's files are read and checked (throws an Error naming the file). */
  load(): Promise<CertificatePair>;
  /** Calls `onChange` with a checked new pair whenever the operator's files change (never for the CA's). */
  watch(onChange: (pair: CertificatePair) => void): void;
  close(): void;
}

/** Editors and tools replace a certificate and its key in several steps: one reload after they settle. */
const DEFAULT_DEBOUNCE_MS = 200;

export function createServerCertificateSource(deps: {
  certFile: string;
  keyFile: string;
  /** The gateway CA's server certificate and key (read when no files are configured). */
  fromCa: () => CertificatePair;
  log: Logger;
  debounceMs?: number;
}): ServerCertificateSource {
  const { certFile, keyFile, log } = deps;
  const fromFiles = certFile !== '';
  const watchers: FSWatcher[] = [];
  let timer: NodeJS.Timeout | undefined;
  let current: CertificatePair | undefined;

  async function readPair(): Promise<CertificatePair> {
    const read = async (file: string, what: string) => {
      try {
        return await readFile(file, 'utf8');
      } catch (err) {
        throw new Error(`cannot read the HTTPS ${what} ${file}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`);
      }
    };
    const pair = { cert: await read(certFile, 'certificate (http.tlsCertFile)'), key: await read(keyFile, 'key (http.tlsKeyFile)') };
    try {
      // What the listener will do with them: a key that does not match fails here, not at a handshake.
      createSecureContext(pair);
    } catch (err) {
      throw new Error(`the HTTPS certificate ${certFile} and key ${keyFile} cannot be used together: ${(err as Error).message}`);
    }
    return pair;
  }

  function describe(pair: CertificatePair): Record<string, unknown> {
    const x509 = new X509Certificate(pair.cert);
    return { subject: x509.subject.replace(/\n/g, ', '), notAfter: new Date(x509.validTo).toISOString(), fingerprint256: x509.fingerprint256 };
  }

  function warnIfExpired(pair: CertificatePair): void {
    const x509 = new X509Certificate(pair.cert);
    if (Date.parse(x509.validTo) < Date.now()) log.warn('the HTTPS certificate has expired: browsers and clients will refuse it', { file: certFile, notAfter: x509.validTo });
  }

  async function reload(onChange: (pair: CertificatePair) => void): Promise<void> {
    let pair: CertificatePair;
    try {
      pair = await readPair();
    } catch (err) {
      // A half-written file or a certificate waiting for its key: the next change event retries.
      log.warn('HTTPS certificate files changed but cannot be used yet: the previous certificate stays in use', { error: (err as Error).message });
      return;
    }
    if (current && pair.cert === current.cert && pair.key === current.key) return;
    current = pair;
    onChange(pair);
    warnIfExpired(pair);
    log.info('HTTPS certificate reloaded', { file: certFile, ...describe(pair) });
  }

  return {
    async load() {
      if (!fromFiles) return deps.fromCa();
      current = await readPair();
      warnIfExpired(current);
      log.info('HTTPS uses the certificate files of http.tlsCertFile', { file: certFile, ...describe(current) });
      return current;
    },
    watch(onChange) {
      if (!fromFiles) return;
      const names = new Set([basename(certFile), basename(keyFile)]);
      // The directories, not the files: certbot, Kubernetes secrets and atomic writers replace
      // the file (a new inode), which a watch on the old file would never report.
      for (const dir of new Set([dirname(certFile), dirname(keyFile)])) {
        const watcher = watch(dir, { persistent: false }, (_event, name) => {
          if (name !== null && !names.has(String(name))) return;
          clearTimeout(timer);
          timer = setTimeout(() => void reload(onChange), deps.debounceMs ?? DEFAULT_DEBOUNCE_MS);
          timer.unref();
        });
        watcher.on('error', (err) => log.warn('watching the HTTPS certificate directory failed: certificate changes need a restart', { dir, error: err.message }));
        watchers.push(watcher);
      }
    },
    close() {
      clearTimeout(timer);
      for (const w of watchers.splice(0)) w.close();
    },
  };
}
