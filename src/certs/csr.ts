// Certificate signing requests (PKCS#10) from self-registering devices: parsed, their
// proof of possession verified over the bytes as received, their key checked against policy.
import { createPublicKey, verify as verifySignature, type KeyObject } from 'node:crypto';
import type forge from 'node-forge';
import { BadRequestError } from '../errors/errors.js';
import { OID_COMMON_NAME } from './certificate-issuer.js';
import { asn1, children, isContext, isUniversal, oidOf, parseDer, parseName, pemToDer, primitive, type NameAttribute } from './pem.js';

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

export interface VerifiedCsr {
  commonName: string;
  spkiDer: Buffer;
  subject: NameAttribute[];
}

export function parseAndVerifyCsr(der: Buffer): VerifiedCsr {
  let criDer: Buffer;
  let cri: forge.asn1.Asn1[];
  let sigOid: string;
  let signature: Buffer;
  try {
    // Every element of RFC 2986 with its own tag: children() alone took any constructed element
    // (an outer tag 0x33 passed; openssl refuses it — found by the certificate fuzz target).
    const { SEQUENCE } = asn1.Type;
    const root = parseDer(der);
    if (!isUniversal(root, SEQUENCE)) throw new Error('CertificationRequest');
    const top = children(root, 'CertificationRequest');
    if (top.length !== 3 || !isUniversal(top[0], SEQUENCE) || !isUniversal(top[1], SEQUENCE)) throw new Error('CertificationRequest');
    cri = children(top[0], 'CertificationRequestInfo');
    if (!isUniversal(cri[1], SEQUENCE) || !isUniversal(cri[2], SEQUENCE)) throw new Error('subject or subjectPKInfo');
    // Verify over the bytes exactly as received, not a re-encoding.
    const criElement = readElement(der, readElement(der, 0).contentStart);
    criDer = der.subarray(criElement.start, criElement.end);
    const sigAlg = children(top[1], 'signatureAlgorithm');
    sigOid = oidOf(sigAlg[0], 'signatureAlgorithm');
    // RFC 4055 2.1: sha*WithRSAEncryption has NULL parameters (absent is tolerated); RFC 5758
    // 3.2 and RFC 8410 3: ECDSA and Ed25519 have none.
    const params = sigAlg[1];
    const rsa = CSR_SIGNATURE_ALGORITHMS[sigOid]?.keyType === 'rsa';
    if (sigAlg.length > 2 || (params !== undefined && !(rsa && isUniversal(params, asn1.Type.NULL)))) throw new Error('signatureAlgorithm parameters');
    if (!isUniversal(top[2], asn1.Type.BITSTRING)) throw new Error('signature');
    const sigBits = Buffer.from(primitive(top[2], 'signature'), 'binary');
    if (sigBits[0] !== 0) throw new Error('signature');
    signature = sigBits.subarray(1);
    if (cri.length < 3 || !isUniversal(cri[0], asn1.Type.INTEGER) || primitive(cri[0], 'version') !== '\x00') {
      throw new Error('version');
    }
    if (cri[3] !== undefined && !isContext(cri[3], 0)) throw new Error('attributes');
  } catch {
    throw new BadRequestError('invalid CSR: malformed PKCS#10 structure');
  }

  const spkiDer = Buffer.from(asn1.toDer(cri[2]!).getBytes(), 'binary');
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

