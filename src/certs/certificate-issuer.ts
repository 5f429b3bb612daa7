// Building and signing X.509 certificates for the gateway CA. forge assembles the
// TBSCertificate; OpenSSL (node:crypto) signs it. forge's TBSCertificate builder only knows RSA
// public keys, so the subject's SubjectPublicKeyInfo is spliced into the built structure as raw
// DER: that lets devices with EC (e.g. secure-element P-256) or Ed25519 keys register too.
import { createHash, createPublicKey, randomBytes, sign, type KeyObject } from 'node:crypto';
import { createRequire } from 'node:module';
import type forgeType from 'node-forge';
import { children, derToPem, parseDer, primitive } from './pem.js';

export const DAY_MS = 24 * 60 * 60 * 1000;
/** notBefore is backdated so peers with slightly slow clocks accept fresh certificates. */
export const CLOCK_SKEW_MS = 5 * 60 * 1000;

export const OID_COMMON_NAME = '2.5.4.3';
const OID_ORGANIZATION = '2.5.4.10';

export interface IssueRequest {
  spkiDer: Buffer;
  subject: { oid: string; value: string }[];
  notBefore: Date;
  notAfter: Date;
  /** forge extension descriptors; SKI/AKI are added here. */
  extensions: object[];
  issuer: {
    /** Issuer Name as parsed from the CA certificate (byte-identical); undefined = self-signed. */
    name: forgeType.asn1.Asn1 | undefined;
    keyIdentifier: string;
    key: KeyObject;
  };
}

// All of forge (its pki) is loaded by the first certificate issued: the CA's on first start, a
// renewed server certificate, a device's CSR.
const requireCjs = createRequire(import.meta.url);
let forgeModule: typeof forgeType | undefined;
const loadForge = (): typeof forgeType => (forgeModule ??= requireCjs('node-forge') as typeof forgeType);
// Not declared by @types/node-forge.
type TbsBuilder = { getTBSCertificate(cert: forgeType.pki.Certificate): forgeType.asn1.Asn1 };
const TBS_ISSUER_INDEX = 3;
const TBS_SPKI_INDEX = 6;

export function issueCertificate(req: IssueRequest): string {
  const forge = loadForge();
  const { asn1 } = forge;
  const cert = forge.pki.createCertificate();
  cert.serialNumber = randomSerialHex();
  cert.validity.notBefore = req.notBefore;
  cert.validity.notAfter = req.notAfter;
  // UTF8String (RFC 5280 §4.1.2.6): device usernames may hold characters PrintableString lacks.
  const attrs = req.subject.map((a) => ({ type: a.oid, value: a.value, valueTagClass: asn1.Type.UTF8 })) as unknown as forgeType.pki.CertificateField[];
  cert.setSubject(attrs);
  cert.setIssuer(attrs); // replaced below unless self-signed
  // Placeholder so forge can build the TBS (any RSA key); the real SubjectPublicKeyInfo is spliced in.
  cert.publicKey = forge.pki.publicKeyFromPem(createPublicKey(req.issuer.key).export({ type: 'spki', format: 'pem' }) as string);
  cert.siginfo.algorithmOid = forge.pki.oids['sha256WithRSAEncryption']!;
  cert.setExtensions([
    ...req.extensions,
    {
      name: 'subjectKeyIdentifier',
      value: asn1.create(asn1.Class.UNIVERSAL, asn1.Type.OCTETSTRING, false, subjectKeyIdentifier(req.spkiDer)),
    },
    { name: 'authorityKeyIdentifier', keyIdentifier: req.issuer.keyIdentifier },
  ]);
  const tbs = (forge.pki as unknown as TbsBuilder).getTBSCertificate(cert);
  const tbsFields = tbs.value as forgeType.asn1.Asn1[];
  tbsFields[TBS_SPKI_INDEX] = parseDer(req.spkiDer);
  if (req.issuer.name) tbsFields[TBS_ISSUER_INDEX] = req.issuer.name;

  // RSASSA-PKCS1-v1_5 with SHA-256 (the algorithm named above), signed by OpenSSL.
  const signature = sign('sha256', Buffer.from(asn1.toDer(tbs).getBytes(), 'binary'), req.issuer.key).toString('binary');
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

export function createCaCertificate(key: { keyObject: KeyObject; spkiDer: Buffer }, commonName: string, now: Date, validityDays: number): string {
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
    issuer: { name: undefined, keyIdentifier, key: key.keyObject },
  });
}

/** RFC 5280 §4.2.1.2 method 1: SHA-1 of the subjectPublicKey BIT STRING. Binary string. */
export function subjectKeyIdentifier(spkiDer: Buffer): string {
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

