// The site's Ed25519 signatures: every snapshot and every batch of changes a central serves is
// signed with the site's key, and an edge verifies it with the public key it pinned when it
// joined (the join token carries the key's fingerprint). A central answering with another key,
// or bytes altered on the way, is refused.
import { createHash, createPrivateKey, createPublicKey, sign, timingSafeEqual, verify, type KeyObject } from 'node:crypto';

export const SIGNATURE_HEADER = 'x-gatewayd-site-signature';

export interface SiteSigner {
  publicKeyPem: string;
  fingerprint: string;
  sign(body: Buffer): string;
}

/** base64url SHA-256 of the public key (SPKI DER): what a join token pins. */
export function keyFingerprint(publicKey: KeyObject): string {
  return createHash('sha256').update(publicKey.export({ type: 'spki', format: 'der' })).digest('base64url');
}

export function createSiteSigner(privateKeyPem: string): SiteSigner {
  const privateKey = createPrivateKey(privateKeyPem);
  const publicKey = createPublicKey(privateKey);
  return {
    publicKeyPem: publicKey.export({ type: 'spki', format: 'pem' }).toString(),
    fingerprint: keyFingerprint(publicKey),
    sign: (body) => sign(null, body, privateKey).toString('base64url'),
  };
}

export interface SiteVerifier {
  fingerprint: string;
  /** True when `signature` is the site's over exactly these bytes. */
  verify(body: Buffer, signature: string | undefined): boolean;
}

/** A verifier of the public key; refuses it unless it has the pinned fingerprint. */
export function createSiteVerifier(publicKeyPem: string, pinnedFingerprint: string): SiteVerifier {
  const publicKey = createPublicKey(publicKeyPem);
  if (publicKey.asymmetricKeyType !== 'ed25519') throw new Error('the site key is not an Ed25519 key');
  const fingerprint = keyFingerprint(publicKey);
  const a = Buffer.from(fingerprint);
  const b = Buffer.from(pinnedFingerprint);
  if (a.length !== b.length || !timingSafeEqual(a, b)) throw new Error('the site key does not match the fingerprint pinned by the join token');
  return {
    fingerprint,
    verify(body, signature) {
      if (!signature || !/^[A-Za-z0-9_-]{86}$/.test(signature)) return false;
      return verify(null, body, publicKey, Buffer.from(signature, 'base64url'));
    },
  };
}
