// A bare aedes 2 broker with the LMDB persistence (durable acknowledgements on) as a child
// process, for kill -9 tests: argv[2] is the store directory. Prints one JSON line
// {"ready":true,"port":N}; SIGTERM closes it gracefully.
import { startBareBroker } from './bare-aedes.js';

const broker = await startBareBroker({ dir: process.argv[2]! });
process.stdout.write(JSON.stringify({ ready: true, port: broker.port }) + '\n');
process.once('SIGTERM', () => {
  void broker.close().then(() => process.exit(0));
});
