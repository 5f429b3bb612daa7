// JSON Schema of the configuration. config/default.json must satisfy it as-is; every
// override (file or environment) is validated against it before anything starts.

const port = { type: 'integer', minimum: 0, maximum: 65535 } as const;
const positiveInt = { type: 'integer', minimum: 1 } as const;
const nonNegativeInt = { type: 'integer', minimum: 0 } as const;
const policyRule = { type: 'integer', minimum: 0, maximum: 1024 } as const;

function obj(properties: Record<string, unknown>) {
  return {
    type: 'object',
    additionalProperties: false,
    required: Object.keys(properties),
    properties,
  } as const;
}

export const configSchema = obj({
  dataDir: { type: 'string', minLength: 1 },
  host: { type: 'string', minLength: 1 },
  log: obj({
    level: { enum: ['error', 'warn', 'info', 'http', 'verbose', 'debug', 'silly'] },
    requests: { type: 'boolean' },
  }),
  http: obj({
    port,
    bodyLimitBytes: { type: 'integer', minimum: 1024, maximum: 104857600 },
    shutdownTimeoutMs: { type: 'integer', minimum: 100, maximum: 600000 },
    trustProxy: { type: 'boolean' },
    // HTTPS (docs/https.md): its port, the operator's certificate (both or neither; empty: the
    // gateway CA's server certificate), and the addresses the plain port still serves.
    tlsPort: port,
    tlsCertFile: { type: 'string' },
    tlsKeyFile: { type: 'string' },
    plainAllowedFrom: { type: 'array', maxItems: 256, items: { type: 'string', minLength: 1, maxLength: 64 } },
  }),
  mqtt: obj({
    enabled: { type: 'boolean' },
    port,
    tlsPort: port,
    websocketPath: { type: 'string', pattern: '^/' },
    allowAnonymous: { type: 'boolean' },
    maxPacketSizeBytes: { type: 'integer', minimum: 1024, maximum: 268435455 },
    maxClientIdLength: { type: 'integer', minimum: 23, maximum: 65535 },
    maxConnectionsPerClientId: positiveInt,
    maxInflightMessages: { type: 'integer', minimum: 1, maximum: 65535 },
    maxQueuedMessages: positiveInt,
    drainTimeoutMs: { type: 'integer', minimum: 100 },
    maxKeepaliveSeconds: { type: 'integer', minimum: 0, maximum: 65535 },
    allowKeepaliveZero: { type: 'boolean' },
    topicAliasMaximum: { type: 'integer', minimum: 0, maximum: 65535 },
    sysIntervalSeconds: { type: 'integer', minimum: 0, maximum: 86400 },
    rateLimitGraceSeconds: { type: 'integer', minimum: 0, maximum: 3600 },
    connectTimeoutMs: { type: 'integer', minimum: 100 },
    maxPublishesPerSecond: positiveInt,
    maxConcurrentAuth: positiveInt,
    retryIntervalSeconds: positiveInt,
    serverHostnames: { type: 'array', items: { type: 'string', minLength: 1 } },
    persistence: obj({
      enabled: { type: 'boolean' },
      maxRetainedMessages: positiveInt,
      maxRetainedBytes: { type: 'integer', minimum: 1024 },
      sessionExpirySeconds: positiveInt,
    }),
  }),
  auth: obj({
    tokenLifetimeHours: { type: 'number', exclusiveMinimum: 0 },
    maxTokenLifetimeHours: { type: 'number', exclusiveMinimum: 0 },
    maxTokensPerUser: { type: 'integer', minimum: 1, maximum: 100000 },
    adminPassword: { type: 'string' },
    passwordHashCost: { type: 'integer', minimum: 10, maximum: 20 },
    maxConcurrentPasswordHashes: { type: 'integer', minimum: 1, maximum: 16 },
    verifiedPasswordCacheSeconds: { type: 'integer', minimum: 0, maximum: 86400 },
    loginThrottle: obj({
      freeAttempts: nonNegativeInt,
      maxAttempts: positiveInt,
      delayStepMs: nonNegativeInt,
      maxDelayMs: nonNegativeInt,
      lockoutSeconds: positiveInt,
      maxTrackedUsernames: positiveInt,
      maxFailuresPerAddress: nonNegativeInt,
    }),
  }),
  policy: obj({
    password: obj({ min: policyRule, lower: policyRule, upper: policyRule, numeric: policyRule, symbol: policyRule }),
    username: obj({ min: policyRule }),
  }),
  mfa: obj({
    enabled: { type: 'boolean' },
    issuer: { type: 'string', minLength: 1 },
    maxFailures: positiveInt,
    banSeconds: positiveInt,
    challengeSeconds: positiveInt,
    encryptionKeyFile: { type: 'string' },
  }),
  ldap: obj({
    enabled: { type: 'boolean' },
    mode: { enum: ['GROUP', 'ATTRIBUTE'] },
    url: { type: 'string', pattern: '^ldaps?://' },
    bindDn: { type: 'string' },
    bindPassword: { type: 'string' },
    userSearchBase: { type: 'string' },
    userSearchFilter: { type: 'string' },
    groupSearchBase: { type: 'string' },
    groupSearchFilter: { type: 'string' },
    roleAttribute: { type: 'string' },
    timeoutMs: positiveInt,
    startTls: { type: 'boolean' },
    tlsCaFile: { type: 'string' },
  }),
  idp: obj({
    enabled: { type: 'boolean' },
    issuer: { type: 'string' },
    clientId: { type: 'string' },
    clientSecret: { type: 'string' },
    redirectUri: { type: 'string' },
    scopes: { type: 'string' },
    groupsClaim: { type: 'string' },
    adminUiUrl: { type: 'string' },
  }),
  registry: obj({
    defaultDurationMs: positiveInt,
    maxDurationMs: positiveInt,
    maxPendingRequests: positiveInt,
    certificateValidityDays: positiveInt,
  }),
  health: obj({
    minFreeDiskBytes: nonNegativeInt,
  }),
  metrics: obj({
    anonymous: { type: 'boolean' },
  }),
  maintenance: obj({
    backupsToKeep: positiveInt,
    uploadLimitBytes: { type: 'integer', minimum: 1024 },
    ioBytesPerSecond: nonNegativeInt,
  }),
  mapping: obj({
    enabled: { type: 'boolean' },
    servicesDir: { type: 'string' },
    ruleTimeoutMs: { type: 'integer', minimum: 1, maximum: 60000 },
    ruleMaxDepth: { type: 'integer', minimum: 10, maximum: 100000 },
    ruleMaxSequence: { type: 'integer', minimum: 1, maximum: 10000000 },
    ruleMaxBytes: { type: 'integer', minimum: 1024, maximum: 104857600 },
    opcuaPkiDir: { type: 'string' },
    watch: { type: 'boolean' },
    watchDebounceMs: { type: 'integer', minimum: 10, maximum: 60000 },
  }),
  // Hooks for a cluster broker (docs/scaling-out.md, src/broker-hooks).
  brokerHooks: obj({
    enabled: { type: 'boolean' },
    allowFrom: { type: 'array', maxItems: 256, items: { type: 'string', pattern: '^[0-9A-Fa-f.:]+/[0-9]{1,3}$' } },
    secret: { type: 'string', maxLength: 1024 },
    maxRequestsPerSecond: positiveInt,
    maxConcurrentLogins: { type: 'integer', minimum: 1, maximum: 64 },
    maxQueuedLogins: nonNegativeInt,
    decisionCacheSeconds: { type: 'integer', minimum: 0, maximum: 86400 },
    certificateLogins: { type: 'boolean' },
    revocationRetryMaxSeconds: { type: 'integer', minimum: 1, maximum: 3600 },
    managementTimeoutMs: { type: 'integer', minimum: 100, maximum: 120000 },
    rabbitmq: obj({ vhost: { type: 'string', minLength: 1 }, managementUrl: managementUrl(), username: { type: 'string' }, password: { type: 'string' } }),
    vernemq: obj({ managementUrl: managementUrl(), apiKey: { type: 'string' } }),
    emqx: obj({ managementUrl: managementUrl(), apiKey: { type: 'string' }, apiSecret: { type: 'string' } }),
  }),
  audit: obj({
    maxEntries: { type: 'integer', minimum: 100, maximum: 10000000 },
    maxAgeDays: { type: 'integer', minimum: 1, maximum: 3650 },
    maxEventsPerSecond: { type: 'integer', minimum: 1, maximum: 100000 },
  }),
  dashboard: obj({
    intervalSeconds: { type: 'integer', minimum: 1, maximum: 600 },
    windowSeconds: { type: 'integer', minimum: 60, maximum: 86400 },
  }),
  // One site, one set of users (src/site, docs/scaling-out.md): none, a central or an edge.
  site: obj({
    role: { enum: ['none', 'central', 'edge'] },
    name: { type: 'string', maxLength: 128 },
    postgres: obj({
      hosts: { type: 'array', maxItems: 16, items: { type: 'string', pattern: '^(\\[[0-9A-Fa-f:.]+\\]|[^\\s:\\[\\]]+):[0-9]{1,5}$' } },
      database: { type: 'string', minLength: 1 },
      user: { type: 'string', minLength: 1 },
      password: { type: 'string' },
      passwordFile: { type: 'string' },
      caFile: { type: 'string' },
      connectTimeoutMs: { type: 'integer', minimum: 100, maximum: 60000 },
      queryTimeoutMs: { type: 'integer', minimum: 500, maximum: 120000 },
    }),
    centrals: { type: 'array', maxItems: 16, items: { type: 'string', pattern: '^https?://[^\\s]+$' } },
    caFile: { type: 'string' },
    joinToken: { type: 'string', maxLength: 256 },
    joinTokenFile: { type: 'string' },
    offline: { enum: ['extend', 'denyAfter'] },
    denyAfterMinutes: { type: 'integer', minimum: 1, maximum: 5256000 },
    staleAfterMinutes: { type: 'integer', minimum: 1, maximum: 5256000 },
    pollIntervalMs: { type: 'integer', minimum: 100, maximum: 60000 },
    longPollSeconds: { type: 'integer', minimum: 1, maximum: 300 },
    logRetention: { type: 'integer', minimum: 100, maximum: 100000000 },
    startTimeoutSeconds: { type: 'integer', minimum: 0, maximum: 3600 },
  }),
  // When the store touches the flash (src/storage, docs/footprint.md "Flash").
  storage: obj({
    holdMs: { type: 'integer', minimum: 0, maximum: 60000 },
    commitIntervalMs: { type: 'integer', minimum: 10, maximum: 10000 },
    backgroundCommitMs: { type: 'integer', minimum: 100, maximum: 60000 },
    flash: obj({
      capacityBytes: { type: 'integer', minimum: 104857600, maximum: 1099511627776 },
      ratedWriteCycles: { type: 'integer', minimum: 100, maximum: 1000000 },
      writeAmplification: { type: 'number', minimum: 1, maximum: 20 },
      lifeYears: { type: 'number', minimum: 1, maximum: 100 },
      burstBytes: { type: 'integer', minimum: 0, maximum: 100000000000 },
      warnBelowYears: { type: 'number', minimum: 0, maximum: 100 },
    }),
  }),
});

/** A cluster's management API base URL; empty: no revocation pushes to that cluster. */
function managementUrl() {
  return { type: 'string', pattern: '^(|https?://[^\\s]+)$' } as const;
}

export interface PasswordPolicy {
  min: number;
  lower: number;
  upper: number;
  numeric: number;
  symbol: number;
}

export interface GatewayConfig {
  dataDir: string;
  host: string;
  log: { level: string; requests: boolean };
  http: {
    port: number;
    bodyLimitBytes: number;
    shutdownTimeoutMs: number;
    trustProxy: boolean;
    tlsPort: number;
    tlsCertFile: string;
    tlsKeyFile: string;
    /** CIDR ranges (or single addresses) that may use the plain HTTP port for everything. */
    plainAllowedFrom: string[];
  };
  mqtt: {
    enabled: boolean;
    port: number;
    tlsPort: number;
    websocketPath: string;
    allowAnonymous: boolean;
    maxPacketSizeBytes: number;
    maxClientIdLength: number;
    maxConnectionsPerClientId: number;
    maxInflightMessages: number;
    maxQueuedMessages: number;
    /** How long a subscriber's socket may stay full before it is disconnected (slow consumer). */
    drainTimeoutMs: number;
    maxKeepaliveSeconds: number;
    /** Keepalive 0 ("never time out", allowed by MQTT) is accepted unless this is false. */
    allowKeepaliveZero: boolean;
    /** Inbound topic aliases an MQTT 5 client may use (0: none), announced in the CONNACK. */
    topicAliasMaximum: number;
    /** Period of the $SYS/broker/... statistics (0: not published). */
    sysIntervalSeconds: number;
    /** A client over maxPublishesPerSecond is slowed down; it is dropped only after staying over for this long. */
    rateLimitGraceSeconds: number;
    connectTimeoutMs: number;
    maxPublishesPerSecond: number;
    maxConcurrentAuth: number;
    retryIntervalSeconds: number;
    serverHostnames: string[];
    /**
     * Broker state in the store (src/mqtt/persistence). Off: aedes' in-memory persistence, lost
     * at every restart. The per-session queue cap is maxQueuedMessages above.
     */
    persistence: {
      enabled: boolean;
      /** Retained topics; a new topic beyond is refused, existing ones keep being updated. */
      maxRetainedMessages: number;
      /** Topic + payload bytes of all retained messages. */
      maxRetainedBytes: number;
      /** An abandoned MQTT 3.1/3.1.1 persistent session is wiped after this; bounds an MQTT 5 session expiry interval. */
      sessionExpirySeconds: number;
    };
  };
  auth: {
    tokenLifetimeHours: number;
    maxTokenLifetimeHours: number;
    /** Live tokens a user may hold; a new login beyond it revokes the oldest. */
    maxTokensPerUser: number;
    adminPassword: string;
    /** scrypt logN: 15 costs ~32 MiB and tens of ms per hash on a gateway CPU. */
    passwordHashCost: number;
    /** scrypt derivations at once, process-wide (each holds 128 × 8 × 2^passwordHashCost bytes); others wait. */
    maxConcurrentPasswordHashes: number;
    /** How long a successful password check spares the next scrypt for that user (0: never). */
    verifiedPasswordCacheSeconds: number;
    loginThrottle: {
      freeAttempts: number;
      maxAttempts: number;
      delayStepMs: number;
      maxDelayMs: number;
      lockoutSeconds: number;
      maxTrackedUsernames: number;
      maxFailuresPerAddress: number;
    };
  };
  policy: { password: PasswordPolicy; username: { min: number } };
  mfa: {
    enabled: boolean;
    issuer: string;
    maxFailures: number;
    banSeconds: number;
    challengeSeconds: number;
    encryptionKeyFile: string;
  };
  ldap: {
    enabled: boolean;
    mode: 'GROUP' | 'ATTRIBUTE';
    url: string;
    bindDn: string;
    bindPassword: string;
    userSearchBase: string;
    userSearchFilter: string;
    groupSearchBase: string;
    groupSearchFilter: string;
    roleAttribute: string;
    timeoutMs: number;
    /** Upgrade an ldap:// connection with StartTLS before any bind. */
    startTls: boolean;
    /** PEM CA certificate(s) trusted for ldaps:// and StartTLS; empty: the system trust store. */
    tlsCaFile: string;
  };
  idp: {
    enabled: boolean;
    issuer: string;
    clientId: string;
    clientSecret: string;
    redirectUri: string;
    scopes: string;
    groupsClaim: string;
    adminUiUrl: string;
  };
  registry: { defaultDurationMs: number; maxDurationMs: number; maxPendingRequests: number; certificateValidityDays: number };
  /** ioBytesPerSecond: rate limit of archive writes and restore extraction; 0 = unlimited. */
  /** GET /health/ready answers 503 when fewer bytes are free on the data directory's filesystem. */
  health: { minFreeDiskBytes: number };
  /** GET /metrics needs a read permission on /metrics unless anonymous is true. */
  metrics: { anonymous: boolean };
  maintenance: { backupsToKeep: number; uploadLimitBytes: number; ioBytesPerSecond: number };
  mapping: {
    enabled: boolean;
    /** Empty: <dataDir>/services (src/mapping/service-dir.ts). */
    servicesDir: string;
    ruleTimeoutMs: number;
    ruleMaxDepth: number;
    ruleMaxSequence: number;
    ruleMaxBytes: number;
    opcuaPkiDir: string;
    /** Watch servicesDir and apply changed files without a restart. */
    watch: boolean;
    /** Quiet time after the last change in servicesDir before it is read again. */
    watchDebounceMs: number;
  };
  /** gatewayd as the permission engine of a cluster broker (docs/scaling-out.md). */
  brokerHooks: {
    enabled: boolean;
    /** CIDRs of the cluster nodes allowed to call the hooks (the socket's peer address). */
    allowFrom: string[];
    /** When set, every hook call carries it (X-Gatewayd-Hook-Secret, or as the HTTP Basic password). */
    secret: string;
    /** Hook calls per second over all hooks; beyond: 429, so a runaway cluster cannot starve the REST API. */
    maxRequestsPerSecond: number;
    /** Password checks of hook logins at once (each may cost a scrypt); others wait. */
    maxConcurrentLogins: number;
    /** Hook logins waiting for a slot; beyond: 429. */
    maxQueuedLogins: number;
    /** How long a broker may cache a granted decision (VerneMQ cache-control max-age). */
    decisionCacheSeconds: number;
    /** Accept logins the broker vouches for by a client certificate's common name. */
    certificateLogins: boolean;
    /** Revocation pushes to an unreachable cluster are retried with backoff up to this interval. */
    revocationRetryMaxSeconds: number;
    managementTimeoutMs: number;
    rabbitmq: { vhost: string; managementUrl: string; username: string; password: string };
    vernemq: { managementUrl: string; apiKey: string };
    emqx: { managementUrl: string; apiKey: string; apiSecret: string };
  };
  /** The audit trail in the store (src/audit): bounded by count and by age. */
  audit: { maxEntries: number; maxAgeDays: number; maxEventsPerSecond: number };
  /** The dashboard's ring in memory (src/metrics/dashboard.ts): one sample per interval, for the window. */
  dashboard: { intervalSeconds: number; windowSeconds: number };
  /** One site, one set of users (docs/scaling-out.md): `none` is a gateway on its own. */
  site: {
    role: 'none' | 'central' | 'edge';
    /** This gateway's name in the site (an edge's, on the centrals' status page); empty: the host name. */
    name: string;
    /** Centrals: the site's PostgreSQL (hosts "host:port", the primary is found among them). */
    postgres: {
      hosts: string[];
      database: string;
      user: string;
      password: string;
      /** A file holding the password (instead of `password`). */
      passwordFile: string;
      /** PEM CA for TLS to PostgreSQL; empty: no TLS. */
      caFile: string;
      connectTimeoutMs: number;
      queryTimeoutMs: number;
    };
    /** Edges: the centrals' base URLs, asked in turn. */
    centrals: string[];
    /** Edges: PEM CA trusted for https:// centrals; empty: the system's. */
    caFile: string;
    /** Edges: the one-time join token (or `joinTokenFile`), used once. */
    joinToken: string;
    joinTokenFile: string;
    /** Edges cut off from every central: go on with the last data, or refuse the site's users after denyAfterMinutes. */
    offline: 'extend' | 'denyAfter';
    denyAfterMinutes: number;
    /** Edges: the link counts as stale after this (identity.stale, /health, metrics). */
    staleAfterMinutes: number;
    /** Centrals: the poll behind PostgreSQL's NOTIFY. */
    pollIntervalMs: number;
    /** Edges: how long a central holds a "changes since" open. */
    longPollSeconds: number;
    /** Centrals: revisions kept in the log (older: edges and centrals resynchronise from a snapshot). */
    logRetention: number;
    /** How long the first start waits for the site (a central without a replica, an edge that has not joined). */
    startTimeoutSeconds: number;
  };
  /** The storage policy (src/storage): when writes reach the flash, and the flash's endurance for the projection. */
  storage: {
    /** How long a copy a connected recipient should acknowledge stays in memory before it is written. */
    holdMs: number;
    /** What nobody waits for, or everything once the wear budget is spent: at most one durable commit per interval. */
    commitIntervalMs: number;
    /** Retained QoS 0 updates, session times, the audit trail: written within this interval (what a power cut can cost). */
    backgroundCommitMs: number;
    /**
     * The flash: its size, endurance and own write amplification (for the projected life and the
     * wear budget), the life wanted (the budget's rate), the budget's burst allowance (0: no fast
     * acknowledgements), and when the log warns.
     */
    flash: { capacityBytes: number; ratedWriteCycles: number; writeAmplification: number; lifeYears: number; burstBytes: number; warnBelowYears: number };
  };
}
