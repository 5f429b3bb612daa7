// A field device of the test kit in a process of its own, so that a benchmark measures the
// gateway's CPU without the device's: argv[2] `modbus` (Modbus TCP, holding registers 0..99 set
// to their address) or `cip` (the CIP server with DINT tag Tags[100]). Prints one JSON line
// {"port":N}; SIGTERM stops it. Started with an IPC channel, a Modbus device takes
// {holding: [address, value]} messages (the hostile-peer harness's control device).
import { startModbusServer } from '../mapping-support.js';
import { startCipServer } from './cip-server.js';

const kind = process.argv[2];
let stop: () => Promise<void>;
let port: number;
if (kind === 'modbus') {
  const server = await startModbusServer();
  for (let i = 0; i < 100; i++) server.holding[i] = i;
  ({ stop, port } = server);
  process.on('message', (m: { holding?: [number, number] }) => {
    if (m.holding) server.holding[m.holding[0]] = m.holding[1];
    process.send?.({ done: true });
  });
} else if (kind === 'cip') {
  const server = await startCipServer({ tags: { Tags: { type: 'DINT', length: 100, value: Array.from({ length: 100 }, (_, i) => i) } } });
  ({ stop, port } = server);
} else throw new Error(`unknown device kind ${kind}`);
process.stdout.write(JSON.stringify({ port }) + '\n');
process.once('SIGTERM', () => void stop().then(() => process.exit(0)));
