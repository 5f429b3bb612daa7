// A bare aedes broker in its own process, for the benchmarks' comparisons: argv[2] is `aedes-1.2`
// (aedes 1.2.0, today's stable release, installed under the npm alias aedes-1.2) or `aedes-2`
// (2.0.0-beta.1, what gatewayd runs on). Default hooks (no authentication, no authorization),
// aedes' in-memory persistence, the options gatewayd passes (aedes 1.2 ignores the MQTT 5 ones),
// one TCP listener on 127.0.0.1 port 0. Prints {"ready":true,"port":N}; SIGTERM closes it.
import net from 'node:net';
import { loadConfig } from '../src/config/index.js';
import { aedesBaseOptions } from '../src/mqtt/index.js';

interface BareAedes {
  handle(socket: net.Socket): unknown;
  close(done: () => void): void;
}

const which = process.argv[2] === 'aedes-1.2' ? 'aedes-1.2' : 'aedes';
const { Aedes } = (await import(which)) as { Aedes: { createBroker(options: object): Promise<BareAedes> } };
const aedes = await Aedes.createBroker(aedesBaseOptions(loadConfig({ env: {} }).mqtt));
const server = net.createServer({ noDelay: true }, (socket) => {
  socket.setNoDelay(true);
  aedes.handle(socket);
});
await new Promise<void>((resolve) => server.listen({ port: 0, host: '127.0.0.1', backlog: 2048 }, resolve));
process.stdout.write(JSON.stringify({ ready: true, port: (server.address() as net.AddressInfo).port }) + '\n');
process.once('SIGTERM', () => {
  server.close();
  aedes.close(() => process.exit(0));
});
