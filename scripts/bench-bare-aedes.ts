// A bare aedes broker in its own process, for the benchmarks' comparisons: argv[2] is
// - `aedes-1.2`: aedes 1.2.0, today's stable release (installed under the npm alias aedes-1.2);
// - `aedes-2`: 2.0.0-beta.1, what gatewayd runs on, with aedes' in-memory persistence;
// - `aedes-2-lmdb`: the same on gatewayd's LMDB persistence with its durable-ack gate
//   (test/support/bare-aedes.ts), to tell the broker state's share of a cost from the hooks'.
// Default hooks (no authentication, no authorization), the options gatewayd passes (aedes 1.2
// ignores the MQTT 5 ones), one TCP listener on 127.0.0.1 port 0. Prints {"ready":true,"port":N};
// SIGTERM closes it.
import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig } from '../src/config/index.js';
import { aedesBaseOptions } from '../src/mqtt/index.js';
import { startBareBroker } from '../test/support/bare-aedes.js';

interface BareAedes {
  handle(socket: net.Socket): unknown;
  close(done: () => void): void;
}

const kind = process.argv[2] ?? 'aedes-2';
const options = aedesBaseOptions(loadConfig({ env: {} }).mqtt);
let port: number;
let close: () => Promise<void>;
if (kind === 'aedes-2-lmdb') {
  const dir = mkdtempSync(join(tmpdir(), 'gatewayd-bench-bare-lmdb-'));
  const broker = await startBareBroker({ dir, aedes: options });
  port = broker.port;
  close = async () => {
    await broker.close();
    rmSync(dir, { recursive: true, force: true });
  };
} else {
  const { Aedes } = (await import(kind === 'aedes-1.2' ? 'aedes-1.2' : 'aedes')) as { Aedes: { createBroker(options: object): Promise<BareAedes> } };
  const aedes = await Aedes.createBroker(options);
  const server = net.createServer({ noDelay: true }, (socket) => {
    socket.setNoDelay(true);
    aedes.handle(socket);
  });
  await new Promise<void>((resolve) => server.listen({ port: 0, host: '127.0.0.1', backlog: 2048 }, resolve));
  port = (server.address() as net.AddressInfo).port;
  close = async () => {
    server.close();
    await new Promise<void>((resolve) => aedes.close(() => resolve()));
  };
}
process.stdout.write(JSON.stringify({ ready: true, port }) + '\n');
process.once('SIGTERM', () => {
  void close().then(() => process.exit(0));
});
