import type { GatewayConfig } from '../config/index.js';
import type { Part } from '../daemon.js';
import { BadRequestError, ConflictError, InternalError, TooManyRequestsError, UnauthorizedError } from '../errors/errors.js';
import type { Logger } from '../log/index.js';
import type { AuthService } from '../auth/auth-service.js';
import type { MfaRecord, UserRecord } from '../store/index.js';
import type { UserService } from '../users/user-service.js';
import { findBackupCode, generateBackupCodes, hashBackupCode } from './backup-codes.js';
import type { MfaChallenges } from './mfa-challenges.js';
import { createAttemptLimiter, type Attempt } from '../auth/attempt-limiter.js';
import { loadOrCreateMfaKey } from './mfa-key.js';
import { open, seal } from './secret-box.js';
import { newTotpSecret, otpauthUri, verifyTotp } from './totp.js';

/** A second factor: a TOTP code or one backup code (exactly one of them). */
export interface MfaProof {
  otp?: string;
  backupCode?: string;
}

export interface MfaLoginInput extends MfaProof {
  username: string;
  secret: string;
}

const INVALID_PROOF = 'invalid OTP or backup code';
const INVALID_CHALLENGE = 'invalid or expired MFA login: log in with POST /api/login again';

/**
 * TOTP enrollment, second login step, backup codes (docs/design.md §7). The TOTP secret is sealed
 * with AES-256-GCM under a key kept outside the store; backup codes are kept as SHA-256
 * hashes; the last accepted OTP time step is kept so an OTP cannot be replayed.
 */
export function createMfaService(deps: {
  users: UserService;
  auth: AuthService;
  challenges: MfaChallenges;
  config: GatewayConfig['mfa'];
  dataDir: string;
  log: Logger;
  /** Ends every token of the user but the one named; answers how many ended. */
  revokeOtherTokens: (userId: string, keepTokenFingerprint?: string) => Promise<number>;
  /** A site's gateway: the site's key, the same on every gateway of the site (src/site). */
  siteKey?: () => Buffer | undefined;
}) {
  const { users, auth, challenges, config, log } = deps;
  // At most maxFailures OTPs or backup codes are checked per user and ban window, however many
  // arrive at once (each is reserved before it is checked).
  const attempts = createAttemptLimiter({
    maxAttempts: config.maxFailures,
    lockMs: config.banSeconds * 1000,
    maxTrackedKeys: 10_000,
    message: 'too many invalid OTPs or backup codes; try again later',
  });
  let key: Buffer | undefined;

  const keyOrThrow = (): Buffer => {
    const k = deps.siteKey?.() ?? key;
    if (!k) throw new InternalError('MFA key not loaded');
    return k;
  };

  function secretOf(user: UserRecord): string {
    if (!user.mfa.sealedSecret) throw new InternalError('MFA record has no secret');
    try {
      return open(keyOrThrow(), user.mfa.sealedSecret, user.id);
    } catch (err) {
      // The key changed (another key file, a store restored onto another device) or the record was altered.
      log.error('MFA secret cannot be decrypted', { userId: user.id, error: err instanceof Error ? err.message : String(err) });
      throw new InternalError('MFA secret cannot be decrypted');
    }
  }

  function proofKind(proof: MfaProof): 'otp' | 'backupCode' {
    const hasOtp = proof.otp !== undefined;
    const hasCode = proof.backupCode !== undefined;
    if (hasOtp === hasCode) throw new BadRequestError('send either otp or backupCode');
    return hasOtp ? 'otp' : 'backupCode';
  }

  async function reserveAttempt(user: UserRecord, via: string): Promise<Attempt> {
    try {
      return await attempts.begin(user.id);
    } catch (err) {
      if (err instanceof TooManyRequestsError) log.audit('mfa refused', { userId: user.id, username: user.username, via, reason: 'banned', retryAfterSeconds: err.retryAfterSeconds });
      throw err;
    }
  }

  function countFailure(attempt: Attempt, user: UserRecord, via: string, kind: string): void {
    attempt.failed();
    log.audit('mfa check failed', { userId: user.id, username: user.username, via, kind });
    if (attempts.lockedFor(user.id) > 0) log.audit('mfa banned', { userId: user.id, username: user.username, via, banSeconds: config.banSeconds });
  }

  /**
   * Checks the proof of an enrolled user and applies `then` to the record in the same
   * transaction (a backup code is consumed, the OTP step recorded). Failures count towards
   * the ban. Throws 401 for an invalid proof, 409 when the user is not enrolled.
   */
  async function withProof(userId: string, proof: MfaProof, via: string, then: (mfa: MfaRecord) => MfaRecord = (m) => m): Promise<UserRecord> {
    const kind = proofKind(proof);
    const user = users.getOrThrow(userId);
    if (!user.mfa.enrolled) throw new ConflictError('MFA is not enabled for this user');
    const attempt = await reserveAttempt(user, via);
    try {
      const outcome = await users.updateMfa(userId, (fresh) => {
        if (!fresh.mfa.enrolled) return { result: 'not-enrolled' as const };
        if (kind === 'otp') {
          const step = verifyTotp(secretOf(fresh), proof.otp!, fresh.mfa.lastOtpStep);
          if (step === undefined) return { result: 'invalid' as const };
          return { mfa: then({ ...fresh.mfa, lastOtpStep: step }), result: 'ok' as const };
        }
        const index = findBackupCode(fresh.mfa.backupCodeHashes, proof.backupCode!);
        if (index < 0) return { result: 'invalid' as const };
        const remaining = fresh.mfa.backupCodeHashes.filter((_, i) => i !== index);
        return { mfa: then({ ...fresh.mfa, backupCodeHashes: remaining }), result: 'ok' as const };
      });
      if (outcome === 'not-enrolled') throw new ConflictError('MFA is not enabled for this user');
      if (outcome === 'invalid') {
        countFailure(attempt, user, via, kind);
        throw new UnauthorizedError(INVALID_PROOF);
      }
      attempt.succeeded();
    } finally {
      attempt.release();
    }
    if (kind === 'backupCode') {
      log.audit('mfa backup code used', { userId: user.id, username: user.username, via, remaining: users.getOrThrow(userId).mfa.backupCodeHashes.length });
    }
    return user;
  }

  const freshCodes = () => {
    const codes = generateBackupCodes();
    return { codes, hashes: codes.map(hashBackupCode) };
  };

  const part: Part = {
    name: 'mfa',
    start: async () => {
      const loaded = loadOrCreateMfaKey({ keyFile: config.encryptionKeyFile, dataDir: deps.dataDir });
      key = loaded.key;
      if (loaded.created) log.info('MFA key created', { path: loaded.path });
    },
    stop: async () => {
      key = undefined;
    },
  };

  return {
    part,

    /** Starts (or restarts) enrollment: a new secret, sealed; enrolled only after validate. */
    async enable(userId: string): Promise<{ uri: string }> {
      if (!config.enabled) throw new ConflictError('MFA is disabled by configuration (mfa.enabled is false)');
      const user = users.getOrThrow(userId);
      if (user.mfa.enrolled) throw new ConflictError('user is already enrolled in MFA');
      const secret = newTotpSecret();
      const sealedSecret = seal(keyOrThrow(), secret, user.id);
      await users.updateMfa(userId, (fresh) => {
        if (fresh.mfa.enrolled) throw new ConflictError('user is already enrolled in MFA');
        return { mfa: { enrolled: false, sealedSecret, backupCodeHashes: [] }, result: undefined };
      });
      log.audit('mfa enrollment started', { userId, username: user.username });
      return { uri: otpauthUri({ issuer: config.issuer, account: user.username, secret }) };
    },

    /** Completes enrollment with a valid OTP; answers the 10 backup codes (shown once). */
    /**
     * Completes enrollment with a valid OTP; answers the 10 backup codes (shown once). Every
     * other token of the user ends: they were issued on a password alone.
     */
    async validate(userId: string, otp: string, keepTokenFingerprint?: string): Promise<{ backupCodes: string[] }> {
      if (!config.enabled) throw new ConflictError('MFA is disabled by configuration (mfa.enabled is false)');
      const user = users.getOrThrow(userId);
      if (user.mfa.enrolled) throw new ConflictError('user is already enrolled in MFA');
      if (!user.mfa.sealedSecret) throw new ConflictError('no MFA enrollment started: call POST /api/mfa/enable first');
      const { codes, hashes } = freshCodes();
      const attempt = await reserveAttempt(user, 'enroll');
      try {
        const outcome = await users.updateMfa(userId, (fresh) => {
          if (fresh.mfa.enrolled) throw new ConflictError('user is already enrolled in MFA');
          if (!fresh.mfa.sealedSecret) throw new ConflictError('no MFA enrollment started: call POST /api/mfa/enable first');
          const step = verifyTotp(secretOf(fresh), otp);
          if (step === undefined) return { result: false };
          return { mfa: { enrolled: true, sealedSecret: fresh.mfa.sealedSecret, backupCodeHashes: hashes, lastOtpStep: step }, result: true };
        });
        if (!outcome) {
          countFailure(attempt, user, 'enroll', 'otp');
          log.audit('mfa enrollment failed', { userId, username: user.username, reason: 'invalid OTP' });
          throw new UnauthorizedError('invalid OTP');
        }
        attempt.succeeded();
      } finally {
        attempt.release();
      }
      const revoked = await deps.revokeOtherTokens(userId, keepTokenFingerprint);
      log.audit('mfa enrolled', { userId, username: user.username, tokensRevoked: revoked });
      return { backupCodes: codes };
    },

    isEnrolled(userId: string): { isEnrolled: boolean } {
      return { isEnrolled: users.getOrThrow(userId).mfa.enrolled };
    },

    async disable(userId: string, proof: MfaProof): Promise<void> {
      const user = await withProof(userId, proof, 'disable', () => ({ enrolled: false, backupCodeHashes: [] }));
      challenges.forgetUser(userId);
      log.audit('mfa disabled', { userId, username: user.username, by: 'user' });
    },

    async regenerateBackupCodes(userId: string, proof: MfaProof): Promise<{ backupCodes: string[] }> {
      const { codes, hashes } = freshCodes();
      const user = await withProof(userId, proof, 'regenerate', (mfa) => ({ ...mfa, backupCodeHashes: hashes }));
      log.audit('mfa backup codes regenerated', { userId, username: user.username });
      return { backupCodes: codes };
    },

    /** Second login step: the challenge from POST /api/login plus an OTP or a backup code. */
    async login(input: MfaLoginInput) {
      proofKind(input);
      const challenge = challenges.take(input.secret);
      const user = challenge ? users.find(challenge.userId) : undefined;
      if (!challenge || !user || challenge.username !== input.username || user.username !== input.username || !user.mfa.enrolled) {
        // A challenge presented with the wrong username stays usable by its owner.
        if (challenge && challenge.username !== input.username) challenges.restore(input.secret, challenge);
        log.audit('mfa login failed', { username: input.username, reason: 'invalid challenge' });
        throw new UnauthorizedError(INVALID_CHALLENGE);
      }
      try {
        await withProof(user.id, input, 'login');
      } catch (err) {
        // Until it expires, the challenge allows another attempt (the failure ban caps them).
        challenges.restore(input.secret, challenge);
        if (err instanceof UnauthorizedError) log.audit('mfa login failed', { userId: user.id, username: user.username, reason: 'invalid OTP or backup code' });
        throw err;
      }
      const session = await auth.issueSession(user, {
        lifetimeHours: challenge.lifetimeHours,
        ...(challenge.label !== undefined ? { label: challenge.label } : {}),
        via: 'mfa',
      });
      return session;
    },
  };
}
export type MfaService = ReturnType<typeof createMfaService>;
