// PEM/DER helpers and the "trusted certificate" record of the REST API.
//
// Certificates uploaded by users may carry any key type (RSA, EC, Ed25519), and
// node-forge's high-level X.509 parser only understands RSA keys. So certificates
// are validated with Node's X509Certificate (OpenSSL) and described by walking the
// DER with forge's generic ASN.1 decoder, which is key-type agnostic.

import { X509Certificate, createHash } from 'node:crypto';
import { createRequire } from 'node:module';
import type forge from 'node-forge';
import { BadRequestError } from '../errors/errors.js';

export type FingerprintAlgorithm = 'sha1' | 'sha256';

/** A distinguished name reduced to the attributes the UI shows; '' when absent. */
export interface CertificateName {
  commonName: string;
  organization: string;
  organizationalUnit: string;
}

export interface CertificateSubject extends CertificateName {
  /** subjectAltName DNS names and IP addresses, in certificate order. */
  alternativeNames: string[];
}

export interface TrustedCertificate {
  /** SHA-256 fingerprint of the DER, lowercase hex without colons. */
  id: string;
  issuedBy: CertificateName;
  issuedTo: CertificateSubject;
  /** RFC 5280 KeyUsage bit names, e.g. digitalSignature, keyCertSign. */
  keyUsage: string[];
  /** Extended key usage names (serverAuth, clientAuth, ...); unknown ones as dotted OIDs. */
  extendedKeyUsage: string[];
  /** pathLength is -1 when the certificate carries no pathLenConstraint (unlimited / not a CA). */
  basicConstraints: { isCA: boolean; pathLength: number };
  /** notBefore, epoch milliseconds. */
  issuedOn: number;
  /** notAfter, epoch milliseconds. */
  expiresOn: number;
  fingerprints: { sha1: string; sha256: string };
  removable: boolean;
}

/** Upper bound of certificates accepted in one upload. */
export const MAX_PEM_CERTIFICATES = 100;
/** Upper bound of the text scanned for PEM blocks (100 large certificates fit comfortably). */
export const MAX_PEM_TEXT_LENGTH = 1024 * 1024;

// A fresh RegExp per call: a shared /g regex carries lastIndex state between callers.
const pemBegin = () => /-----BEGIN ([A-Z0-9][A-Z0-9 ]*)-----/g;
const BASE64_BODY = /^[A-Za-z0-9+/]+={0,2}$/;

/**
 * Extracts every `CERTIFICATE` PEM block from `text`, validates each as an X.509
 * certificate and returns them re-encoded in canonical PEM (64-column lines, trailing
 * newline). Explanatory text around blocks is tolerated (RFC 7468), but other PEM
 * types (notably private keys) are rejected so that they are never stored by mistake.
 */
export function splitPemCertificates(text: string): string[] {
  if (typeof text !== 'string') throw new BadRequestError('expected a string containing PEM certificates');
  if (text.length > MAX_PEM_TEXT_LENGTH) {
    throw new BadRequestError(`PEM text too large (max ${MAX_PEM_TEXT_LENGTH} characters)`);
  }
  const result: string[] = [];
  const begin = pemBegin();
  for (let m = begin.exec(text); m; m = begin.exec(text)) {
    const label = m[1]!;
    if (label !== 'CERTIFICATE') {
      throw new BadRequestError(
        /PRIVATE KEY/.test(label)
          ? `PEM block ${result.length + 1} is a private key; upload certificates only`
          : `PEM block ${result.length + 1} is "${label}"; only CERTIFICATE blocks are accepted`,
      );
    }
    if (result.length >= MAX_PEM_CERTIFICATES) {
      throw new BadRequestError(`too many certificates (max ${MAX_PEM_CERTIFICATES})`);
    }
    const end = `-----END ${label}-----`;
    const bodyStart = m.index + m[0].length;
    const endIndex = text.indexOf(end, bodyStart);
    if (endIndex < 0) throw new BadRequestError(`certificate ${result.length + 1}: missing "${end}"`);
    const der = decodePemBody(text.slice(bodyStart, endIndex), `certificate ${result.length + 1}`);
    validateCertificateDer(der, `certificate ${result.length + 1}`);
    result.push(derToPem(der, 'CERTIFICATE'));
    begin.lastIndex = endIndex + end.length;
  }
  if (result.length === 0) throw new BadRequestError('no PEM certificate found (expected "-----BEGIN CERTIFICATE-----")');
  return result;
}

/** Fingerprint of a certificate (PEM text or DER bytes) as lowercase hex without colons. */
export function fingerprint(cert: string | Uint8Array, algorithm: FingerprintAlgorithm): string {
  const der = typeof cert === 'string' ? pemToDer(cert, ['CERTIFICATE']) : cert;
  return createHash(algorithm).update(der).digest('hex');
}

/** Builds the API record for exactly one PEM certificate. */
export function describeCertificate(pem: string, removable: boolean): TrustedCertificate {
  const blocks = splitPemCertificates(pem);
  if (blocks.length !== 1) throw new BadRequestError(`expected exactly one certificate, got ${blocks.length}`);
  const der = pemToDer(blocks[0]!, ['CERTIFICATE']);
  const info = parseCertificateDer(der);
  const sha256 = fingerprint(der, 'sha256');
  return {
    id: sha256,
    issuedBy: info.issuer,
    issuedTo: { ...info.subject, alternativeNames: info.alternativeNames },
    keyUsage: info.keyUsage,
    extendedKeyUsage: info.extendedKeyUsage,
    basicConstraints: info.basicConstraints,
    issuedOn: info.notBefore.getTime(),
    expiresOn: info.notAfter.getTime(),
    fingerprints: { sha1: fingerprint(der, 'sha1'), sha256 },
    removable,
  };
}

// ---------------------------------------------------------------------------
// Lower-level helpers, shared with certificate-authority.ts (not re-exported by index.ts).

/** Decodes the single PEM block of one of `labels` found in `pem`. Throws BadRequestError. */
export function pemToDer(pem: string, labels: readonly string[], what = 'PEM document'): Buffer {
  const m = pemBegin().exec(pem);
  if (!m || !labels.includes(m[1]!)) {
    throw new BadRequestError(`${what}: expected "-----BEGIN ${labels[0]}-----"`);
  }
  const end = `-----END ${m[1]}-----`;
  const bodyStart = m.index + m[0].length;
  const endIndex = pem.indexOf(end, bodyStart);
  if (endIndex < 0) throw new BadRequestError(`${what}: missing "${end}"`);
  return decodePemBody(pem.slice(bodyStart, endIndex), what);
}

export function derToPem(der: Uint8Array, label: string): string {
  const b64 = Buffer.from(der).toString('base64');
  const lines = b64.match(/.{1,64}/g) ?? [];
  return `-----BEGIN ${label}-----\n${lines.join('\n')}\n-----END ${label}-----\n`;
}

function decodePemBody(body: string, what: string): Buffer {
  const compact = body.replace(/\s+/g, '');
  if (compact.length === 0 || compact.length % 4 !== 0 || !BASE64_BODY.test(compact)) {
    throw new BadRequestError(`${what}: PEM body is not valid Base64`);
  }
  return Buffer.from(compact, 'base64');
}

function validateCertificateDer(der: Buffer, what: string): void {
  try {
    new X509Certificate(der);
    parseCertificateDer(der);
  } catch {
    throw new BadRequestError(`${what} is not a valid X.509 certificate`);
  }
}

type Asn1 = forge.asn1.Asn1;
/**
 * forge's ASN.1 codec alone (with its util): reading certificates needs no more, and the rest of
 * forge (pki, ciphers, TLS) is loaded by the first certificate the gateway issues.
 */
export const asn1 = createRequire(import.meta.url)('node-forge/lib/asn1.js') as typeof forge.asn1;
const { Class, Type } = asn1;

// @types/node-forge only declares the boolean `strict` form of fromDer.
const fromDerWithOptions = asn1.fromDer as unknown as (
  bytes: string,
  options: { strict?: boolean; parseAllBytes?: boolean; decodeBitStrings?: boolean },
) => Asn1;

/**
 * Strict DER decode; BIT STRING contents are left as raw bytes (the key usage bits must not be
 * "decoded"). forge reads a universal BOOLEAN or NULL of any length, and any universal type in
 * the constructed form; DER (X.690 8.2, 8.8, 10.2) and OpenSSL allow a BOOLEAN of exactly one
 * content byte, a NULL of none, and only SEQUENCE and SET constructed. A BOOLEAN of length 0,
 * then a constructed NULL (0x25), as a CSR's signature parameters passed here and failed
 * `openssl req -verify` (found by the certificate fuzz target's long runs).
 */
export function parseDer(der: Uint8Array | string): Asn1 {
  const bytes = typeof der === 'string' ? der : Buffer.from(der).toString('binary');
  const root = fromDerWithOptions(bytes, { strict: true, parseAllBytes: true, decodeBitStrings: false });
  checkFixedLengths(root);
  return root;
}

/**
 * Every universal element of the tree in its DER form: SEQUENCE and SET constructed, the others
 * primitive; BOOLEAN of 1 content byte, NULL of none. A stack, not recursion (10,000 nested elements).
 */
function checkFixedLengths(root: Asn1): void {
  const stack: Asn1[] = [root];
  for (let node = stack.pop(); node; node = stack.pop()) {
    const universal = node.tagClass === Class.UNIVERSAL;
    if (universal && node.constructed !== (node.type === Type.SEQUENCE || node.type === Type.SET)) throw new Error('malformed ASN.1: a universal type in the other form than DER gives it');
    if (Array.isArray(node.value)) {
      stack.push(...node.value);
      continue;
    }
    if (!universal) continue;
    if (node.type === Type.BOOLEAN && node.value.length !== 1) throw new Error('malformed ASN.1: a BOOLEAN of other than one byte');
    if (node.type === Type.NULL && node.value.length !== 0) throw new Error('malformed ASN.1: a NULL with contents');
  }
}

export function children(node: Asn1 | undefined, what: string): Asn1[] {
  if (!node || !Array.isArray(node.value)) throw new Error(`malformed ASN.1: ${what}`);
  return node.value;
}

export function primitive(node: Asn1 | undefined, what: string): string {
  if (!node || typeof node.value !== 'string') throw new Error(`malformed ASN.1: ${what}`);
  return node.value;
}

export function isUniversal(node: Asn1 | undefined, type: number): node is Asn1 {
  return !!node && node.tagClass === Class.UNIVERSAL && node.type === type;
}

export function isContext(node: Asn1 | undefined, tag: number): node is Asn1 {
  return !!node && node.tagClass === Class.CONTEXT_SPECIFIC && node.type === tag;
}

export function oidOf(node: Asn1 | undefined, what: string): string {
  if (!isUniversal(node, Type.OID)) throw new Error(`malformed ASN.1: ${what} is not an OID`);
  return asn1.derToOid(primitive(node, what));
}

const OID = {
  commonName: '2.5.4.3',
  organization: '2.5.4.10',
  organizationalUnit: '2.5.4.11',
  keyUsage: '2.5.29.15',
  subjectAltName: '2.5.29.17',
  basicConstraints: '2.5.29.19',
  extKeyUsage: '2.5.29.37',
} as const;

const KEY_USAGE_BITS = [
  'digitalSignature',
  'nonRepudiation',
  'keyEncipherment',
  'dataEncipherment',
  'keyAgreement',
  'keyCertSign',
  'cRLSign',
  'encipherOnly',
  'decipherOnly',
] as const;

const EXTENDED_KEY_USAGE: Record<string, string> = {
  '2.5.29.37.0': 'anyExtendedKeyUsage',
  '1.3.6.1.5.5.7.3.1': 'serverAuth',
  '1.3.6.1.5.5.7.3.2': 'clientAuth',
  '1.3.6.1.5.5.7.3.3': 'codeSigning',
  '1.3.6.1.5.5.7.3.4': 'emailProtection',
  '1.3.6.1.5.5.7.3.5': 'ipsecEndSystem',
  '1.3.6.1.5.5.7.3.6': 'ipsecTunnel',
  '1.3.6.1.5.5.7.3.7': 'ipsecUser',
  '1.3.6.1.5.5.7.3.8': 'timeStamping',
  '1.3.6.1.5.5.7.3.9': 'OCSPSigning',
};

export interface NameAttribute {
  oid: string;
  value: string;
}

export interface ParsedCertificate {
  /** Raw ASN.1 of the subject Name, reused verbatim as issuer of issued certificates. */
  subjectAsn1: Asn1;
  subjectAttributes: NameAttribute[];
  subject: CertificateName;
  issuer: CertificateName;
  notBefore: Date;
  notAfter: Date;
  alternativeNames: string[];
  keyUsage: string[];
  extendedKeyUsage: string[];
  basicConstraints: { isCA: boolean; pathLength: number };
  /** subjectKeyIdentifier as a binary string, when present. */
  subjectKeyIdentifier?: string;
}

/** Walks an X.509 certificate (any key type). Throws a plain Error on malformed input. */
export function parseCertificateDer(der: Uint8Array): ParsedCertificate {
  const cert = children(parseDer(der), 'Certificate');
  const tbs = children(cert[0], 'TBSCertificate');
  let i = isContext(tbs[0], 0) ? 1 : 0; // explicit [0] version is optional (v1)
  i += 2; // serialNumber, signature AlgorithmIdentifier
  const issuerAsn1 = tbs[i++];
  const validity = children(tbs[i++], 'Validity');
  const subjectAsn1 = tbs[i++];
  i++; // subjectPublicKeyInfo
  let extensions: Asn1[] = [];
  for (; i < tbs.length; i++) {
    if (isContext(tbs[i], 3)) extensions = children(children(tbs[i], 'extensions')[0], 'Extensions');
  }
  const subjectAttributes = parseName(subjectAsn1);
  const parsed: ParsedCertificate = {
    subjectAsn1: subjectAsn1!,
    subjectAttributes,
    subject: summarizeName(subjectAttributes),
    issuer: summarizeName(parseName(issuerAsn1)),
    notBefore: parseTime(validity[0]),
    notAfter: parseTime(validity[1]),
    alternativeNames: [],
    keyUsage: [],
    extendedKeyUsage: [],
    basicConstraints: { isCA: false, pathLength: -1 },
  };
  for (const ext of extensions) {
    const parts = children(ext, 'Extension');
    const oid = oidOf(parts[0], 'extnID');
    const valueNode = parts[parts.length - 1];
    if (!isUniversal(valueNode, Type.OCTETSTRING)) throw new Error('malformed ASN.1: extnValue');
    const value = primitive(valueNode, 'extnValue');
    switch (oid) {
      case OID.keyUsage:
        parsed.keyUsage = parseKeyUsage(value);
        break;
      case OID.extKeyUsage:
        parsed.extendedKeyUsage = children(parseDer(value), 'ExtKeyUsageSyntax').map(
          (n) => EXTENDED_KEY_USAGE[oidOf(n, 'KeyPurposeId')] ?? oidOf(n, 'KeyPurposeId'),
        );
        break;
      case OID.basicConstraints:
        parsed.basicConstraints = parseBasicConstraints(value);
        break;
      case OID.subjectAltName:
        parsed.alternativeNames = parseAltNames(value);
        break;
      case '2.5.29.14':
        parsed.subjectKeyIdentifier = primitive(parseDer(value), 'subjectKeyIdentifier');
        break;
    }
  }
  return parsed;
}

/** Decodes a Name (RDNSequence) into its attributes in order. */
export function parseName(node: Asn1 | undefined): NameAttribute[] {
  const attrs: NameAttribute[] = [];
  for (const rdn of children(node, 'Name')) {
    for (const atv of children(rdn, 'RelativeDistinguishedName')) {
      const [type, value] = children(atv, 'AttributeTypeAndValue');
      attrs.push({ oid: oidOf(type, 'AttributeType'), value: decodeString(value) });
    }
  }
  return attrs;
}

function summarizeName(attrs: NameAttribute[]): CertificateName {
  // Multi-valued attributes (several OUs, say) are joined so nothing is hidden.
  const pick = (oid: string) => attrs.filter((a) => a.oid === oid).map((a) => a.value).join(', ');
  return {
    commonName: pick(OID.commonName),
    organization: pick(OID.organization),
    organizationalUnit: pick(OID.organizationalUnit),
  };
}

function decodeString(node: Asn1 | undefined): string {
  const raw = Buffer.from(primitive(node, 'string'), 'binary');
  switch (node!.type) {
    case Type.UTF8:
      return raw.toString('utf8');
    case Type.BMPSTRING:
      return raw.swap16().toString('utf16le');
    default: // PrintableString, IA5String, TeletexString, VisibleString: ASCII in practice
      return raw.toString('latin1');
  }
}

function parseTime(node: Asn1 | undefined): Date {
  const value = primitive(node, 'Time');
  if (isUniversal(node, Type.UTCTIME)) return asn1.utcTimeToDate(value);
  if (isUniversal(node, Type.GENERALIZEDTIME)) return asn1.generalizedTimeToDate(value);
  throw new Error('malformed ASN.1: Time');
}

function parseKeyUsage(extnValue: string): string[] {
  const node = parseDer(extnValue);
  if (!isUniversal(node, Type.BITSTRING)) throw new Error('malformed ASN.1: KeyUsage');
  const bytes = Buffer.from(primitive(node, 'KeyUsage'), 'binary').subarray(1); // skip unused-bits count
  return KEY_USAGE_BITS.filter((_, bit) => ((bytes[bit >> 3] ?? 0) & (0x80 >> (bit & 7))) !== 0);
}

function parseBasicConstraints(extnValue: string): { isCA: boolean; pathLength: number } {
  let isCA = false;
  let pathLength = -1;
  for (const n of children(parseDer(extnValue), 'BasicConstraints')) {
    if (isUniversal(n, Type.BOOLEAN)) isCA = primitive(n, 'cA') !== '\x00';
    else if (isUniversal(n, Type.INTEGER)) {
      pathLength = Number(BigInt('0x' + (Buffer.from(primitive(n, 'pathLen'), 'binary').toString('hex') || '0')));
    }
  }
  return { isCA, pathLength };
}

function parseAltNames(extnValue: string): string[] {
  const names: string[] = [];
  for (const gn of children(parseDer(extnValue), 'GeneralNames')) {
    if (isContext(gn, 2)) names.push(primitive(gn, 'dNSName'));
    else if (isContext(gn, 7)) {
      const ip = formatIp(Buffer.from(primitive(gn, 'iPAddress'), 'binary'));
      if (ip) names.push(ip);
    }
  }
  return names;
}

/** IPv4 dotted quad, or IPv6 in RFC 5952 canonical form (what users type and tls checks). */
export function formatIp(bytes: Buffer): string | undefined {
  if (bytes.length === 4) return Array.from(bytes).join('.');
  if (bytes.length !== 16) return undefined;
  const groups: number[] = [];
  for (let i = 0; i < 16; i += 2) groups.push(bytes.readUInt16BE(i));
  // Longest run (length >= 2) of zero groups becomes "::"; the first one wins ties.
  let bestStart = -1;
  let bestLen = 0;
  for (let i = 0; i < 8; ) {
    if (groups[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && groups[j] === 0) j++;
    if (j - i > bestLen && j - i >= 2) {
      bestStart = i;
      bestLen = j - i;
    }
    i = j;
  }
  const hex = groups.map((g) => g.toString(16));
  if (bestStart < 0) return hex.join(':');
  return `${hex.slice(0, bestStart).join(':')}::${hex.slice(bestStart + bestLen).join(':')}`;
}
