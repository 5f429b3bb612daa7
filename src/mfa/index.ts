export { createMfaService, type MfaService, type MfaProof, type MfaLoginInput } from './mfa-service.js';
export { createMfaChallenges, type MfaChallenges, type MfaChallenge } from './mfa-challenges.js';
