// Real RabbitMQ 3.10 nodes for the cluster tests (issue 19) and the bridge tests: Debian's
// rabbitmq-server from /usr/lib/rabbitmq/bin, run as user `rabbitmq`, each node with a unique
// name (random suffix), its own loopback ports (AMQP, MQTT, management, distribution, and a
// private epmd per kit so nodes of parallel test files never meet) and its own data and log
// directories under one temp dir. Plugins: rabbitmq_mqtt, rabbitmq_auth_backend_http,
// rabbitmq_auth_backend_cache, rabbitmq_management.
//
// Authentication: the internal user database always holds the kit's administrator (used for
// the management API); `auth.httpUrl` adds an HTTP auth backend (gatewayd's hooks) after it,
// optionally behind rabbitmq_auth_backend_cache. A node starts in ~15 s: start a kit once per
// test file (before/after hooks), not per test.
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chownSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createConnection } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from './free-port.js';
import { liveGroups, systemUserIds } from './system-processes.js';

export { freePort };

const RABBITMQ_BIN = '/usr/lib/rabbitmq/bin';
const PLUGINS = ['rabbitmq_mqtt', 'rabbitmq_auth_backend_http', 'rabbitmq_auth_backend_cache', 'rabbitmq_management'];
/** rabbitmqctl reads the Erlang cookie from $HOME/.erlang.cookie; the nodes share it. */
const RABBITMQ_HOME = '/var/lib/rabbitmq';

export interface RabbitAuthOptions {
  /** Base URL of an HTTP auth backend; the kit appends /user, /vhost, /resource, /topic. */
  httpUrl: string;
  /** Put rabbitmq_auth_backend_cache in front of the HTTP backend. */
  cache?: boolean;
  /** auth_cache.cache_ttl in ms (default 15000, RabbitMQ's default). */
  cacheTtlMs?: number;
}

export interface RabbitNodeOptions {
  /** Without it: the internal user database only. */
  auth?: RabbitAuthOptions;
  /** Extra rabbitmq.conf lines. */
  conf?: string[];
}

export interface RabbitNode {
  /** Erlang node name, e.g. `gwd-3f2a9c1b@localhost`. */
  name: string;
  amqpPort: number;
  mqttPort: number;
  managementPort: number;
  distPort: number;
  /** http://127.0.0.1:<managementPort> */
  managementUrl: string;
  /** The kit's administrator in the internal database (management API); the same on every node of the kit. */
  admin: { username: string; password: string };
  dir: string;
  /** rabbitmqctl -n <node> <args>; resolves stdout, rejects with stderr. */
  ctl(args: string[], timeoutMs?: number): Promise<string>;
  /** Management HTTP API call as the kit's administrator; resolves the parsed JSON (or null). */
  api(method: string, path: string, body?: unknown): Promise<unknown>;
  /** An internal user with full permissions on vhost `/` (MQTT through amq.topic). */
  addUser(username: string, password: string, tags?: string[]): Promise<void>;
  /** The node's log so far (for failure messages). */
  log(): string;
  /** SIGTERM, then SIGKILL the process group if it does not exit in time. Idempotent. */
  stop(): Promise<void>;
}

export interface RabbitKit {
  dir: string;
  nodes: RabbitNode[];
  startNode(options?: RabbitNodeOptions): Promise<RabbitNode>;
  /** Makes `joining` a member of `seed`'s cluster (stop_app, join_cluster, start_app). */
  joinCluster(joining: RabbitNode, seed: RabbitNode): Promise<void>;
  /** rabbitmqctl -n <nodeName> <args> for any node name (also one that is not running). */
  ctl(nodeName: string, args: string[], timeoutMs?: number): Promise<string>;
  /** Stops every node and the kit's epmd, removes the temp dir. Idempotent. */
  destroy(): Promise<void>;
}


const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const rabbitmqIds = () => systemUserIds('rabbitmq', 'rabbitmq-server');

function portOpen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = createConnection({ host: '127.0.0.1', port });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

function confLines(o: { amqpPort: number; mqttPort: number; managementPort: number; admin: { username: string; password: string }; logFile: string; auth?: RabbitAuthOptions; extra: string[] }): string {
  const lines = [
    `listeners.tcp.1 = 127.0.0.1:${o.amqpPort}`,
    `mqtt.listeners.tcp.1 = 127.0.0.1:${o.mqttPort}`,
    'mqtt.allow_anonymous = false',
    'mqtt.vhost = /',
    'mqtt.exchange = amq.topic',
    `management.tcp.port = ${o.managementPort}`,
    'management.tcp.ip = 127.0.0.1',
    `default_user = ${o.admin.username}`,
    `default_pass = ${o.admin.password}`,
    'default_user_tags.administrator = true',
    'default_permissions.configure = .*',
    'default_permissions.read = .*',
    'default_permissions.write = .*',
    'loopback_users = none',
    `log.file = ${o.logFile}`,
    'log.file.level = info',
    'log.console = false',
    // The machine is shared and small: no disk alarm from a nearly full /tmp.
    'disk_free_limit.absolute = 1MB',
  ];
  if (o.auth) {
    const base = o.auth.httpUrl.replace(/\/$/, '');
    lines.push(
      `auth_http.user_path = ${base}/user`,
      `auth_http.vhost_path = ${base}/vhost`,
      `auth_http.resource_path = ${base}/resource`,
      `auth_http.topic_path = ${base}/topic`,
      'auth_http.http_method = post',
    );
    // The internal database first: it holds only the kit's administrator, so management API
    // calls never reach the HTTP backend, and every other username falls through to it.
    lines.push('auth_backends.1 = internal');
    if (o.auth.cache) {
      lines.push('auth_backends.2 = cache', 'auth_cache.cached_backend = http', `auth_cache.cache_ttl = ${o.auth.cacheTtlMs ?? 15000}`);
    } else {
      lines.push('auth_backends.2 = http');
    }
  }
  return [...lines, ...o.extra, ''].join('\n');
}

export async function startRabbitKit(): Promise<RabbitKit> {
  const ids = rabbitmqIds();
  const dir = mkdtempSync(join(tmpdir(), 'gatewayd-rabbitmq-'));
  chownSync(dir, ids.uid, ids.gid);
  const epmdPort = await freePort();
  // A private epmd (foreground, in our process tree) so node names and ports of this kit never
  // mix with another test file's nodes or a system RabbitMQ.
  const epmd = spawn('/usr/bin/epmd', ['-port', String(epmdPort), '-address', '127.0.0.1'], { stdio: 'ignore', uid: ids.uid, gid: ids.gid, detached: true });
  liveGroups.add(epmd.pid!);
  const epmdExited = new Promise<void>((resolve) => epmd.once('exit', () => resolve()));
  for (let i = 0; i < 50 && !(await portOpen(epmdPort)); i++) await sleep(50);

  const nodes: RabbitNode[] = [];
  // One administrator for all nodes of the kit: a node that joins a cluster takes the seed's user database.
  const admin = { username: 'kit-admin', password: randomBytes(12).toString('hex') };
  const baseEnv = (): NodeJS.ProcessEnv => ({
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    HOME: RABBITMQ_HOME,
    LANG: 'C.UTF-8',
    LC_ALL: 'C.UTF-8',
    ERL_EPMD_PORT: String(epmdPort),
    ERL_EPMD_ADDRESS: '127.0.0.1',
    RABBITMQ_CONF_ENV_FILE: '/dev/null',
  });

  // rabbitmqctl's exit code when it could not reach the node (EX_UNAVAILABLE): on a loaded
  // 2-core machine the CLI's distribution handshake with a busy node can time out.
  const CTL_UNREACHABLE = 69;
  const CTL_ATTEMPTS = 3;

  function ctlOnce(nodeName: string, args: string[], timeoutMs: number, ctlPort: number): Promise<{ code: number; stdout: string; stderr: string; message: string }> {
    return new Promise((resolve) => {
      execFile(
        join(RABBITMQ_BIN, 'rabbitmqctl'),
        ['-n', nodeName, ...args],
        {
          uid: ids.uid,
          gid: ids.gid,
          cwd: dir,
          timeout: timeoutMs,
          env: {
            ...baseEnv(),
            RABBITMQ_CTL_DIST_PORT_MIN: String(ctlPort),
            RABBITMQ_CTL_DIST_PORT_MAX: String(ctlPort),
            // The handshake's deadline (7 s by default) is what a CPU-starved node misses.
            RABBITMQ_CTL_ERL_ARGS: '-kernel net_setuptime 30',
          },
        },
        (err, stdout, stderr) => {
          const code = err ? (typeof (err as { code?: unknown }).code === 'number' ? ((err as { code: number }).code) : -1) : 0;
          resolve({ code, stdout, stderr, message: err?.message ?? '' });
        },
      );
    });
  }

  async function ctlAs(nodeName: string, args: string[], timeoutMs = 60_000): Promise<string> {
    for (let attempt = 1; ; attempt++) {
      // The CLI is itself a distributed Erlang node: give it a free port of its own.
      const result = await ctlOnce(nodeName, args, timeoutMs, await freePort());
      if (result.code === 0) return result.stdout;
      // Unreachable is the only outcome where nothing was done on the node, so the only one
      // worth another attempt; every other failure is the command's own answer.
      if (result.code === CTL_UNREACHABLE && attempt < CTL_ATTEMPTS) {
        await sleep(2000);
        continue;
      }
      const text = result.stderr || result.stdout || result.message;
      // The diagnostics first: a failure summary shows only the first line.
      const diagnostics = text.includes('DIAGNOSTICS') ? text.slice(text.indexOf('DIAGNOSTICS')).replace(/\s+/g, ' ').trim() : '';
      throw new Error(`rabbitmqctl ${args.join(' ')} failed (exit ${result.code}, attempt ${attempt})${diagnostics ? `: ${diagnostics}` : ''}: ${text}`);
    }
  }

  async function startNode(options: RabbitNodeOptions = {}): Promise<RabbitNode> {
    const suffix = randomBytes(4).toString('hex');
    const name = `gwd-${suffix}@localhost`;
    const nodeDir = join(dir, `node-${suffix}`);
    for (const sub of ['', 'mnesia', 'log']) {
      mkdirSync(join(nodeDir, sub), { recursive: true });
      chownSync(join(nodeDir, sub), ids.uid, ids.gid);
    }
    const [amqpPort, mqttPort, managementPort, distPort] = [await freePort(), await freePort(), await freePort(), await freePort()];
    const logFile = join(nodeDir, 'log', 'node.log');
    const confFile = join(nodeDir, 'rabbitmq.conf');
    const pluginsFile = join(nodeDir, 'enabled_plugins');
    writeFileSync(confFile, confLines({ amqpPort, mqttPort, managementPort, admin, logFile, auth: options.auth, extra: options.conf ?? [] }));
    writeFileSync(pluginsFile, `[${PLUGINS.join(',')}].\n`);
    for (const f of [confFile, pluginsFile]) chownSync(f, ids.uid, ids.gid);

    const env: NodeJS.ProcessEnv = {
      ...baseEnv(),
      RABBITMQ_NODENAME: name,
      RABBITMQ_NODE_IP_ADDRESS: '127.0.0.1',
      RABBITMQ_NODE_PORT: String(amqpPort),
      RABBITMQ_DIST_PORT: String(distPort),
      RABBITMQ_CONFIG_FILE: confFile,
      RABBITMQ_ENABLED_PLUGINS_FILE: pluginsFile,
      RABBITMQ_MNESIA_BASE: join(nodeDir, 'mnesia'),
      RABBITMQ_MNESIA_DIR: join(nodeDir, 'mnesia', 'data'),
      RABBITMQ_LOG_BASE: join(nodeDir, 'log'),
      RABBITMQ_PLUGINS_EXPAND_DIR: join(nodeDir, 'plugins-expand'),
      RABBITMQ_PID_FILE: join(nodeDir, 'node.pid'),
      RABBITMQ_ADVANCED_CONFIG_FILE: join(nodeDir, 'advanced.config'),
      RABBITMQ_FEATURE_FLAGS_FILE: join(nodeDir, 'feature_flags'),
      // One scheduler pair is plenty for tests on a shared 2-core machine.
      RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS: '+S 2:2 +sbwt none +sbwtdcpu none +sbwtdio none',
    };
    let output = '';
    // detached: its own process group, so stop() can reach erl_child_setup and inet_gethost too.
    const child: ChildProcess = spawn(join(RABBITMQ_BIN, 'rabbitmq-server'), [], { env, cwd: nodeDir, uid: ids.uid, gid: ids.gid, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
    const keep = (chunk: Buffer) => {
      output = (output + chunk.toString()).slice(-20_000);
    };
    child.stdout!.on('data', keep);
    child.stderr!.on('data', keep);
    let exited = false;
    liveGroups.add(child.pid!);
    const exit = new Promise<void>((resolve) =>
      child.once('exit', () => {
        exited = true;
        resolve();
      }),
    );
    const logText = () => {
      let file = '';
      try {
        file = readFileSync(logFile, 'utf8').slice(-20_000);
      } catch {}
      return `${output}\n${file}`;
    };
    const managementUrl = `http://127.0.0.1:${managementPort}`;
    const authHeader = `Basic ${Buffer.from(`${admin.username}:${admin.password}`).toString('base64')}`;
    async function api(method: string, path: string, body?: unknown): Promise<unknown> {
      const res = await fetch(`${managementUrl}${path}`, {
        method,
        headers: { authorization: authHeader, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: AbortSignal.timeout(15_000),
      });
      const text = await res.text();
      if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${text}`);
      return text ? JSON.parse(text) : null;
    }

    let stopping: Promise<void> | undefined;
    const node: RabbitNode = {
      name,
      amqpPort,
      mqttPort,
      managementPort,
      distPort,
      managementUrl,
      admin,
      dir: nodeDir,
      ctl: (args, timeoutMs) => ctlAs(name, args, timeoutMs),
      api,
      async addUser(username, password, tags = []) {
        await api('PUT', `/api/users/${encodeURIComponent(username)}`, { password, tags: tags.join(',') });
        await api('PUT', `/api/permissions/%2F/${encodeURIComponent(username)}`, { configure: '.*', write: '.*', read: '.*' });
      },
      log: logText,
      stop() {
        stopping ??= (async () => {
          if (!exited) {
            try {
              process.kill(-child.pid!, 'SIGTERM');
            } catch {}
            await Promise.race([exit, sleep(20_000)]);
          }
          // Leftovers of the group (erl_child_setup, inet_gethost, a hung VM).
          try {
            process.kill(-child.pid!, 'SIGKILL');
          } catch {}
          await Promise.race([exit, sleep(2000)]);
          liveGroups.delete(child.pid!);
        })();
        return stopping;
      },
    };
    nodes.push(node);

    // Ready: the MQTT listener is up and the management API answers as the administrator.
    const deadline = Date.now() + 90_000;
    for (;;) {
      if (exited) throw new Error(`RabbitMQ node ${name} exited during start-up:\n${logText().slice(-4000)}`);
      if (Date.now() > deadline) {
        await node.stop();
        throw new Error(`RabbitMQ node ${name} not ready within 90 s:\n${logText().slice(-4000)}`);
      }
      if (await portOpen(mqttPort)) {
        try {
          await api('GET', '/api/overview');
          break;
        } catch {}
      }
      await sleep(250);
    }
    return node;
  }

  let destroying: Promise<void> | undefined;
  return {
    dir,
    nodes,
    startNode,
    ctl: ctlAs,
    async joinCluster(joining, seed) {
      await joining.ctl(['stop_app']);
      await joining.ctl(['join_cluster', seed.name]);
      await joining.ctl(['start_app']);
      await joining.ctl(['await_startup']);
      // The management API of the joined node answers again (its listener restarts with the app).
      const deadline = Date.now() + 60_000;
      for (;;) {
        try {
          const overview = (await joining.api('GET', '/api/nodes')) as { name: string; running: boolean }[];
          if (overview.filter((n) => n.running).length >= 2) break;
        } catch {}
        if (Date.now() > deadline) throw new Error(`${joining.name} did not rejoin within 60 s:\n${joining.log().slice(-4000)}`);
        await sleep(250);
      }
    },
    destroy() {
      destroying ??= (async () => {
        await Promise.all(nodes.map((n) => n.stop()));
        epmd.kill('SIGKILL');
        await Promise.race([epmdExited, sleep(2000)]);
        liveGroups.delete(epmd.pid!);
        rmSync(dir, { recursive: true, force: true });
      })();
      return destroying;
    },
  };
}
