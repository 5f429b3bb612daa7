// A real Mosquitto 2 (Debian's /usr/sbin/mosquitto) for the bridge tests and benchmarks: its own
// config and data directory in a temp dir, listening on a free loopback port (MQTT, and
// WebSocket when asked), anonymous clients allowed. `config` adds lines (a bridge `connection`
// block for the benchmark's comparison). kill() is SIGKILL; start() again runs it on the same
// port and data directory.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { connect as tcpConnect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { freePort } from './free-port.js';

export { freePort };
export const MOSQUITTO = '/usr/sbin/mosquitto';

export interface Mosquitto {
  port: number;
  /** The WebSocket listener's port (0 without websocket: true). */
  wsPort: number;
  /** With tls: true, a TLS listener that requires a client certificate signed by `ca`. */
  tls?: { port: number; ca: string; clientCert: string; clientKey: string };
  url: string;
  dir: string;
  /** Its process id while it runs. */
  pid(): number | undefined;
  /** Everything it logged. */
  output(): string;
  /** Starts it again (same ports, same data directory) after kill() or stop(). */
  start(): Promise<void>;
  /** SIGKILL, and wait for the exit. */
  kill(): Promise<void>;
  /** SIGTERM (Mosquitto saves its persistence file), and wait for the exit. */
  stop(): Promise<void>;
  /** Stops it and removes its directory. */
  close(): Promise<void>;
}

export interface MosquittoOptions {
  persistence?: boolean;
  websocket?: boolean;
  /** A TLS listener (mqtts) that requires a client certificate (made with openssl). */
  tls?: boolean;
  /** Extra configuration lines (after the listeners). */
  config?: string[];
}

function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = tcpConnect({ host: '127.0.0.1', port });
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A CA, a server certificate for 127.0.0.1 / localhost and a client certificate, made with openssl. */
function makeCertificates(dir: string) {
  const f = (name: string) => join(dir, name);
  const ssl = (...args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: 'ignore' });
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  writeFileSync(f('server.ext'), 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n');
  writeFileSync(f('client.ext'), 'extendedKeyUsage=clientAuth\n');
  ssl('req', '-x509', ...ec, '-keyout', f('ca.key'), '-out', f('ca.pem'), '-days', '2', '-subj', '/CN=gatewayd test upstream CA');
  for (const [name, cn] of [['server', 'localhost'], ['client', 'site-a-gw1']]) {
    ssl('req', ...ec, '-keyout', f(`${name}.key`), '-out', f(`${name}.csr`), '-subj', `/CN=${cn}`);
    ssl('x509', '-req', '-in', f(`${name}.csr`), '-CA', f('ca.pem'), '-CAkey', f('ca.key'), '-CAcreateserial', '-out', f(`${name}.pem`), '-days', '2', '-extfile', f(`${name}.ext`));
  }
  return { ca: f('ca.pem'), serverCert: f('server.pem'), serverKey: f('server.key'), clientCert: f('client.pem'), clientKey: f('client.key') };
}

export async function startMosquitto(options: MosquittoOptions = {}): Promise<Mosquitto> {
  const dir = mkdtempSync(join(tmpdir(), 'gatewayd-mosquitto-'));
  const port = await freePort();
  const wsPort = options.websocket ? await freePort() : 0;
  const tlsPort = options.tls ? await freePort() : 0;
  const certs = options.tls ? makeCertificates(dir) : undefined;
  const confPath = join(dir, 'mosquitto.conf');
  writeFileSync(
    confPath,
    [
      // Running as root, Mosquitto would drop to the mosquitto user, who cannot use this directory.
      ...(process.getuid?.() === 0 ? ['user root'] : []),
      'per_listener_settings false',
      'allow_anonymous true',
      'log_dest stderr',
      'log_type error',
      'log_type warning',
      'log_type notice',
      'log_type information',
      'connection_messages true',
      `persistence ${options.persistence ? 'true' : 'false'}`,
      `persistence_location ${dir}/`,
      'max_queued_messages 1000000',
      'max_inflight_messages 0',
      `listener ${port} 127.0.0.1`,
      ...(wsPort ? [`listener ${wsPort} 127.0.0.1`, 'protocol websockets'] : []),
      ...(certs
        ? [`listener ${tlsPort} 127.0.0.1`, `cafile ${certs.ca}`, `certfile ${certs.serverCert}`, `keyfile ${certs.serverKey}`, 'require_certificate true', 'use_identity_as_username true']
        : []),
      ...(options.config ?? []),
      '',
    ].join('\n'),
  );
  let child: ChildProcess | undefined;
  let exited: Promise<void> = Promise.resolve();
  let output = '';

  async function start(): Promise<void> {
    for (let attempt = 0; attempt < 3; attempt++) {
      const proc = spawn(MOSQUITTO, ['-c', confPath], { stdio: ['ignore', 'pipe', 'pipe'] });
      let gone = false;
      proc.stdout!.on('data', (d) => (output += d));
      proc.stderr!.on('data', (d) => (output += d));
      exited = new Promise((resolve) => proc.once('exit', () => ((gone = true), resolve())));
      proc.once('error', (err) => ((output += String(err)), (gone = true)));
      child = proc;
      const deadline = Date.now() + 10_000;
      while (!gone && Date.now() < deadline) {
        if ((await accepts(port)) && (!wsPort || (await accepts(wsPort))) && (!tlsPort || (await accepts(tlsPort)))) return;
        await sleep(50);
      }
      await stopWith('SIGKILL');
    }
    throw new Error(`mosquitto did not start: ${output}`);
  }

  async function stopWith(signal: NodeJS.Signals): Promise<void> {
    const proc = child;
    child = undefined;
    if (!proc || proc.exitCode !== null || proc.signalCode !== null) return;
    proc.kill(signal);
    const timer = setTimeout(() => proc.kill('SIGKILL'), 5000);
    await exited;
    clearTimeout(timer);
  }

  try {
    await start();
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
  return {
    port,
    wsPort,
    ...(certs ? { tls: { port: tlsPort, ca: certs.ca, clientCert: certs.clientCert, clientKey: certs.clientKey } } : {}),
    url: `mqtt://127.0.0.1:${port}`,
    dir,
    pid: () => child?.pid,
    output: () => output,
    start,
    kill: () => stopWith('SIGKILL'),
    stop: () => stopWith('SIGTERM'),
    async close() {
      await stopWith('SIGTERM');
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
