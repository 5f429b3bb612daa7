// A real Mosquitto 2 (Debian's /usr/sbin/mosquitto) on a free loopback port with its own
// configuration directory: the broker on the far side of a gateway (a Sparkplug host's).
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { deadPort } from '../mapping-support.js';

export interface MosquittoBroker {
  port: number;
  url: string;
  /** What it logged (connections, wills, refusals). */
  log(): string;
  stop(): Promise<void>;
}

const MOSQUITTO = '/usr/sbin/mosquitto';

/** Anonymous clients allowed, no persistence: `extra` lines are appended to the configuration. */
export async function startMosquitto(extra: string[] = []): Promise<MosquittoBroker> {
  const dir = mkdtempSync(join(tmpdir(), 'gatewayd-mosquitto-'));
  const port = await deadPort(); // a number for its configuration
  writeFileSync(join(dir, 'mosquitto.conf'), [`listener ${port} 127.0.0.1`, 'allow_anonymous true', 'persistence false', 'log_dest stderr', 'log_type all', ...extra, ''].join('\n'));
  const child = spawn(MOSQUITTO, ['-c', join(dir, 'mosquitto.conf')], { stdio: ['ignore', 'ignore', 'pipe'] });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  let output = '';
  child.stderr!.on('data', (d: Buffer) => (output += d.toString()));
  // Ready once it accepts a TCP connection (bounded).
  const deadline = Date.now() + 10_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`mosquitto exited: ${output}`);
    const ok = await new Promise<boolean>((resolve) => {
      const socket = net.connect(port, '127.0.0.1', () => {
        socket.destroy();
        resolve(true);
      });
      socket.once('error', () => resolve(false));
    });
    if (ok) break;
    if (Date.now() > deadline) throw new Error(`mosquitto did not listen on ${port} within 10 s: ${output}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  return {
    port,
    url: `mqtt://127.0.0.1:${port}`,
    log: () => output,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      await exited;
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
