// A loopback port for a peer that must be told its port number (slapd, RabbitMQ, Mosquitto):
// bound on port 0 and released. Also "a port nothing listens on" for connection-refused cases.
import { createServer } from 'node:net';

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}
