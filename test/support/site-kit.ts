// The loopback topology of a site (issue 37, docs/scaling-out.md "Topology"), each box its
// own 127.x address:
//   box 1 127.0.1.1  etcd, Patroni + PostgreSQL, central A (a gatewayd daemon process)
//   box 2 127.0.1.2  etcd, Patroni + PostgreSQL, central B
//   box 3 127.0.1.3  etcd (the third vote), haproxy in front of the centrals' hooks
//   RabbitMQ 3.10 (the kit of test/support/rabbitmq.ts), its HTTP auth backend through haproxy
//   edges 127.0.2.x  gatewayd daemon processes whose links go through TCP proxies the tests cut
// Every process is started here and stopped by destroy(); centrals and edges are real daemon
// processes (`node dist/src/main.js`), so the tests can kill -9, SIGSTOP and restart them, and
// start an edge under faketime.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { ADMIN_PASSWORD, startDaemonProcess, tempDir } from './harness.js';
import { freePortOn, startPgCluster, type PgCluster } from './patroni.js';
import { startRabbitKit, type RabbitKit, type RabbitNode } from './rabbitmq.js';
import { startTcpProxy, type TcpProxy } from './tcp-proxy.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** Debian's faketime package (multi-threaded variant: Node and lmdb-js run threads). */
const FAKETIME_LIBRARY = '/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1';

export interface SiteNode {
  name: string;
  role: 'central' | 'edge';
  host: string;
  httpPort: number;
  mqttPort: number;
  dataDir: string;
  /** http://host:httpPort */
  url: string;
  running(): boolean;
  /** Starts the daemon (`faketime`: a libfaketime offset such as '+24h'); resolves at its ready line with the time it took. */
  start(options?: { faketime?: string; env?: Record<string, string> }): Promise<{ readyMs: number }>;
  /** SIGKILL (a crash); resolves once the process is gone. */
  kill(): Promise<void>;
  /** SIGTERM, the daemon's clean stop. */
  stop(): Promise<void>;
  /** SIGSTOP / SIGCONT: a box that hangs (no RST) and comes back. */
  pause(): void;
  resume(): void;
  api<T = any>(method: string, path: string, options?: { token?: string; body?: unknown; timeoutMs?: number }): Promise<{ status: number; body: T; headers: Headers }>;
  /** A token of the node's administrator (the site's `admin` on a central, `local-admin` on an edge). */
  adminToken(): Promise<string>;
  /** GET /api/site as the administrator. */
  site(): Promise<{ revision?: number; digest?: string; epoch?: string; state: string; ageSeconds?: number; edge?: any; central?: any }>;
  /** Log lines of the current process (JSON objects). */
  lines(): Record<string, any>[];
}

export interface SiteKit {
  pg: PgCluster;
  centrals: SiteNode[];
  edges: SiteNode[];
  /** Per edge, its proxies to central A and to central B. */
  edgeLinks: TcpProxy[][];
  rabbit?: { kit: RabbitKit; node: RabbitNode };
  /** haproxy's frontend for the hooks (127.0.1.3). */
  haproxyUrl: string;
  hookSecret: string;
  haproxyLog(): string;
  cutEdge(i: number): void;
  restoreEdge(i: number): void;
  /** Whole again: every link restored, every node running (a test that failed midway left it so). */
  heal(): Promise<void>;
  /** Resolves when every running node reports the same epoch, revision and digest (and returns them). */
  converged(timeoutMs: number, nodes?: SiteNode[]): Promise<{ epoch: string; revision: number; digest: string; ms: number }>;
  destroy(): Promise<void>;
}

export interface SiteKitOptions {
  edges?: { offline?: 'extend' | 'denyAfter'; denyAfterMinutes?: number }[];
  rabbit?: { cacheTtlMs: number } | false;
}

export async function startSiteKit(options: SiteKitOptions = {}): Promise<SiteKit> {
  const t0 = Date.now();
  const mark = (what: string) => process.env.SITE_KIT_TIMES && console.log(`site kit: ${what} at ${Date.now() - t0} ms`);
  const root = tempDir('gatewayd-site-');
  const hookSecret = randomBytes(16).toString('hex');
  const haproxyHost = '127.0.1.3';
  const haproxyPort = await freePortOn(haproxyHost);
  const haproxyUrl = `http://${haproxyHost}:${haproxyPort}`;
  const cleanups: (() => Promise<void> | void)[] = [];
  const destroy = async () => {
    for (const c of cleanups.reverse()) await Promise.resolve(c()).catch(() => undefined);
    rmSync(root, { recursive: true, force: true });
  };
  try {
    // PostgreSQL and RabbitMQ take the longest: side by side.
    const rabbitOptions = options.rabbit === false ? undefined : (options.rabbit ?? { cacheTtlMs: 5000 });
    const rabbitStarting = rabbitOptions
      ? (async () => {
          const kit = await startRabbitKit();
          cleanups.push(() => kit.destroy());
          const node = await kit.startNode({
            auth: { httpUrl: `http://rabbitmq:${hookSecret}@${haproxyHost}:${haproxyPort}/api/broker/hooks/rabbitmq`, cache: true, cacheTtlMs: rabbitOptions.cacheTtlMs },
            // Connections listed quickly, so a revocation push can close single ones.
            conf: ['collect_statistics_interval = 500'],
          });
          return { kit, node };
        })()
      : Promise.resolve(undefined);
    // The standby clones the primary while the rest starts (tests that fail over wait for it).
    const pg = await startPgCluster({ standbys: false });
    mark('postgres');
    cleanups.push(() => pg.destroy());
    const rabbit = await rabbitStarting;
    mark('rabbitmq');

    const pgPasswordFile = join(root, 'pg-password');
    writeFileSync(pgPasswordFile, pg.password + '\n', { mode: 0o600 });
    const centrals: SiteNode[] = [];
    for (const [i, host] of ['127.0.1.1', '127.0.1.2'].entries()) {
      const name = `central-${'ab'[i]}`;
      centrals.push(
        await siteNode({ name, role: 'central', host, dir: join(root, name) }, (n) => ({
          site: { role: 'central', name, postgres: { hosts: pg.hosts, user: pg.user, passwordFile: pgPasswordFile, database: pg.database }, pollIntervalMs: 1000 },
          brokerHooks: {
            enabled: true,
            secret: hookSecret,
            allowFrom: ['127.0.0.0/8'],
            revocationRetryMaxSeconds: 2,
            ...(rabbit ? { rabbitmq: { vhost: '/', managementUrl: rabbit.node.managementUrl, username: rabbit.node.admin.username, password: rabbit.node.admin.password } } : {}),
          },
          http: { port: n.httpPort },
        })),
      );
    }
    cleanups.push(() => Promise.all(centrals.map((c) => c.kill())).then(() => undefined));
    // Central A creates the site (and its admin); B joins it while the edges join.
    await centrals[0]!.start();
    mark('central a');
    const centralB = centrals[1]!.start();
    centralB.catch(() => undefined);

    const edges: SiteNode[] = [];
    const edgeLinks: TcpProxy[][] = [];
    const adminA = await centrals[0]!.adminToken();
    for (const [i, edgeOptions] of (options.edges ?? [{}, {}]).entries()) {
      const links = await Promise.all(centrals.map((c) => startTcpProxy({ host: c.host, port: c.httpPort })));
      cleanups.push(() => Promise.all(links.map((l) => l.close())).then(() => undefined));
      edgeLinks.push(links);
      const join_ = await centrals[0]!.api('POST', '/api/site/join-tokens', { token: adminA, body: {} });
      if (join_.status !== 201) throw new Error(`join token: ${join_.status} ${JSON.stringify(join_.body)}`);
      const name = `edge-${i + 1}`;
      const edge = await siteNode({ name, role: 'edge', host: `127.0.2.${i + 1}`, dir: join(root, name) }, (n) => ({
        site: {
          role: 'edge',
          name,
          centrals: links.map((l) => `http://127.0.0.1:${l.port}`),
          joinToken: join_.body.token,
          offline: edgeOptions.offline ?? 'extend',
          denyAfterMinutes: edgeOptions.denyAfterMinutes ?? 720,
          longPollSeconds: 10,
        },
        http: { port: n.httpPort },
        mqtt: { port: n.mqttPort },
      }));
      edges.push(edge);
      cleanups.push(() => edge.kill());
    }
    // The edges join side by side.
    await Promise.all([centralB, ...edges.map((e) => e.start())]);
    mark('central b and edges');
    const haproxy = await startHaproxy(root, haproxyHost, haproxyPort, centrals);
    cleanups.push(() => haproxy.stop());
    mark('haproxy');
    const kit: SiteKit = {
      pg,
      centrals,
      edges,
      edgeLinks,
      ...(rabbit ? { rabbit } : {}),
      haproxyUrl,
      hookSecret,
      haproxyLog: () => haproxy.output(),
      cutEdge: (i) => edgeLinks[i]!.forEach((l) => l.cut()),
      restoreEdge: (i) => edgeLinks[i]!.forEach((l) => l.restore()),
      async heal() {
        edgeLinks.forEach((links) => links.forEach((l) => l.restore()));
        for (const node of [...centrals, ...edges]) {
          node.resume();
          if (!node.running()) await node.start();
        }
      },
      async converged(timeoutMs, nodes) {
        const started = Date.now();
        const deadline = started + timeoutMs;
        let last = '';
        for (;;) {
          const running = (nodes ?? [...centrals, ...edges]).filter((n) => n.running());
          const states = await Promise.all(running.map((n) => n.site().catch((e: Error) => ({ state: e.message }) as Awaited<ReturnType<SiteNode['site']>>)));
          const keys = states.map((s) => `${s.epoch}/${s.revision}/${s.digest}`);
          last = running.map((n, j) => `${n.name}: ${keys[j]} ${states[j]!.state}`).join('; ');
          if (states.every((s) => s.digest) && new Set(keys).size === 1) return { epoch: states[0]!.epoch!, revision: states[0]!.revision!, digest: states[0]!.digest!, ms: Date.now() - started };
          if (Date.now() > deadline) throw new Error(`replicas not converged within ${timeoutMs} ms: ${last}`);
          await sleep(100);
        }
      },
      destroy,
    };
    return kit;
  } catch (err) {
    await destroy();
    throw err;
  }
}

async function siteNode(
  spec: { name: string; role: 'central' | 'edge'; host: string; dir: string },
  configOf: (n: { httpPort: number; mqttPort: number }) => Record<string, unknown>,
): Promise<SiteNode> {
  const httpPort = await freePortOn(spec.host);
  const mqttPort = await freePortOn(spec.host);
  const dataDir = join(spec.dir, 'data');
  mkdirSync(dataDir, { recursive: true });
  const configFile = join(spec.dir, 'config.json');
  const config = configOf({ httpPort, mqttPort });
  writeFileSync(configFile, JSON.stringify({ mqtt: { tlsPort: 0 }, http: { tlsPort: 0 }, ...config }, null, 1));
  const url = `http://${spec.host}:${httpPort}`;
  let proc: Awaited<ReturnType<typeof startDaemonProcess>> | undefined;
  let exited = true;
  /** libfaketime's shared memory of a process it ran, which a SIGKILL leaves in /dev/shm. */
  const dropFakedMemory = (pid: number) => {
    for (const f of [`/dev/shm/faketime_shm_${pid}`, `/dev/shm/sem.faketime_sem_${pid}`]) rmSync(f, { force: true });
  };
  let token: string | undefined;

  const node: SiteNode = {
    ...spec,
    httpPort,
    mqttPort,
    dataDir,
    url,
    running: () => !exited,
    async start(options = {}) {
      const started = Date.now();
      token = undefined;
      proc = await startDaemonProcess(
        dataDir,
        {
          GATEWAYD_CONFIG: configFile,
          GATEWAYD_HOST: spec.host,
          GATEWAYD_HTTP_PORT: String(httpPort),
          GATEWAYD_MQTT_PORT: spec.role === 'edge' ? String(mqttPort) : '0',
          GATEWAYD_LOG_LEVEL: 'info',
          // libfaketime in the daemon's own process (the faketime wrapper would stand between
          // the test and the daemon's signals): the wall clock moved, timers left alone.
          ...(options.faketime ? { LD_PRELOAD: FAKETIME_LIBRARY, FAKETIME: options.faketime, FAKETIME_DONT_FAKE_MONOTONIC: '1' } : {}),
          ...options.env,
        },
      );
      exited = false;
      const faked = options.faketime ? proc.child.pid : undefined;
      void proc.exited.then(() => {
        exited = true;
        if (faked !== undefined) dropFakedMemory(faked);
      });
      return { readyMs: Date.now() - started };
    },
    async kill() {
      if (!proc || exited) return;
      proc.child.kill('SIGCONT');
      proc.child.kill('SIGKILL');
      await proc.exited;
    },
    async stop() {
      if (!proc || exited) return;
      proc.child.kill('SIGCONT');
      proc.child.kill('SIGTERM');
      await Promise.race([proc.exited, sleep(15_000)]);
      await node.kill();
    },
    pause: () => void proc?.child.kill('SIGSTOP'),
    resume: () => void proc?.child.kill('SIGCONT'),
    async api(method, path, options = {}) {
      const headers: Record<string, string> = {};
      if (options.token) headers.authorization = `Bearer ${options.token}`;
      if (options.body !== undefined) headers['content-type'] = 'application/json';
      const res = await fetch(url + path, { method, headers, body: options.body === undefined ? undefined : JSON.stringify(options.body), signal: AbortSignal.timeout(options.timeoutMs ?? 15_000) });
      const text = await res.text();
      let body: any = text;
      if ((res.headers.get('content-type') ?? '').includes('json') && text) body = JSON.parse(text);
      return { status: res.status, body, headers: res.headers };
    },
    async adminToken() {
      if (token) return token;
      const username = spec.role === 'central' ? 'admin' : 'local-admin';
      const res = await node.api('POST', '/api/login', { body: { username, password: ADMIN_PASSWORD, expireTimeInHours: 720 } });
      if (res.status !== 200) throw new Error(`${spec.name}: login of ${username}: ${res.status} ${JSON.stringify(res.body)}`);
      return (token = res.body.token as string);
    },
    async site() {
      const res = await node.api('GET', '/api/site', { token: await node.adminToken(), timeoutMs: 5000 });
      if (res.status === 401) token = undefined;
      if (res.status !== 200) throw new Error(`${spec.name}: GET /api/site: ${res.status} ${JSON.stringify(res.body)}`);
      return res.body;
    },
    lines: () => proc?.lines ?? [],
  };
  return node;
}

export async function startHaproxy(root: string, host: string, port: number, centrals: SiteNode[]): Promise<{ stop(): Promise<void>; output(): string }> {
  // What docs/scaling-out.md recommends in front of the centrals: health checks on
  // /health/ready, a refused or reset connection redispatched at once, a hung central's request
  // retried on the other after `timeout server`; and each central once more as a backup without
  // checks, used only when every check fails (checks that time out on a loaded machine must not
  // leave haproxy with no server while a central answers).
  const config = `global
  maxconn 4000
  log stdout format raw local0 info
defaults
  mode http
  log global
  option httplog
  timeout connect 500ms
  timeout client 30s
  timeout server 1500ms
  timeout check 1s
  retries 2
  option redispatch 1
  retry-on conn-failure empty-response response-timeout
frontend hooks
  bind ${host}:${port}
  default_backend centrals
backend centrals
  balance roundrobin
  option httpchk GET /health/ready
  http-check expect status 200
  option allbackups
  default-server inter 500ms fall 2 rise 2
${centrals.map((c, i) => `  server c${i} ${c.host}:${c.httpPort} check`).join('\n')}
${centrals.map((c, i) => `  server c${i}-unchecked ${c.host}:${c.httpPort} backup`).join('\n')}
`;
  const file = join(root, 'haproxy.cfg');
  writeFileSync(file, config);
  let output = '';
  const child: ChildProcess = spawn('/usr/sbin/haproxy', ['-db', '-f', file], { stdio: ['ignore', 'pipe', 'pipe'] });
  child.stdout!.on('data', (d) => (output = (output + d).slice(-400_000)));
  child.stderr!.on('data', (d) => (output += d));
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  // Ready: its frontend answers (a hook without the secret: 403 from a central).
  for (let i = 0; ; i++) {
    try {
      const res = await fetch(`http://${host}:${port}/health`, { signal: AbortSignal.timeout(1000) });
      if (res.status === 200) break;
    } catch {}
    if (child.exitCode !== null || i > 100) throw new Error(`haproxy did not start: ${output}`);
    await sleep(100);
  }
  return {
    output: () => output,
    async stop() {
      child.kill('SIGKILL');
      await exited;
    },
  };
}
