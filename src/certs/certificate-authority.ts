// The gateway's own certificate authority (docs/design.md §9): created on first start in
// the data directory, it signs the MQTTS server certificate and the client
// certificates of self-registering devices. Keys: ca-keys.ts; files: pki-files.ts;
// building certificates: certificate-issuer.ts; CSRs: csr.ts.

import { X509Certificate, createPrivateKey } from 'node:crypto';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { BadRequestError } from '../errors/errors.js';
import { generateRsaKeyPem, loadPrivateKey, spkiDerOf, type CaKey } from './ca-keys.js';
import {
  CLOCK_SKEW_MS,
  DAY_MS,
  OID_COMMON_NAME,
  createCaCertificate,
  issueCertificate,
  subjectKeyIdentifier,
  type IssueRequest,
} from './certificate-issuer.js';
import { parseAndVerifyCsr } from './csr.js';
import { fingerprint, parseCertificateDer, pemToDer, type ParsedCertificate } from './pem.js';
import {
  CA_CERT_FILE,
  CA_KEY_FILE,
  SERVER_CERT_FILE,
  SERVER_KEY_FILE,
  readIfExists,
  removeStaleTempFiles,
  restrictKeyFileMode,
  writeFileAtomic,
} from './pki-files.js';
import { normalizeServerNames, type ServerNames } from './server-names.js';

export { CA_CERT_FILE, CA_KEY_FILE, SERVER_CERT_FILE, SERVER_KEY_FILE } from './pki-files.js';
export { csrSubject } from './csr.js';

/** CA lifetime: long, because replacing it means re-enrolling every device. */
export const DEFAULT_CA_VALIDITY_DAYS = 7300;
export const DEFAULT_SERVER_VALIDITY_DAYS = 825;
export const DEFAULT_CLIENT_VALIDITY_DAYS = 825;
/** The server certificate is re-issued at load when it expires within this window. */
export const SERVER_RENEWAL_WINDOW_DAYS = 30;
const MAX_VALIDITY_DAYS = 36500;
const MAX_PEM_INPUT_LENGTH = 64 * 1024;

export interface CertificateAuthorityOptions {
  /** Directory holding the four PEM files; created with mode 0700 if missing. */
  dir: string;
  /** CN of a newly created CA certificate (default "gatewayd CA"); ignored once the CA exists. */
  commonName?: string;
  /** Names/IPs for the server certificate; the first one becomes its CN (default "localhost"). */
  serverHostnames?: string[];
  /** Validity of a newly created CA certificate in days (default 7300). */
  validityDays?: number;
  /** Validity of (re-)issued server certificates in days (default 825). */
  serverValidityDays?: number;
  /** Clock, injectable for tests. */
  now?: () => Date;
}

export interface SignCsrOptions {
  /** The CSR's subject CN must equal this (the registering device's username). */
  expectedCommonName: string;
  /** Default 825; clamped so the certificate never outlives the CA. */
  validityDays?: number;
}

export interface CertificateAuthority {
  /** PEM of the CA certificate (listed as a non-removable trusted certificate). */
  readonly caCertPem: string;
  /** SHA-256 fingerprint of the CA certificate, lowercase hex (its trusted-certificate id). */
  readonly caFingerprint256: string;
  /** Server certificate and key (PKCS#8 PEM) for the MQTTS listener. */
  readonly serverCertPem: string;
  readonly serverKeyPem: string;
  /** Issues a TLS client certificate for a verified CSR; returns PEM. Throws BadRequestError. */
  signCsr(csrPem: string, opts: SignCsrOptions): string;
  /**
   * Re-issues the server certificate if it is missing, invalid, expiring within 30 days
   * or lacks a configured hostname. Returns true when it did; the caller then reloads
   * its TLS context (e.g. server.setSecureContext) from serverCertPem/serverKeyPem.
   */
  renewServerCertificateIfNeeded(): Promise<boolean>;
  /** Same as the exported decodeBase64Pem, for convenience of the registration service. */
  decodeBase64Pem(input: string): string;
}

/**
 * Loads the CA and server certificate from `opts.dir`, creating whatever is missing.
 * An existing CA is never regenerated (devices trust it); an inconsistent CA
 * (certificate without key, key not matching) is an error for the operator to resolve.
 */
export async function loadOrCreateCertificateAuthority(opts: CertificateAuthorityOptions): Promise<CertificateAuthority> {
  const now = opts.now ?? (() => new Date());
  const caValidityDays = checkValidityDays(opts.validityDays ?? DEFAULT_CA_VALIDITY_DAYS, 'validityDays');
  const serverValidityDays = checkValidityDays(opts.serverValidityDays ?? DEFAULT_SERVER_VALIDITY_DAYS, 'serverValidityDays');
  const serverNames = normalizeServerNames(opts.serverHostnames ?? []);
  const commonName = opts.commonName ?? 'gatewayd CA';
  if (!commonName.trim()) throw new Error('certificate authority commonName must not be empty');

  const dir = path.resolve(opts.dir);
  await fs.mkdir(dir, { recursive: true, mode: 0o700 });
  await removeStaleTempFiles(dir);

  const files = {
    caKey: path.join(dir, CA_KEY_FILE),
    caCert: path.join(dir, CA_CERT_FILE),
    serverKey: path.join(dir, SERVER_KEY_FILE),
    serverCert: path.join(dir, SERVER_CERT_FILE),
  };

  let caKeyPem = await readIfExists(files.caKey);
  let caCertPem = await readIfExists(files.caCert);
  if (caCertPem !== undefined && caKeyPem === undefined) {
    throw new Error(`${files.caCert} exists but ${files.caKey} is missing; refusing to replace the CA that devices trust`);
  }
  if (caKeyPem === undefined) {
    caKeyPem = await generateRsaKeyPem();
    await writeFileAtomic(files.caKey, caKeyPem, 0o600);
  } else {
    await restrictKeyFileMode(files.caKey);
  }
  const caKey = loadPrivateKey(caKeyPem, files.caKey);
  if (caCertPem === undefined) {
    // Also the recovery path for a power cut between writing the CA key and its
    // certificate: same key and subject, so nothing issued before is invalidated.
    caCertPem = createCaCertificate(caKey, commonName, now(), caValidityDays);
    await writeFileAtomic(files.caCert, caCertPem, 0o644);
  }
  let caX509: X509Certificate;
  try {
    caX509 = new X509Certificate(caCertPem);
  } catch {
    throw new Error(`${files.caCert} is not a valid certificate`);
  }
  if (!caX509.checkPrivateKey(caKey.keyObject)) {
    throw new Error(`${files.caKey} does not match ${files.caCert}`);
  }

  const ca = new GatewayCertificateAuthority({
    caCertPem,
    caX509,
    caInfo: parseCertificateDer(caX509.raw),
    caKey,
    files,
    serverNames,
    serverValidityDays,
    now,
  });
  await ca.loadServerCertificate();
  return ca;
}

/**
 * Accepts a PEM document either as is or Base64-encoded (how registration requests
 * carry CSRs) and returns the PEM text. Does not check the PEM type; consumers do.
 */
export function decodeBase64Pem(input: string): string {
  if (typeof input !== 'string' || input.length === 0) throw new BadRequestError('expected a PEM document or Base64-encoded PEM');
  if (input.length > MAX_PEM_INPUT_LENGTH) throw new BadRequestError(`PEM input too large (max ${MAX_PEM_INPUT_LENGTH} characters)`);
  const trimmed = input.trim();
  if (trimmed.startsWith('-----BEGIN ')) return trimmed + '\n';
  const compact = trimmed.replace(/\s+/g, '').replace(/-/g, '+').replace(/_/g, '/'); // tolerate base64url
  if (/^[A-Za-z0-9+/]+={0,2}$/.test(compact)) {
    const decoded = Buffer.from(compact, 'base64').toString('utf8').trim();
    // Only printable ASCII and line breaks belong in PEM.
    if (decoded.startsWith('-----BEGIN ') && /^[\x20-\x7e\r\n\t]*$/.test(decoded)) return decoded + '\n';
  }
  throw new BadRequestError('expected a PEM document or Base64-encoded PEM');
}

/** Base64 of PEM text, the form registration responses carry certificates in. */
export function encodeBase64Pem(pem: string): string {
  return Buffer.from(pem, 'utf8').toString('base64');
}

// ---------------------------------------------------------------------------

interface CaFiles {
  caKey: string;
  caCert: string;
  serverKey: string;
  serverCert: string;
}

class GatewayCertificateAuthority implements CertificateAuthority {
  readonly caCertPem: string;
  readonly caFingerprint256: string;
  private serverCert = '';
  private serverKey = '';
  private readonly caX509: X509Certificate;
  private readonly caInfo: ParsedCertificate;
  private readonly caKey: CaKey;
  private readonly caKeyIdentifier: string;
  private readonly files: CaFiles;
  private readonly serverNames: ServerNames;
  private readonly serverValidityDays: number;
  private readonly now: () => Date;

  constructor(init: {
    caCertPem: string;
    caX509: X509Certificate;
    caInfo: ParsedCertificate;
    caKey: CaKey;
    files: CaFiles;
    serverNames: ServerNames;
    serverValidityDays: number;
    now: () => Date;
  }) {
    this.caCertPem = init.caCertPem;
    this.caX509 = init.caX509;
    this.caInfo = init.caInfo;
    this.caKey = init.caKey;
    this.files = init.files;
    this.serverNames = init.serverNames;
    this.serverValidityDays = init.serverValidityDays;
    this.now = init.now;
    this.caFingerprint256 = fingerprint(init.caX509.raw, 'sha256');
    // AKI of issued certificates must equal the CA's SKI so chain building picks this CA.
    this.caKeyIdentifier = init.caInfo.subjectKeyIdentifier ?? subjectKeyIdentifier(init.caKey.spkiDer);
  }

  get serverCertPem(): string {
    return this.serverCert;
  }

  get serverKeyPem(): string {
    return this.serverKey;
  }

  decodeBase64Pem(input: string): string {
    return decodeBase64Pem(input);
  }

  async loadServerCertificate(): Promise<void> {
    const cert = await readIfExists(this.files.serverCert);
    const key = await readIfExists(this.files.serverKey);
    if (key !== undefined) await restrictKeyFileMode(this.files.serverKey);
    if (cert !== undefined && key !== undefined && !this.serverRenewalReason(cert, key)) {
      this.serverCert = cert;
      this.serverKey = key;
      return;
    }
    await this.issueServerCertificate();
  }

  async renewServerCertificateIfNeeded(): Promise<boolean> {
    if (!this.serverRenewalReason(this.serverCert, this.serverKey)) return false;
    await this.issueServerCertificate();
    return true;
  }

  signCsr(csrPem: string, opts: SignCsrOptions): string {
    if (typeof csrPem !== 'string' || csrPem.length > MAX_PEM_INPUT_LENGTH) throw new BadRequestError('invalid CSR: expected a PEM string');
    const validityDays = opts.validityDays ?? DEFAULT_CLIENT_VALIDITY_DAYS;
    if (!Number.isInteger(validityDays) || validityDays < 1 || validityDays > MAX_VALIDITY_DAYS) {
      throw new BadRequestError(`validityDays must be an integer between 1 and ${MAX_VALIDITY_DAYS}`);
    }
    const der = pemToDer(csrPem, ['CERTIFICATE REQUEST', 'NEW CERTIFICATE REQUEST'], 'invalid CSR');
    const csr = parseAndVerifyCsr(der);
    if (csr.commonName !== opts.expectedCommonName) {
      throw new BadRequestError(
        `CSR common name ${JSON.stringify(csr.commonName.slice(0, 128))} does not match the expected ${JSON.stringify(opts.expectedCommonName)}`,
      );
    }
    const now = this.now();
    return this.issue({
      spkiDer: csr.spkiDer,
      subject: [{ oid: OID_COMMON_NAME, value: csr.commonName }],
      notBefore: new Date(now.getTime() - CLOCK_SKEW_MS),
      notAfter: this.clampToCa(new Date(now.getTime() + validityDays * DAY_MS)),
      extensions: [
        { name: 'basicConstraints', cA: false, critical: true },
        { name: 'keyUsage', digitalSignature: true, keyEncipherment: true, critical: true },
        { name: 'extKeyUsage', clientAuth: true },
      ],
    });
  }

  /** Why the server certificate must be re-issued, or undefined when it is fine. */
  private serverRenewalReason(certPem: string, keyPem: string): string | undefined {
    try {
      const x509 = new X509Certificate(certPem);
      if (!x509.checkIssued(this.caX509) || !x509.verify(this.caX509.publicKey)) return 'not issued by this CA';
      if (!x509.checkPrivateKey(createPrivateKey(keyPem))) return 'key does not match'; // e.g. power cut between the two writes
      const info = parseCertificateDer(x509.raw);
      const now = this.now().getTime();
      const lifetime = info.notAfter.getTime() - info.notBefore.getTime();
      const window = Math.min(SERVER_RENEWAL_WINDOW_DAYS * DAY_MS, lifetime / 2);
      if (info.notAfter.getTime() - now < window) return 'expiring';
      if (info.notBefore.getTime() > now + CLOCK_SKEW_MS) return 'not yet valid'; // issued while the clock was wrong
      if (info.subject.commonName !== this.serverNames.commonName) return 'hostnames changed';
      const present = new Set(info.alternativeNames.map((n) => n.toLowerCase()));
      if (![...this.serverNames.dns, ...this.serverNames.ips].every((n) => present.has(n))) return 'hostnames changed';
      return undefined;
    } catch {
      return 'unreadable';
    }
  }

  private async issueServerCertificate(): Promise<void> {
    // A fresh key on every re-issue: cheap with OpenSSL and limits exposure of old keys.
    const keyPem = await generateRsaKeyPem();
    const now = this.now();
    const certPem = this.issue({
      spkiDer: spkiDerOf(keyPem),
      subject: [{ oid: OID_COMMON_NAME, value: this.serverNames.commonName }],
      notBefore: new Date(now.getTime() - CLOCK_SKEW_MS),
      notAfter: this.clampToCa(new Date(now.getTime() + this.serverValidityDays * DAY_MS)),
      extensions: [
        { name: 'basicConstraints', cA: false, critical: true },
        { name: 'keyUsage', digitalSignature: true, keyEncipherment: true, critical: true },
        { name: 'extKeyUsage', serverAuth: true },
        {
          name: 'subjectAltName',
          altNames: [
            ...this.serverNames.dns.map((value) => ({ type: 2, value })),
            ...this.serverNames.ips.map((ip) => ({ type: 7, ip })),
          ],
        },
      ],
    });
    // Key first: a power cut in between leaves a mismatching pair, which the next load re-issues.
    await writeFileAtomic(this.files.serverKey, keyPem, 0o600);
    await writeFileAtomic(this.files.serverCert, certPem, 0o644);
    this.serverKey = keyPem;
    this.serverCert = certPem;
  }

  private clampToCa(notAfter: Date): Date {
    return notAfter.getTime() > this.caInfo.notAfter.getTime() ? new Date(this.caInfo.notAfter.getTime()) : notAfter;
  }

  private issue(req: Omit<IssueRequest, 'issuer'>): string {
    return issueCertificate({
      ...req,
      issuer: { name: this.caInfo.subjectAsn1, keyIdentifier: this.caKeyIdentifier, key: this.caKey.keyObject },
    });
  }
}

function checkValidityDays(days: number, name: string): number {
  if (!Number.isInteger(days) || days < 1 || days > MAX_VALIDITY_DAYS) {
    throw new Error(`${name} must be an integer between 1 and ${MAX_VALIDITY_DAYS}`);
  }
  return days;
}
