// Public surface of the certificate helpers; pem.ts's ASN.1 helpers stay internal.
export {
  MAX_PEM_CERTIFICATES,
  describeCertificate,
  fingerprint,
  splitPemCertificates,
  type CertificateName,
  type CertificateSubject,
  type FingerprintAlgorithm,
  type TrustedCertificate,
} from './pem.js';
export {
  CA_CERT_FILE,
  CA_KEY_FILE,
  SERVER_CERT_FILE,
  SERVER_KEY_FILE,
  csrSubject,
  decodeBase64Pem,
  encodeBase64Pem,
  loadOrCreateCertificateAuthority,
  type CertificateAuthority,
  type CertificateAuthorityOptions,
  type SignCsrOptions,
} from './certificate-authority.js';
export { createTrustedCertificateService } from './trusted-certificates.js';
export type { TrustedCertificateService } from './trusted-certificates.js';
