// The test kits' port picker (test/support/free-port.ts): ports told to peers that bind them
// later come from below the kernel's ephemeral range, where neither listen(0) nor an outgoing
// connection of another test can take them first.
import { expect } from 'chai';
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { freePort, freePortIn } from './support/free-port.js';

const ephemeralStart = Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]);

const listenOn = (port: number, host = '127.0.0.1') =>
  new Promise<Server>((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen({ port, host }, () => resolve(server));
  });

describe('free ports for the test kits', () => {
  it('gives ports below the ephemeral range, each once, that a server can then bind', async () => {
    const ports: number[] = [];
    for (let i = 0; i < 50; i++) ports.push(await freePort());
    expect(new Set(ports).size).to.equal(50);
    for (const port of ports) expect(port).to.be.at.least(10_000).and.below(ephemeralStart);
    const servers = await Promise.all(ports.slice(0, 5).map((port) => listenOn(port)));
    await Promise.all(servers.map((s) => new Promise((resolve) => s.close(resolve))));
  });

  it('never gives a port that is in use on that host, nor one it gave before', async () => {
    // Nine of ten ports of a stretch held by servers here: the one left is the only answer, once.
    const held: Server[] = [];
    try {
      let left: number | undefined;
      for (let port = 29_000; port < 29_500 && left === undefined; port += 10) {
        const stretch = await Promise.all(Array.from({ length: 10 }, (_, i) => listenOn(port + i).catch(() => undefined)));
        const bound = stretch.filter((s): s is Server => s !== undefined);
        held.push(...bound);
        if (bound.length < 10) continue; // something else uses this stretch: try the next
        await new Promise((resolve) => bound[4]!.close(resolve));
        held.splice(held.indexOf(bound[4]!), 1);
        left = port + 4;
        expect(await freePortIn(port, port + 10)).to.equal(left);
        expect(await freePortIn(port, port + 10)).to.equal(undefined);
      }
      expect(left, 'a stretch of 10 free ports').to.be.a('number');
    } finally {
      await Promise.all(held.map((s) => new Promise((resolve) => s.close(resolve))));
    }
  });

  it('binds on the host it is asked for (a box of its own on 127.0.1.x)', async () => {
    const port = await freePort('127.0.1.9');
    const server = await listenOn(port, '127.0.1.9');
    await new Promise((resolve) => server.close(resolve));
  });
});
