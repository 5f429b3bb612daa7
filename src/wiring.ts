import { mkdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import type { GatewayConfig } from './config/index.js';
import type { Logger } from './log/index.js';
import type { Part } from './daemon.js';
import { openStore, STORE_FILE, type Store } from './store/index.js';
import { createStoreIdentityWriter } from './store/identity-writer.js';
import { createSite, siteDomainEvents } from './site/index.js';
import { bootstrapBreakGlass } from './site/break-glass.js';
import { siteRoutes } from './http/routes/site-routes.js';
import { loadOrCreateMfaKey } from './mfa/mfa-key.js';
import { ConflictError } from './errors/errors.js';
import { createFlashWear, createStoragePolicy } from './storage/index.js';
import { createAccessEvents } from './auth/access-events.js';
import { createPasswordHasher } from './auth/passwords.js';
import { createTokenService } from './auth/token-service.js';
import { createLoginThrottle } from './auth/login-throttle.js';
import { createAuthService } from './auth/auth-service.js';
import { bootstrapAdmin, migrateAdminRole } from './auth/bootstrap-admin.js';
import { createMqttAccess } from './auth/create-mqtt-access.js';
import { createGrantGuard } from './permissions/grant-guard.js';
import { createPermissionEngine } from './permissions/permission-engine.js';
import { createRoleService } from './roles/role-service.js';
import { createUserService } from './users/user-service.js';
import { createMfaChallenges, createMfaService } from './mfa/index.js';
import { mfaRoutes } from './http/routes/mfa-routes.js';
import { createTrustedCertificateService, loadOrCreateCertificateAuthority, type CertificateAuthority } from './certs/index.js';
import { certificateRoutes } from './http/routes/certificate-routes.js';
import { createHttpApp } from './http/create-http-app.js';
import { createHttpServerPart } from './http/http-server.js';
import { createHttpsServerPart } from './http/https-server.js';
import { createPlainHttpPolicy } from './http/plain-http-policy.js';
import { createServerCertificateSource } from './http/server-certificate.js';
import { createWebUi } from './http/web-ui.js';
import { sessionRoutes } from './http/routes/session-routes.js';
import { userRoutes } from './http/routes/user-routes.js';
import { roleRoutes } from './http/routes/role-routes.js';
import { configRoutes } from './http/routes/config-routes.js';
import { brokerRoutes } from './http/routes/broker-routes.js';
import { createBroker, type Broker } from './mqtt/index.js';
import { gatewaydVersion } from './maintenance/version.js';
import { createMaintenanceService } from './maintenance/maintenance-service.js';
import { recoverMaintenanceFiles } from './maintenance/recovery.js';
import { backupBytes } from './maintenance/data-upgrade.js';
import { maintenanceRoutes, maintenanceUploadHandler } from './http/routes/maintenance-routes.js';
import { createRegistryService } from './registry/registry-service.js';
import { registryRoutes } from './http/routes/registry-routes.js';
import { createIdpService } from './idp/index.js';
import { createLdapService } from './ldap/index.js';
import { idpRoutes } from './http/routes/idp-routes.js';
import { agentName, createMappingService, lastWriteOfEvent } from './mapping/index.js';
import { createSparkplugSupport } from './sparkplug/index.js';
import { createBridgeService, createBridgeSysTopics } from './bridges/index.js';
import { mappingRoutes } from './http/routes/mapping-routes.js';
import { serviceBodyParsers, serviceRoutes } from './http/routes/service-routes.js';
import { createHealth } from './health/health.js';
import { createMetrics } from './metrics/metrics.js';
import { metricsRoute } from './metrics/metrics-route.js';
import { createBrokerHooks } from './broker-hooks/index.js';
import { brokerHookEndpoint } from './http/routes/broker-hook-routes.js';
import { createAuditTrail } from './audit/index.js';
import { auditRoutes } from './http/routes/audit-routes.js';
import { brokerAdminRoutes } from './http/routes/broker-admin-routes.js';
import { createDashboard } from './metrics/dashboard.js';
import { uiSupportRoutes } from './http/routes/ui-support-routes.js';
import { maintenancePaths } from './maintenance/paths.js';

export interface WireOptions {
  /** Tests validate responses against the OpenAPI document. */
  validateResponses?: boolean;
}

/**
 * Builds every part of gatewayd from the configuration: explicit dependencies, no
 * module-level singletons. The returned parts are started in order by the daemon.
 */
export function wireGateway(config: GatewayConfig, baseLog: Logger, options: WireOptions = {}) {
  mkdirSync(config.dataDir, { recursive: true, mode: 0o700 });
  recoverMaintenanceFiles({ dataDir: config.dataDir, log: baseLog }); // before the store opens: finishes or undoes an interrupted restore swap
  // Opening is synchronous and cheap (a memory map); everything else is built on it.
  // The daemon has checked the data format before (maintenance/data-upgrade.ts); a store of
  // another format does not open (DataFormatError).
  const store: Store = openStore({ dir: join(config.dataDir, 'db'), writtenBy: gatewaydVersion() });
  // When anything of the store touches the flash (docs/design.md §15): every part that keeps data as it
  // runs (broker state, bridge queues, the audit trail...) writes through it; API writes commit at once.
  const { holdMs, commitIntervalMs, backgroundCommitMs, flash } = config.storage;
  const flashWear = createFlashWear({ flash, log: baseLog });
  // Durable commits as journal frames; fast ones while the wear budget (every write of the process counts) lasts.
  const storage = createStoragePolicy({ store, timings: { holdMs, commitIntervalMs, backgroundCommitMs }, wear: flash, readWrittenBytes: () => flashWear.writtenBytes(), journal: true, log: baseLog });
  // The audit trail (docs/design.md §14): every part logs through `log`, whose audit events also go to the store.
  const audit = createAuditTrail({
    store,
    storage,
    log: baseLog,
    limits: { maxEntries: config.audit.maxEntries, maxAgeMs: config.audit.maxAgeDays * 86_400_000, maxPerSecond: config.audit.maxEventsPerSecond },
    previousStoreDir: maintenancePaths(config.dataDir).beforeRestore,
  });
  const log = audit.logger(baseLog);
  const events = createAccessEvents();
  // One site, one set of users (docs/scaling-out.md): a central or an edge writes identity through
  // the site and decides from its replica; a gateway on its own (site.role none) writes its store.
  const site = createSite({ config, store, events, log, localMfaKey: () => loadOrCreateMfaKey({ keyFile: config.mfa.encryptionKeyFile, dataDir: config.dataDir }).key });
  const identity = site?.identity ?? createStoreIdentityWriter(store);
  // What the services raise; on a site's gateway its replica raises the permission changes.
  const domainEvents = site ? siteDomainEvents(events) : events;
  const admits = site ? { admits: site.admits } : {};
  const hasher = createPasswordHasher({ logN: config.auth.passwordHashCost, maxConcurrent: config.auth.maxConcurrentPasswordHashes });
  const engine = createPermissionEngine({ store, events: domainEvents });
  const tokens = createTokenService({ store, identity, events: domainEvents, log, maxTokensPerUser: config.auth.maxTokensPerUser });
  const guard = createGrantGuard({ store, engine, log });
  const roles = createRoleService({ store, identity, engine, log, guard });
  const throttle = createLoginThrottle(config.auth.loginThrottle);
  const users = createUserService({ store, identity, engine, roles, tokens, hasher, events: domainEvents, policy: config.policy, log, guard, throttle });
  const mfaChallenges = createMfaChallenges({ ttlMs: config.mfa.challengeSeconds * 1000, maxEntries: 10_000 });
  // LDAP single sign-on (docs/design.md §8); reads config.ldap at call time, one directory connection per login.
  const ldap = createLdapService({ config: config.ldap, users, roles, log });
  const auth = createAuthService({ users, tokens, hasher, throttle, engine, events, config: config.auth, log, mfaChallenges, ldap, ...admits });
  const mfa = createMfaService({ users, auth, challenges: mfaChallenges, config: config.mfa, dataDir: config.dataDir, log, ...(site ? { siteKey: site.mfaKey } : {}), revokeOtherTokens: async (userId, keep) => {
    const revoked = await tokens.revoke(userId, tokens.fingerprintsOf(userId).filter((fp) => fp !== keep));
    // A password alone no longer signs this user in: its MQTT password sessions end as well.
    events.emit({ userId, kind: 'revoked', tokenFingerprints: [], passwordSessions: true });
    return revoked;
  } });
  const mqttAccess = createMqttAccess({ users, auth, engine, events, log, onUnknownUser: (c) => registry.recordMqttConnect(c), ...admits });
  // A cluster broker's hooks (docs/scaling-out.md): the same MqttAccess port as the embedded broker.
  const brokerHooks = createBrokerHooks({
    config: config.brokerHooks,
    access: mqttAccess,
    grantsOf: (userId) => engine.grantsOf(userId),
    covers: (userId, grant) => (grant.operation === 'readWrite' ? (['read', 'write'] as const) : [grant.operation]).every((op) => engine.coversFilter(userId, 'mqtt', op, grant.resource)),
    usernameOf: (userId) => users.find(userId)?.username,
    tokenExpiresAt: (secret) => tokens.verify(secret)?.expiresAt,
    log: log.child({ part: 'broker-hooks' }),
  });
  const maintenance = createMaintenanceService({ store, config, log, events });
  let ca: CertificateAuthority | undefined;
  // The broker needs the CA's server certificate, which the pki part loads at start.
  let broker: Broker | undefined;
  let brokerPorts = { mqtt: 0, mqtts: 0 };
  const trusted = createTrustedCertificateService({
    store,
    caCertPem: () => ca!.caCertPem,
    log,
    onChange: () => broker?.refreshTls(),
    guard,
    engine,
  });
  // In memory: a restart relocks the registry and forgets pending requests.
  const registry = createRegistryService({ users, roles, hasher, ca: () => ca, config: config.registry, policy: config.policy, log, onGranted: (username) => throttle.forget(username) });
  // OpenID Connect single sign-on (docs/design.md §8); reads config.idp at call time.
  const idp = createIdpService({ config, users, roles, tokens, log });
  // Bridges to upstream brokers (docs/design.md §14): Bridge resources of the service files run on this
  // engine, as their runAs user (the permission engine decides what leaves and what comes in).
  const bridges = createBridgeService({
    store,
    storage,
    log,
    access: {
      principal: (username) => {
        const user = users.findByUsername(username);
        return user ? { userId: user.id, publishPrefix: user.mqttPublishPrefix ?? '' } : undefined;
      },
      allows: (userId, operation, topic) => engine.allows(userId, 'mqtt', operation, topic),
      covers: (userId, operation, filter) => engine.coversFilter(userId, 'mqtt', operation, filter),
      onChange: (listener) => events.on(listener),
    },
    dataPlane: () => broker?.dataPlane(),
    dataDir: config.dataDir,
    clientIdPrefix: agentName(),
  });
  // Sparkplug B edge nodes (docs/design.md §14): their sessions go to the embedded broker as their runAs
  // user (a session token minted per connect) or upstream; runAs's permissions bound them.
  const sparkplug = createSparkplugSupport({
    identity: {
      findUser: (username) => users.findByUsername(username),
      allows: (userId, operation, topic) => engine.allows(userId, 'mqtt', operation, topic),
      coversFilter: (userId, filter) => engine.coversFilter(userId, 'mqtt', 'read', filter),
      issueToken: async (userId, label, lifetimeHours) => {
        const { token, record } = await tokens.issue(userId, { lifetimeHours, label });
        return { token, fingerprint: record.fingerprint };
      },
      revokeToken: async (userId, fingerprint) => void (await tokens.revoke(userId, [fingerprint])),
    },
    // The broker's own listener; a wildcard bind address is reached on the loopback.
    localBroker: () => (broker && brokerPorts.mqtt ? { host: config.host === '0.0.0.0' ? '127.0.0.1' : config.host === '::' ? '::1' : config.host, port: brokerPorts.mqtt } : undefined),
    store,
    storage,
    dataDir: config.dataDir,
    log,
  });
  // Protocol mapping (docs/design.md §11): service files → runtime on the broker's data plane; started after the broker.
  const mapping = createMappingService({
    bridges,
    config: config.mapping,
    log,
    broker: () => broker,
    store, // operations' target states outlive a restart
    dataDir: config.dataDir,
    host: config.host,
    // Sessions of the OPC UA server (Server::Opcua): gatewayd users, mqtt permissions on node topics.
    opcuaAccess: { authenticate: async (username, secret) => (await auth.authenticateSecret(username, secret, 'opcua')).user, allows: (userId, operation, topic) => engine.allows(userId, 'mqtt', operation, topic) },
    sparkplug,
    // After a restart an endpoint's last write comes back from the trail: its newest event, by the endpoint index.
    lastWriteOf: (endpointId) => {
      const [event] = audit.query({ endpoint: endpointId, limit: 1 }).records;
      return event && lastWriteOfEvent(event);
    },
  });

  const health = createHealth({
    store,
    brokerReady: () => !config.mqtt.enabled || (broker !== undefined && brokerPorts.mqtt > 0),
    maintenanceRunning: () => maintenance.status().running,
    dataDir: config.dataDir,
    minFreeDiskBytes: config.health.minFreeDiskBytes,
    version: gatewaydVersion(),
    ...(site ? { site } : {}),
  });
  const metrics = createMetrics({
    broker: () => broker?.stats(),
    mapping: () => mapping.stats(),
    bridges: () => bridges.figures(),
    permissions: () => engine.decisionCounts(),
    logins: () => auth.loginCounts(),
    storeBytes: () => {
      try {
        return statSync(join(config.dataDir, 'db', STORE_FILE)).size;
      } catch {
        return undefined;
      }
    },
    storeWritable: () => store.writeHealth().writable,
    storageWrittenBytes: () => flashWear.writtenBytes(),
    storageCommits: () => store.commits(),
    storagePolicy: () => storage.stats(),
    flashYears: () => flashWear.projection().projectedYears,
    freeDiskBytes: () => health.freeDiskBytes(),
    ...(site ? { site: () => site.status() } : {}),
    lastBackupEnd: () => {
      const backup = maintenance.status().backup;
      return backup?.succeeded ? backup.endDate : undefined;
    },
    backupBytes: () => backupBytes(maintenance.paths),
  });
  // The overview's charts: the last hour of the counters above, sampled in memory.
  const dashboard = createDashboard({
    sources: {
      broker: () => broker?.stats(),
      logins: () => auth.loginCounts(),
      dataPlanePublished: () => {
        const m = mapping.stats();
        return m.connections.reduce((n, c) => n + c.published, m.routed) + bridges.figures().reduce((n, b) => n + b.received, 0);
      },
      freeDiskBytes: () => health.freeDiskBytes(),
      // Undefined while no bridge runs: the series then has no points.
      writtenBytes: () => flashWear.writtenBytes(),
      flash: () => ({ ...flashWear.projection(), budget: storage.stats().budget, commitIntervalMs: config.storage.commitIntervalMs }),
      bridgeQueued: () => {
        const figures = bridges.figures();
        return figures.length === 0 ? undefined : figures.reduce((n, b) => n + b.queue.messages, 0);
      },
    },
    intervalMs: config.dashboard.intervalSeconds * 1000,
    windowMs: config.dashboard.windowSeconds * 1000,
  });
  store.onWriteHealthChange((h) => {
    if (h.writable) log.info('the store writes again');
    else log.error('the store cannot write: writes answer 507 until it can again', { reason: h.reason });
  });

  // HTTPS (docs/https.md): the plain port serves only http.plainAllowedFrom in full; its
  // messages name the HTTPS port bound (known once it listens, or the configured one).
  let httpsPort = (): number => config.http.tlsPort;
  const plainHttp = createPlainHttpPolicy({ allowedFrom: config.http.plainAllowedFrom, trustProxy: config.http.trustProxy, httpsPort: () => httpsPort() });

  const app = createHttpApp({
    log,
    bodyLimitBytes: config.http.bodyLimitBytes,
    logRequests: config.log.requests,
    trustProxy: config.http.trustProxy,
    authenticate: (header, source) => auth.authenticate(header, source),
    engine,
    validateResponses: options.validateResponses ?? false,
    gate: maintenance.gate,
    webUi: createWebUi(),
    plainHttpPolicy: plainHttp.middleware,
    probes: [health.routes(), metricsRoute({ metrics, anonymous: config.metrics.anonymous, authenticate: (header, source) => auth.authenticate(header, source), engine })],
    observe: (o) => metrics.observeHttp(o),
    routeContext: audit.context.middleware,
    preValidation: [maintenanceUploadHandler({ maintenance, uploadLimitBytes: config.maintenance.uploadLimitBytes }), ...serviceBodyParsers(config.http.bodyLimitBytes)],
    // Guarded first, then answered without the generic pipeline (validated against the same document).
    callerGuards: [
      { path: '/api/broker/hooks', handler: brokerHooks.guard },
      { path: '/api/broker/hooks', handler: brokerHookEndpoint({ hooks: brokerHooks, bodyLimitBytes: config.http.bodyLimitBytes, validateAnswers: options.validateResponses ?? false }) },
    ],
    quietPaths: ['/api/broker/hooks/'],
    routes: [
      sessionRoutes({ auth, users, engine }),
      mfaRoutes({ mfa }),
      configRoutes({ config }),
      userRoutes({ users, tokens , guard }),
      roleRoutes({ roles }),
      maintenanceRoutes({ maintenance }),
      brokerRoutes({ broker: () => broker }),
      certificateRoutes({ trusted }),
      registryRoutes({ registry, users }),
      idpRoutes({ idp, httpsPort: () => httpsPort() }),
      mappingRoutes({ mapping, log }),
      serviceRoutes({ mapping }),
      auditRoutes({ audit }),
      brokerAdminRoutes({ broker: () => broker, usernameOf: (userId) => store.users.get(userId)?.username }),
      uiSupportRoutes({ dashboard }),
      siteRoutes({ site }),
    ],
  });
  const https = createHttpsServerPart({
    app,
    host: config.host,
    port: config.http.tlsPort,
    shutdownTimeoutMs: config.http.shutdownTimeoutMs,
    log,
    // The gateway CA's server certificate (MQTTS's, for mqtt.serverHostnames), or the operator's files.
    certificate: createServerCertificateSource({ certFile: config.http.tlsCertFile, keyFile: config.http.tlsKeyFile, fromCa: () => ({ cert: ca!.serverCertPem, key: ca!.serverKeyPem }), log }),
  });
  // A TLS handshake on the plain port is served by the HTTPS listener (a browser sent there by HSTS).
  const http = createHttpServerPart({ app, host: config.host, port: config.http.port, shutdownTimeoutMs: config.http.shutdownTimeoutMs, admitUpgrade: plainHttp.admitUpgrade, tls: https });
  httpsPort = () => https.port() || config.http.tlsPort;

  const parts: Part[] = [
    {
      name: 'store',
      start: async () => {
        store.onReopen(() => {
          log.info('store reopened');
          // A restored store brings its own trusted certificates.
          broker?.refreshTls();
          // A backup from before the administrator role's id was recorded.
          migrateAdminRole({ store, roles }).catch((err: unknown) => log.error('bringing the administrator role up to date failed', { error: String(err) }));
        });
      },
      stop: async () => {
        // What is still staged (held copies too) is written before the store closes.
        await storage.close();
        await store.flushed();
        await store.close();
      },
    },
    audit.part,
    flashWear.part,
    // Before bootstrap: a site's gateway reaches its site (or starts from its replica) first.
    ...(site ? [site.part] : []),
    {
      name: 'bootstrap',
      start: async () => {
        if (site?.role === 'edge') return bootstrapBreakGlass({ users, roles, identity, config, log });
        try {
          await bootstrapAdmin({ store, users, roles, config, log });
        } catch (err) {
          // Two new centrals of one site creating `admin` at once: the second finds the first's.
          if (!site || !(err instanceof ConflictError)) throw err;
          await bootstrapAdmin({ store, users, roles, config, log });
        }
      },
      stop: async () => {},
    },
    {
      name: 'pki',
      start: async () => {
        ca = await loadOrCreateCertificateAuthority({ dir: join(config.dataDir, 'pki'), serverHostnames: config.mqtt.serverHostnames });
      },
      stop: async () => {},
    },
    mfa.part,
    maintenance.part,
    { name: 'registry', start: async () => {}, stop: async () => registry.stop() },
    ...(config.mqtt.enabled
      ? [
          {
            name: 'mqtt',
            start: async () => {
              const authority = ca!;
              broker = createBroker({
                config: config.mqtt,
                host: config.host,
                log: log.child({ part: 'mqtt' }),
                access: mqttAccess,
                tls: { key: authority.serverKeyPem, cert: authority.serverCertPem, ca: () => trusted.pems() },
                store,
                storage,
                version: gatewaydVersion(),
                sysTopics: createBridgeSysTopics(() => bridges.figures()),
              });
              const bound = await broker.start();
              brokerPorts = { mqtt: bound.port, mqtts: bound.tlsPort };
              // Before HTTP listens, so the first WebSocket upgrade already finds the broker;
              // on the plain port only the upgrades its policy admitted (ws), and every one on HTTPS (wss).
              broker.handleUpgrade(http.upgrades);
              broker.handleUpgrade(https.server);
            },
            stop: async () => {
              await broker?.stop();
            },
          } satisfies Part,
        ]
      : []),
    mapping.part,
    brokerHooks.part,
    dashboard.part,
    // HTTPS listens first, so the plain port's redirects and refusals name its bound port.
    https,
    http,
    // Stopped before the listeners: the edges' long polls are answered at once, not cut at shutdownTimeoutMs.
    ...(site?.feed ? [{ name: 'site-long-polls', start: async () => {}, stop: async () => site.feed!.endWaits() } satisfies Part] : []),
  ];

  return {
    parts,
    services: { events, engine, tokens, roles, users, auth, hasher, mqttAccess, brokerHooks, store, site, identity, storage, flashWear, trusted, bridges, audit, dashboard, get ca() { return ca; }, get broker() { return broker; } },
    ports: () => ({ http: http.port(), https: https.port(), ...brokerPorts }),
    mapping,
  };
}
export type Gateway = ReturnType<typeof wireGateway>;
