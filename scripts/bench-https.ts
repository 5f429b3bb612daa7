// HTTPS benchmark (docs/https.md): the daemon as shipped (npm start's Node flags, its own
// process, the gateway CA's RSA 2048 certificate) and TLS clients here.
//  (a) handshakes per second and the daemon's CPU per handshake (utime + stime of its process
//      from /proc, all its threads), full and resumed (session tickets), TLS 1.3 and 1.2, with
//      CONCURRENCY handshakes in flight; each connection is closed once its handshake is done;
//  (b) RSS: the daemon at idle before any HTTPS connection, after the handshake runs, and with
//      OPEN idle keep-alive connections; and what the listener itself adds, in a small process
//      of its own that starts only createHttpsServerPart (modules loaded and OpenSSL initialised
//      before the first reading, as MQTTS has in the daemon).
// Brief: fixed counts, a few seconds in all; every child is killed at the end.
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect, createSecureContext, type SecureVersion, type TLSSocket } from 'node:tls';
import { fileURLToPath } from 'node:url';
import { rssMiB, shippedNodeFlags, startDaemonAt } from './bench-footprint.js';
import { now } from './bench-support.js';

const FULL = Number(process.env.GATEWAYD_BENCH_TLS_FULL ?? 300);
const RESUMED = Number(process.env.GATEWAYD_BENCH_TLS_RESUMED ?? 600);
const CONCURRENCY = 4;
const OPEN = 200;
const LISTENER_CHILD = '--listener-child';

/** CPU time of a process so far, ms (all threads: utime + stime, in clock ticks of 10 ms). */
function cpuMs(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

const idle = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface Handshake {
  socket: TLSSocket;
  session?: Buffer;
}

/** One TLS handshake with 127.0.0.1:port; resolves when done (with the first session ticket when asked). */
function handshake(port: number, ca: string, version: SecureVersion, session?: Buffer, waitForTicket = false): Promise<Handshake> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port, ca, servername: 'localhost', minVersion: version, maxVersion: version, ...(session ? { session } : {}) });
    let done = false;
    socket.once('secureConnect', () => {
      if (!waitForTicket) {
        done = true;
        resolve({ socket });
      }
    });
    // TLS 1.3 tickets come after the handshake; 1.2's session is there at once.
    socket.once('session', (s: Buffer) => {
      if (!done) resolve({ socket, session: s });
      done = true;
    });
    socket.once('error', reject);
  });
}

/** `count` handshakes, CONCURRENCY at a time; returns handshakes/s and the daemon's CPU ms per handshake. */
async function runHandshakes(pid: number, port: number, ca: string, version: SecureVersion, count: number, resumed: boolean): Promise<{ perSecond: number; cpuMsPer: number }> {
  let session: Buffer | undefined;
  if (resumed) session = (await handshake(port, ca, version, undefined, true)).session;
  let started = 0;
  const cpu0 = cpuMs(pid);
  const t0 = now();
  const worker = async () => {
    while (started < count) {
      started++;
      const { socket } = await handshake(port, ca, version, session);
      if (resumed && !socket.isSessionReused()) throw new Error(`${version}: the session was not resumed`);
      if (!resumed && socket.isSessionReused()) throw new Error(`${version}: a full handshake was resumed`);
      socket.destroy();
    }
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, worker));
  const seconds = (now() - t0) / 1000;
  return { perSecond: count / seconds, cpuMsPer: (cpuMs(pid) - cpu0) / count };
}

/** RSS that createHttpsServerPart adds to a process that has its modules and OpenSSL loaded, MiB (child process). */
async function listenerRss(dataDir: string): Promise<number> {
  const child = spawn(process.execPath, [...shippedNodeFlags(), '--expose-gc', fileURLToPath(import.meta.url), LISTENER_CHILD, dataDir], { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  const code = await new Promise<number | null>((r) => child.once('exit', r));
  if (code !== 0) throw new Error(`listener child exited ${code}`);
  return (JSON.parse(out) as { addedMiB: number }).addedMiB;
}

export async function benchHttps(): Promise<Record<string, number>> {
  const dataDir = mkdtempSync(join(tmpdir(), 'gatewayd-bench-https-'));
  const { child, ready: readyLine } = await startDaemonAt(dataDir, shippedNodeFlags(), { GATEWAYD_SET__LOG__REQUESTS: 'false' });
  const ready = readyLine as Record<string, number>;
  const pid = child.pid!;
  const port = ready.https!;
  const results: Record<string, number> = {};
  try {
    const ca = readFileSync(join(dataDir, 'pki', 'ca.cert.pem'), 'utf8');
    // Idle before any HTTPS connection (start-up garbage collected a second after ready).
    await idle(2000);
    results.idleRssMiB = rssMiB(pid);
    // Warm-up (JIT, OpenSSL's lazy tables), not counted.
    await runHandshakes(pid, port, ca, 'TLSv1.3', 50, false);
    for (const [version, label] of [['TLSv1.3', 'tls13'], ['TLSv1.2', 'tls12']] as const) {
      const full = await runHandshakes(pid, port, ca, version, FULL, false);
      const resumed = await runHandshakes(pid, port, ca, version, RESUMED, true);
      results[`${label}FullPerSecond`] = full.perSecond;
      results[`${label}FullCpuMs`] = full.cpuMsPer;
      results[`${label}ResumedPerSecond`] = resumed.perSecond;
      results[`${label}ResumedCpuMs`] = resumed.cpuMsPer;
      console.log(
        `https ${version}: full ${full.perSecond.toFixed(0)} handshakes/s, ${full.cpuMsPer.toFixed(2)} ms daemon CPU each; ` +
          `resumed ${resumed.perSecond.toFixed(0)}/s, ${resumed.cpuMsPer.toFixed(2)} ms (${CONCURRENCY} in flight)`,
      );
    }
    await idle(1500);
    results.afterHandshakesRssMiB = rssMiB(pid);
    const open: TLSSocket[] = [];
    for (let i = 0; i < OPEN; i++) open.push((await handshake(port, ca, 'TLSv1.3')).socket);
    await idle(500);
    results.openConnectionsRssMiB = rssMiB(pid);
    results.perOpenConnectionKiB = ((results.openConnectionsRssMiB - results.afterHandshakesRssMiB) * 1024) / OPEN;
    for (const s of open) s.destroy();
    results.listenerRssMiB = await listenerRss(dataDir);
    console.log(
      `https RSS: daemon idle ${results.idleRssMiB.toFixed(1)} MiB, after the handshakes ${results.afterHandshakesRssMiB.toFixed(1)} MiB, ` +
        `with ${OPEN} open connections ${results.openConnectionsRssMiB.toFixed(1)} MiB (${results.perOpenConnectionKiB.toFixed(0)} KiB each); ` +
        `the listener alone adds ${results.listenerRssMiB.toFixed(2)} MiB`,
    );
  } finally {
    child.kill('SIGTERM');
    await new Promise((r) => (child.exitCode !== null ? r(undefined) : child.once('exit', r)));
    rmSync(dataDir, { recursive: true, force: true });
  }
  return results;
}

/** Child mode: the listener on the daemon's certificate, RSS before and after it listens and served one handshake. */
async function listenerChild(dataDir: string): Promise<void> {
  const gc = (globalThis as { gc?: () => void }).gc!;
  const { default: express } = await import('express');
  const { createHttpsServerPart } = await import('../src/http/https-server.js');
  const { createSilentLogger } = await import('../src/log/index.js');
  const pair = { cert: readFileSync(join(dataDir, 'pki', 'server.cert.pem'), 'utf8'), key: readFileSync(join(dataDir, 'pki', 'server.key.pem'), 'utf8') };
  const ca = readFileSync(join(dataDir, 'pki', 'ca.cert.pem'), 'utf8');
  createSecureContext(pair); // OpenSSL initialised, as by MQTTS in the daemon
  const app = express();
  const settle = async () => {
    for (let i = 0; i < 3; i++) gc();
    await idle(300);
    return rssMiB(process.pid);
  };
  const before = await settle();
  const part = createHttpsServerPart({ app, host: '127.0.0.1', port: 0, shutdownTimeoutMs: 1000, log: createSilentLogger(), certificate: { load: async () => pair, watch: () => {}, close: () => {} } });
  await part.start();
  (await handshake(part.port(), ca, 'TLSv1.3')).socket.destroy();
  const after = await settle();
  await part.stop();
  process.stdout.write(JSON.stringify({ addedMiB: after - before }));
}

if (process.argv[1] === fileURLToPath(import.meta.url) && process.argv[2] === LISTENER_CHILD) {
  listenerChild(process.argv[3]!).then(
    () => process.exit(0),
    (err: unknown) => {
      console.error(err);
      process.exit(1);
    },
  );
}
