// A TCP proxy on 127.0.0.1 (port 0) between the gateway and an upstream broker, controlled by
// the test: outages are made here, never by stopping the upstream broker.
// - cut(): every connection is closed and new ones are reset at once (a link that is down);
// - stall(): connections stay open but no byte passes either way, new ones are accepted and
//   held the same (a black hole: a VPN that hangs, a NAT that forgot the flow);
// - slow(bytesPerSecond): bytes pass at that rate each way (a cellular uplink);
// - restore(): back to passing everything (stalled bytes are then delivered in order).
import net from 'node:net';

export interface TcpProxy {
  port: number;
  /** Connections accepted so far. */
  readonly accepted: number;
  /** Connections open now. */
  readonly open: number;
  cut(): void;
  stall(): void;
  slow(bytesPerSecond: number): void;
  restore(): void;
  close(): Promise<void>;
}

type Mode = { kind: 'pass' } | { kind: 'cut' } | { kind: 'stall' } | { kind: 'slow'; bytesPerSecond: number };

/** One direction of a proxied connection: bytes are held while stalled and paced while slow. */
class Pipe {
  private readonly held: Buffer[] = [];
  private timer: NodeJS.Timeout | undefined;
  constructor(
    from: net.Socket,
    private readonly to: net.Socket,
    private readonly mode: () => Mode,
  ) {
    from.on('data', (chunk: Buffer) => {
      this.held.push(chunk);
      this.flush();
    });
  }

  flush(): void {
    const mode = this.mode();
    if (this.to.destroyed) return;
    if (mode.kind === 'pass') {
      while (this.held.length) this.to.write(this.held.shift()!);
      return;
    }
    if (mode.kind !== 'slow' || this.timer || !this.held.length) return;
    // Paced: at most a tenth of a second's worth every 100 ms.
    const budget = Math.max(1, Math.floor(mode.bytesPerSecond / 10));
    const chunk = this.held[0]!;
    const part = chunk.subarray(0, budget);
    if (part.length === chunk.length) this.held.shift();
    else this.held[0] = chunk.subarray(budget);
    this.to.write(part);
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.flush();
    }, 100);
  }

  stop(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
  }
}

export async function startTcpProxy(target: { host?: string; port: number }): Promise<TcpProxy> {
  let mode: Mode = { kind: 'pass' };
  const conns = new Set<{ client: net.Socket; upstream: net.Socket; pipes: Pipe[] }>();
  let accepted = 0;
  const server = net.createServer((client) => {
    accepted++;
    if (mode.kind === 'cut') {
      client.resetAndDestroy();
      return;
    }
    client.setNoDelay(true);
    const upstream = net.connect({ host: target.host ?? '127.0.0.1', port: target.port });
    upstream.setNoDelay(true);
    const conn = { client, upstream, pipes: [] as Pipe[] };
    conn.pipes = [new Pipe(client, upstream, () => mode), new Pipe(upstream, client, () => mode)];
    conns.add(conn);
    const end = () => {
      if (!conns.delete(conn)) return;
      for (const p of conn.pipes) p.stop();
      client.destroy();
      upstream.destroy();
    };
    for (const s of [client, upstream]) {
      s.on('error', end);
      s.on('close', end);
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as net.AddressInfo).port;
  const flushAll = () => {
    for (const c of conns) for (const p of c.pipes) p.flush();
  };
  return {
    port,
    get accepted() {
      return accepted;
    },
    get open() {
      return conns.size;
    },
    cut() {
      mode = { kind: 'cut' };
      for (const c of [...conns]) {
        c.client.resetAndDestroy();
        c.upstream.destroy();
      }
    },
    stall() {
      mode = { kind: 'stall' };
    },
    slow(bytesPerSecond) {
      mode = { kind: 'slow', bytesPerSecond };
      flushAll();
    },
    restore() {
      mode = { kind: 'pass' };
      flushAll();
    },
    async close() {
      for (const c of [...conns]) {
        c.client.destroy();
        c.upstream.destroy();
      }
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
