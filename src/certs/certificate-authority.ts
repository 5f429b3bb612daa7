// The gateway's own certificate authority (DESIGN.md §9): created on first start in
// the data directory, it signs the MQTTS server certificate and the client
// certificates of self-registering devices.
//
// Keys come from Node's crypto (OpenSSL keygen; forge's pure-JS keygen takes many
// seconds on a 2-core gateway). Certificates are assembled and signed with forge.
// forge's TBSCertificate builder only knows RSA public keys, so the subject's
// SubjectPublicKeyInfo is spliced into the built structure as raw DER: that lets
// devices with EC (e.g. secure-element P-256) or Ed25519 keys register too.

import {
  X509Certificate,
  createHash,
  createPrivateKey,
  createPublicKey,
  generateKeyPair,
  randomBytes,
  verify as verifySignature,
  type KeyObject,
} from 'node:crypto';
import { promises as fs } from 'node:fs';
import { isIP } from 'node:net';
import path from 'node:path';
import { promisify } from 'node:util';
import forge from 'node-forge';
import { BadRequestError } from '../errors/errors.js';
import {
  children,
  derToPem,
  fingerprint,
  isContext,
  isUniversal,
  oidOf,
  parseCertificateDer,
  parseDer,
  parseName,
  pemToDer,
  primitive,
  type NameAttribute,
  type ParsedCertificate,
} from './pem.js';

export const CA_KEY_FILE = 'ca.key.pem';
export const CA_CERT_FILE = 'ca.cert.pem';
export const SERVER_KEY_FILE = 'server.key.pem';
export const SERVER_CERT_FILE = 'server.cert.pem';

const DAY_MS = 24 * 60 * 60 * 1000;
/** CA lifetime: long, because replacing it means re-enrolling every device. */
export const DEFAULT_CA_VALIDITY_DAYS = 7300;
export const DEFAULT_SERVER_VALIDITY_DAYS = 825;
export const DEFAULT_CLIENT_VALIDITY_DAYS = 825;
/** The server certificate is re-issued at load when it expires within this window. */
export const SERVER_RENEWAL_WINDOW_DAYS = 30;
/** notBefore is backdated so peers with slightly slow clocks accept fresh certificates. */
const CLOCK_SKEW_MS = 5 * 60 * 1000;
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

interface CaKey {
  keyObject: KeyObject;
  forgeKey: forge.pki.rsa.PrivateKey;
  spkiDer: Buffer;
}

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
      issuer: { name: this.caInfo.subjectAsn1, keyIdentifier: this.caKeyIdentifier, key: this.caKey.forgeKey },
    });
  }
}

// ---------------------------------------------------------------------------
// Certificate construction

const OID_COMMON_NAME = '2.5.4.3';
const OID_ORGANIZATION = '2.5.4.10';

interface IssueRequest {
  spkiDer: Buffer;
  subject: { oid: string; value: string }[];
  notBefore: Date;
  notAfter: Date;
  /** forge extension descriptors; SKI/AKI are added here. */
  extensions: object[];
  issuer: {
    /** Issuer Name as parsed from the CA certificate (byte-identical); undefined = self-signed. */
    name: forge.asn1.Asn1 | undefined;
    keyIdentifier: string;
    key: forge.pki.rsa.PrivateKey;
  };
}

// Not declared by @types/node-forge.
const getTBSCertificate = (forge.pki as unknown as { getTBSCertificate(cert: forge.pki.Certificate): forge.asn1.Asn1 })
  .getTBSCertificate;
const TBS_ISSUER_INDEX = 3;
const TBS_SPKI_INDEX = 6;

function issueCertificate(req: IssueRequest): string {
  const { asn1 } = forge;
  const cert = forge.pki.createCertificate();
  cert.serialNumber = randomSerialHex();
  cert.validity.notBefore = req.notBefore;
  cert.validity.notAfter = req.notAfter;
  // UTF8String (RFC 5280 §4.1.2.6): device usernames may hold characters PrintableString lacks.
  const attrs = req.subject.map((a) => ({ type: a.oid, value: a.value, valueTagClass: asn1.Type.UTF8 })) as unknown as forge.pki.CertificateField[];
  cert.setSubject(attrs);
  cert.setIssuer(attrs); // replaced below unless self-signed
  // Placeholder so forge can build the TBS; the real SubjectPublicKeyInfo is spliced in.
  cert.publicKey = forge.pki.setRsaPublicKey(req.issuer.key.n, req.issuer.key.e);
  cert.siginfo.algorithmOid = forge.pki.oids['sha256WithRSAEncryption']!;
  cert.setExtensions([
    ...req.extensions,
    {
      name: 'subjectKeyIdentifier',
      value: asn1.create(asn1.Class.UNIVERSAL, asn1.Type.OCTETSTRING, false, subjectKeyIdentifier(req.spkiDer)),
    },
    { name: 'authorityKeyIdentifier', keyIdentifier: req.issuer.keyIdentifier },
  ]);
  const tbs = getTBSCertificate(cert);
  const tbsFields = tbs.value as forge.asn1.Asn1[];
  tbsFields[TBS_SPKI_INDEX] = parseDer(req.spkiDer);
  if (req.issuer.name) tbsFields[TBS_ISSUER_INDEX] = req.issuer.name;

  const tbsDer = asn1.toDer(tbs).getBytes();
  const md = forge.md.sha256.create();
  md.update(tbsDer);
  const signature = req.issuer.key.sign(md);
  const certificate = asn1.create(asn1.Class.UNIVERSAL, asn1.Type.SEQUENCE, true, [
    tbs,
    asn1.create(asn1.Class.UNIVERSAL, asn1.Type.SEQUENCE, true, [
      asn1.create(asn1.Class.UNIVERSAL, asn1.Type.OID, false, asn1.oidToDer(cert.siginfo.algorithmOid).getBytes()),
      asn1.create(asn1.Class.UNIVERSAL, asn1.Type.NULL, false, ''),
    ]),
    asn1.create(asn1.Class.UNIVERSAL, asn1.Type.BITSTRING, false, '\x00' + signature),
  ]);
  return derToPem(Buffer.from(asn1.toDer(certificate).getBytes(), 'binary'), 'CERTIFICATE');
}

function createCaCertificate(key: CaKey, commonName: string, now: Date, validityDays: number): string {
  const keyIdentifier = subjectKeyIdentifier(key.spkiDer);
  return issueCertificate({
    spkiDer: key.spkiDer,
    subject: [
      { oid: OID_ORGANIZATION, value: 'gatewayd' },
      { oid: OID_COMMON_NAME, value: commonName },
    ],
    notBefore: new Date(now.getTime() - CLOCK_SKEW_MS),
    notAfter: new Date(now.getTime() + validityDays * DAY_MS),
    extensions: [
      // pathLen 0: this CA signs end-entity certificates only, never sub-CAs.
      { name: 'basicConstraints', cA: true, pathLenConstraint: 0, critical: true },
      { name: 'keyUsage', keyCertSign: true, cRLSign: true, digitalSignature: true, critical: true },
    ],
    issuer: { name: undefined, keyIdentifier, key: key.forgeKey },
  });
}

/** RFC 5280 §4.2.1.2 method 1: SHA-1 of the subjectPublicKey BIT STRING. Binary string. */
function subjectKeyIdentifier(spkiDer: Buffer): string {
  const spki = children(parseDer(spkiDer), 'SubjectPublicKeyInfo');
  const bits = Buffer.from(primitive(spki[1], 'subjectPublicKey'), 'binary').subarray(1);
  return createHash('sha1').update(bits).digest('binary');
}

/** Positive 16-byte serial; first byte 0x01..0x7f keeps the DER INTEGER minimal and positive. */
function randomSerialHex(): string {
  const bytes = randomBytes(16);
  bytes[0] = bytes[0]! & 0x7f || 0x01;
  return bytes.toString('hex');
}

// ---------------------------------------------------------------------------
// CSR handling

/** Signature algorithms accepted on CSRs (proof of possession), by OID. */
const CSR_SIGNATURE_ALGORITHMS: Record<string, { hash: string | null; keyType: string }> = {
  '1.2.840.113549.1.1.11': { hash: 'sha256', keyType: 'rsa' },
  '1.2.840.113549.1.1.12': { hash: 'sha384', keyType: 'rsa' },
  '1.2.840.113549.1.1.13': { hash: 'sha512', keyType: 'rsa' },
  '1.2.840.10045.4.3.2': { hash: 'sha256', keyType: 'ec' },
  '1.2.840.10045.4.3.3': { hash: 'sha384', keyType: 'ec' },
  '1.2.840.10045.4.3.4': { hash: 'sha512', keyType: 'ec' },
  '1.3.101.112': { hash: null, keyType: 'ed25519' },
};
const ACCEPTED_CURVES = new Set(['prime256v1', 'secp384r1', 'secp521r1']);

interface VerifiedCsr {
  commonName: string;
  spkiDer: Buffer;
  subject: NameAttribute[];
}

function parseAndVerifyCsr(der: Buffer): VerifiedCsr {
  let criDer: Buffer;
  let cri: forge.asn1.Asn1[];
  let sigOid: string;
  let signature: Buffer;
  try {
    const top = children(parseDer(der), 'CertificationRequest');
    if (top.length !== 3) throw new Error('CertificationRequest');
    cri = children(top[0], 'CertificationRequestInfo');
    // Verify over the bytes exactly as received, not a re-encoding.
    const criElement = readElement(der, readElement(der, 0).contentStart);
    criDer = der.subarray(criElement.start, criElement.end);
    sigOid = oidOf(children(top[1], 'signatureAlgorithm')[0], 'signatureAlgorithm');
    if (!isUniversal(top[2], forge.asn1.Type.BITSTRING)) throw new Error('signature');
    const sigBits = Buffer.from(primitive(top[2], 'signature'), 'binary');
    if (sigBits[0] !== 0) throw new Error('signature');
    signature = sigBits.subarray(1);
    if (cri.length < 3 || !isUniversal(cri[0], forge.asn1.Type.INTEGER) || primitive(cri[0], 'version') !== '\x00') {
      throw new Error('version');
    }
    if (cri[3] !== undefined && !isContext(cri[3], 0)) throw new Error('attributes');
  } catch {
    throw new BadRequestError('invalid CSR: malformed PKCS#10 structure');
  }

  const spkiDer = Buffer.from(forge.asn1.toDer(cri[2]!).getBytes(), 'binary');
  let key: KeyObject;
  try {
    key = createPublicKey({ key: spkiDer, format: 'der', type: 'spki' });
  } catch {
    throw new BadRequestError('invalid CSR: unreadable public key');
  }
  checkKeyPolicy(key);
  const alg = CSR_SIGNATURE_ALGORITHMS[sigOid];
  if (!alg) throw new BadRequestError(`invalid CSR: unsupported signature algorithm ${sigOid}`);
  if (alg.keyType !== key.asymmetricKeyType) throw new BadRequestError('invalid CSR: signature algorithm does not match the key');
  let valid = false;
  try {
    valid = verifySignature(alg.hash, criDer, key, signature);
  } catch {
    valid = false;
  }
  if (!valid) throw new BadRequestError('invalid CSR: signature verification failed');

  let subject: NameAttribute[];
  try {
    subject = parseName(cri[1]);
  } catch {
    throw new BadRequestError('invalid CSR: malformed subject');
  }
  const commonNames = subject.filter((a) => a.oid === OID_COMMON_NAME).map((a) => a.value);
  if (commonNames.length !== 1 || !commonNames[0]) {
    throw new BadRequestError('invalid CSR: subject must contain exactly one non-empty common name (CN)');
  }
  return { commonName: commonNames[0], spkiDer, subject };
}

/** Short names of the usual subject attributes (RFC 4514); others are shown by OID. */
const SUBJECT_ATTRIBUTE_NAMES: Record<string, string> = {
  '2.5.4.3': 'CN',
  '2.5.4.6': 'C',
  '2.5.4.7': 'L',
  '2.5.4.8': 'ST',
  '2.5.4.10': 'O',
  '2.5.4.11': 'OU',
  '2.5.4.5': 'serialNumber',
  '0.9.2342.19200300.100.1.25': 'DC',
  '1.2.840.113549.1.9.1': 'emailAddress',
};

/**
 * The subject a CSR asks for, as text ("CN=press-7, O=Acme, OU=Line 3"), for the operator who
 * decides on a registration. Only the CN goes into the issued certificate.
 */
export function csrSubject(csrPem: string): string {
  const der = pemToDer(csrPem, ['CERTIFICATE REQUEST', 'NEW CERTIFICATE REQUEST'], 'invalid CSR');
  return parseAndVerifyCsr(der)
    .subject.map((a) => `${SUBJECT_ATTRIBUTE_NAMES[a.oid] ?? a.oid}=${a.value}`)
    .join(', ');
}

function checkKeyPolicy(key: KeyObject): void {
  const details = key.asymmetricKeyDetails ?? {};
  switch (key.asymmetricKeyType) {
    case 'rsa':
      if ((details.modulusLength ?? 0) < 2048 || (details.modulusLength ?? 0) > 8192) {
        throw new BadRequestError('invalid CSR: RSA keys must be 2048 to 8192 bits');
      }
      return;
    case 'ec':
      if (!ACCEPTED_CURVES.has(details.namedCurve ?? '')) {
        throw new BadRequestError('invalid CSR: EC keys must use P-256, P-384 or P-521');
      }
      return;
    case 'ed25519':
      return;
    default:
      throw new BadRequestError(`invalid CSR: unsupported key type ${key.asymmetricKeyType ?? 'unknown'}`);
  }
}

/** Header/content bounds of the DER element beginning at `offset` (definite lengths only). */
function readElement(der: Buffer, offset: number): { start: number; contentStart: number; end: number } {
  if (offset + 2 > der.length || (der[offset]! & 0x1f) === 0x1f) throw new Error('DER');
  const first = der[offset + 1]!;
  let length = first;
  let header = 2;
  if (first & 0x80) {
    const n = first & 0x7f;
    if (n === 0 || n > 4 || offset + 2 + n > der.length) throw new Error('DER');
    length = 0;
    for (let i = 0; i < n; i++) length = length * 256 + der[offset + 2 + i]!;
    header += n;
  }
  const end = offset + header + length;
  if (end > der.length) throw new Error('DER');
  return { start: offset, contentStart: offset + header, end };
}

// ---------------------------------------------------------------------------
// Keys, names, files

async function generateRsaKeyPem(): Promise<string> {
  const { privateKey } = await promisify(generateKeyPair)('rsa', {
    modulusLength: 2048,
    publicExponent: 0x10001,
    publicKeyEncoding: { type: 'spki', format: 'pem' },
    privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
  });
  return privateKey;
}

function loadPrivateKey(pem: string, file: string): CaKey {
  try {
    const keyObject = createPrivateKey(pem);
    if (keyObject.asymmetricKeyType !== 'rsa') throw new Error('not RSA');
    return { keyObject, forgeKey: forge.pki.privateKeyFromPem(pem), spkiDer: spkiDerOf(keyObject) };
  } catch (err) {
    throw new Error(`${file} is not a readable RSA private key: ${(err as Error).message}`);
  }
}

function spkiDerOf(key: string | KeyObject): Buffer {
  return createPublicKey(key).export({ type: 'spki', format: 'der' });
}

interface ServerNames {
  commonName: string;
  dns: string[];
  ips: string[];
}

const HOSTNAME = /^(\*\.)?[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$/;

function normalizeServerNames(hostnames: string[]): ServerNames {
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

function checkValidityDays(days: number, name: string): number {
  if (!Number.isInteger(days) || days < 1 || days > MAX_VALIDITY_DAYS) {
    throw new Error(`${name} must be an integer between 1 and ${MAX_VALIDITY_DAYS}`);
  }
  return days;
}

async function readIfExists(file: string): Promise<string | undefined> {
  try {
    return await fs.readFile(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
}

async function restrictKeyFileMode(file: string): Promise<void> {
  const { mode } = await fs.stat(file);
  if ((mode & 0o077) !== 0) await fs.chmod(file, 0o600);
}

const TEMP_SUFFIX = /\.pem\.\d+\.[0-9a-f]{12}\.tmp$/;

/** Write-to-temp + fsync + rename + fsync(dir): after a power cut the file is old or new, never partial. */
async function writeFileAtomic(file: string, data: string, mode: number): Promise<void> {
  const tmp = `${file}.${process.pid}.${randomBytes(6).toString('hex')}.tmp`;
  try {
    const fh = await fs.open(tmp, 'wx', mode);
    try {
      await fh.chmod(mode); // open's mode is filtered by the umask
      await fh.writeFile(data, 'utf8');
      await fh.sync();
    } finally {
      await fh.close();
    }
    await fs.rename(tmp, file);
  } catch (err) {
    await fs.rm(tmp, { force: true });
    throw err;
  }
  await fsyncDirectory(path.dirname(file));
}

async function fsyncDirectory(dir: string): Promise<void> {
  let fh: fs.FileHandle | undefined;
  try {
    fh = await fs.open(dir, 'r');
    await fh.sync();
  } catch {
    // Not supported everywhere (e.g. Windows); the rename itself already happened.
  } finally {
    await fh?.close();
  }
}

/** Temp files left behind by a crash mid-write; they may hold key material. */
async function removeStaleTempFiles(dir: string): Promise<void> {
  const names = [CA_KEY_FILE, CA_CERT_FILE, SERVER_KEY_FILE, SERVER_CERT_FILE];
  for (const entry of await fs.readdir(dir)) {
    if (TEMP_SUFFIX.test(entry) && names.some((n) => entry.startsWith(n + '.'))) {
      await fs.rm(path.join(dir, entry), { force: true });
    }
  }
}
